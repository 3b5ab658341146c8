package gobuild

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fixture writes a one-package module into a new directory.
func fixture(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files["go.mod"] = "module example.com/fixture\n\ngo 1.22\n"
	for name, body := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const hello = "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"ready\") }\n"

func TestBuildStaticReproducible(t *testing.T) {
	ctx := context.Background()
	// Two copies of the same module in different directories: -trimpath
	// must make the location irrelevant.
	var outs [][]byte
	for i := 0; i < 2; i++ {
		dir := fixture(t, map[string]string{"main.go": hello})
		out := filepath.Join(t.TempDir(), "bin")
		if err := Build(ctx, Options{Dir: dir, Package: ".", Output: out}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, b)
		if bytes.Contains(b, []byte(dir)) {
			t.Error("binary contains the build directory")
		}
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Error("two builds of the same source differ")
	}
}

func TestCheckStaticRefuses(t *testing.T) {
	dir := fixture(t, map[string]string{"main.go": hello})
	arm := filepath.Join(t.TempDir(), "arm64")
	cmd := exec.Command("go", "build", "-o", arm, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build arm64 fixture: %v\n%s", err, out)
	}
	script := filepath.Join(t.TempDir(), "script")
	os.WriteFile(script, []byte("#!/bin/sh\necho ready\n"), 0o755)

	cases := []struct {
		name, path, want string
	}{
		// Debian's /bin/true is a dynamically linked PIE.
		{"dynamic", "/bin/true", "dynamically linked (interpreter /lib64/ld-linux-x86-64.so.2)"},
		{"arm64", arm, "it is for EM_AARCH64 (ELFCLASS64), the image is linux/amd64; rebuild it with GOARCH=amd64, or build a linux/arm64 image (-arch arm64)"},
		{"script", script, "not an ELF file"},
		{"missing", filepath.Join(t.TempDir(), "nope"), "not an ELF file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckStatic(tc.path, "")
			if err == nil || !errors.Is(err, ErrNotStatic) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckStatic(%s) = %v, want ErrNotStatic with %q", tc.path, err, tc.want)
			}
		})
	}
}

func TestDynamicCgoBinaryRefused(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no C compiler to build a cgo fixture (Debian build-essential); /bin/true covers the dynamic case")
	}
	dir := fixture(t, map[string]string{"main.go": "package main\n\n// #include <stdlib.h>\nimport \"C\"\n\nfunc main() { C.abs(1) }\n"})
	out := filepath.Join(t.TempDir(), "cgo")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build cgo fixture: %v\n%s", err, b)
	}
	if err := CheckStatic(out, ""); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Fatalf("cgo binary: %v", err)
	}
	// Built by us, the same package is refused at build time: without cgo
	// it has no Go files left.
	err := Build(context.Background(), Options{Dir: dir, Package: ".", Output: filepath.Join(t.TempDir(), "x")})
	if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("Build of a cgo package: %v", err)
	}
}

func TestHashSource(t *testing.T) {
	ctx := context.Background()
	dir := fixture(t, map[string]string{"main.go": hello, "lib/lib.go": "package lib\n\nconst X = 1\n"})
	os.WriteFile(filepath.Join(dir, "main.go"), []byte(strings.Replace(hello, "import \"fmt\"", "import (\n\t\"fmt\"\n\t_ \"example.com/fixture/lib\"\n)", 1)), 0o644)
	a, err := HashSource(ctx, "", dir, ".", "")
	if err != nil {
		t.Fatal(err)
	}
	if a.Files != 2 {
		t.Errorf("%d files hashed, want 2", a.Files)
	}
	b, _ := HashSource(ctx, "", dir, ".", "amd64")
	if a.SHA256 != b.SHA256 {
		t.Fatal("hash is not stable")
	}
	// A change in a dependency package changes the hash.
	os.WriteFile(filepath.Join(dir, "lib/lib.go"), []byte("package lib\n\nconst X = 2\n"), 0o644)
	c, _ := HashSource(ctx, "", dir, ".", "")
	if c.SHA256 == a.SHA256 {
		t.Fatal("changed dependency, same hash")
	}
	// A file the build does not read does not.
	os.WriteFile(filepath.Join(dir, "README"), []byte("x"), 0o644)
	d, _ := HashSource(ctx, "", dir, ".", "")
	if d.SHA256 != c.SHA256 {
		t.Fatal("unrelated file changed the hash")
	}
}

// TestHashSourceModAndSyso: go.mod (its go line sets the language
// version) and .syso objects (linked in as they are) reach the binary, so
// they reach the hash.
func TestHashSourceModAndSyso(t *testing.T) {
	ctx := context.Background()
	dir := fixture(t, map[string]string{"main.go": hello})
	hash := func(what string) string {
		t.Helper()
		s, err := HashSource(ctx, "", dir, ".", "")
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return s.SHA256
	}
	base := hash("base")
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/fixture\n\ngo 1.23\n"), 0o644)
	mod := hash("go.mod")
	if mod == base {
		t.Error("a changed go line in go.mod kept the hash")
	}
	os.WriteFile(filepath.Join(dir, "blob_linux_amd64.syso"), []byte("object one"), 0o644)
	syso := hash("syso")
	if syso == mod {
		t.Error("a new .syso file kept the hash")
	}
	os.WriteFile(filepath.Join(dir, "blob_linux_amd64.syso"), []byte("object two"), 0o644)
	if hash("syso edit") == syso {
		t.Error("a changed .syso file kept the hash")
	}
}

func TestToolchain(t *testing.T) {
	t.Setenv("GOFLAGS", "")
	t.Setenv("GOEXPERIMENT", "")
	tc, err := ReadToolchain(context.Background(), "", t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tc.GoVersion, "go1.") || tc.GOAMD64 == "" || tc.GOARM64 != "" || !strings.Contains(tc.Env, "GOARCH=amd64") {
		t.Errorf("amd64: %+v", tc)
	}
	tc, err = ReadToolchain(context.Background(), "", t.TempDir(), "arm64")
	if err != nil {
		t.Fatal(err)
	}
	if tc.GOARM64 == "" || tc.GOAMD64 != "" || !strings.Contains(tc.Env, "GOARCH=arm64") {
		t.Errorf("arm64: %+v", tc)
	}
	// What reaches go build from the environment is recorded.
	t.Setenv("GOFLAGS", "-tags=hotpath_test")
	t.Setenv("GOEXPERIMENT", "boringcrypto")
	tc2, err := ReadToolchain(context.Background(), "", t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	if tc2.GOFLAGS != "-tags=hotpath_test" || tc2.GOEXPERIMENT != "boringcrypto" {
		t.Errorf("GOFLAGS %q, GOEXPERIMENT %q: not recorded", tc2.GOFLAGS, tc2.GOEXPERIMENT)
	}
	if tc.GOFLAGS == tc2.GOFLAGS || tc.GOEXPERIMENT == tc2.GOEXPERIMENT {
		t.Errorf("%+v and %+v do not differ", tc, tc2)
	}
}

// An arm64 image builds arm64 binaries, accepts them, and refuses the
// amd64 build of the same program naming the other architecture.
func TestBuildArm64(t *testing.T) {
	ctx := context.Background()
	dir := fixture(t, map[string]string{"main.go": hello})
	bins := map[string]string{}
	for _, goarch := range []string{"amd64", "arm64"} {
		bins[goarch] = filepath.Join(t.TempDir(), goarch)
		if err := Build(ctx, Options{Dir: dir, Package: ".", Output: bins[goarch], Arch: goarch}); err != nil {
			t.Fatal(err)
		}
		if err := CheckStatic(bins[goarch], goarch); err != nil {
			t.Fatalf("%s binary refused for %s: %v", goarch, goarch, err)
		}
	}
	err := CheckStatic(bins["amd64"], "arm64")
	if want := "it is for EM_X86_64 (ELFCLASS64), the image is linux/arm64; rebuild it with GOARCH=arm64, or build a linux/amd64 image (-arch amd64)"; err == nil || !errors.Is(err, ErrNotStatic) || !strings.Contains(err.Error(), want) {
		t.Fatalf("amd64 binary in an arm64 image: %v, want %q", err, want)
	}
	if err := CheckStatic(bins["arm64"], "riscv64"); err == nil || !strings.Contains(err.Error(), `architecture "riscv64": hotpath builds for amd64 or arm64`) {
		t.Fatalf("unknown architecture: %v", err)
	}
}

// Build constraints pick other files for another architecture, so the
// source hash is per architecture.
func TestHashSourcePerArch(t *testing.T) {
	ctx := context.Background()
	dir := fixture(t, map[string]string{
		"main.go":      hello,
		"cpu_amd64.go": "package main\n\nconst cpu = 1\n",
		"cpu_arm64.go": "package main\n\nconst cpu = 2\n",
	})
	x, err := HashSource(ctx, "", dir, ".", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	a, err := HashSource(ctx, "", dir, ".", "arm64")
	if err != nil {
		t.Fatal(err)
	}
	if x.SHA256 == a.SHA256 || x.Files != 2 || a.Files != 2 {
		t.Fatalf("amd64 %+v, arm64 %+v: want 2 files each and different hashes", x, a)
	}
	os.WriteFile(filepath.Join(dir, "cpu_arm64.go"), []byte("package main\n\nconst cpu = 3\n"), 0o644)
	if x2, _ := HashSource(ctx, "", dir, ".", "amd64"); x2.SHA256 != x.SHA256 {
		t.Error("an arm64-only file changed the amd64 hash")
	}
	if a2, _ := HashSource(ctx, "", dir, ".", "arm64"); a2.SHA256 == a.SHA256 {
		t.Error("an arm64-only file did not change the arm64 hash")
	}
}
