package main

import (
	"archive/zip"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const source = "github.com/hotpath-dev/hotpath" // the examples' required_plugins source

// Versions packer init cannot install are refused before anything is
// built (plugins.go checkVersion refuses prereleases, ListInstallations
// names with metadata or that are not canonical).
func TestCheckVersion(t *testing.T) {
	for _, tc := range []struct {
		version string
		ok      bool
		why     string
	}{
		{"0.1.0", true, ""},
		{"1.20.300", true, ""},
		{"0.1.0-rc1", false, "prerelease"},
		{"0.1.0-dev", false, "prerelease"},
		{"0.1.0+build.5", false, "metadata"},
		{"v0.1.0", false, "without the v"},
		{"01.0.0", false, "leading zeros"},
		{"1.0", false, "major.minor.patch"},
		{"", false, "major.minor.patch"},
	} {
		err := checkVersion(tc.version)
		if tc.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.why) {
			t.Errorf("checkVersion(%q) = %v, want ok=%v (%q)", tc.version, err, tc.ok, tc.why)
		}
		if tc.ok {
			continue
		}
		out := filepath.Join(t.TempDir(), "dist")
		if err := release(tc.version, out, []string{"linux/amd64"}, "../..", "", io.Discard); err == nil {
			t.Errorf("release(%q) succeeded", tc.version)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("release(%q) created %s", tc.version, out)
		}
	}
}

// The platforms are the scaffolding's, less what Go cannot build.
func TestTargets(t *testing.T) {
	dist := []string{"aix/ppc64", "darwin/amd64", "darwin/arm64", "freebsd/386", "freebsd/amd64", "freebsd/arm",
		"freebsd/arm64", "linux/386", "linux/amd64", "linux/arm", "linux/arm64", "linux/riscv64", "netbsd/arm64",
		"openbsd/amd64", "openbsd/arm64", "solaris/amd64", "windows/386", "windows/amd64", "windows/arm", "windows/arm64"}
	want := []string{"darwin/amd64", "darwin/arm64", "freebsd/386", "freebsd/amd64", "freebsd/arm", "freebsd/arm64",
		"linux/386", "linux/amd64", "linux/arm", "linux/arm64", "netbsd/arm64", "openbsd/amd64", "solaris/amd64",
		"windows/386", "windows/amd64", "windows/arm", "windows/arm64"}
	if got := Targets(dist); !slices.Equal(got, want) {
		t.Errorf("Targets = %v\nwant      %v", got, want)
	}

	real, err := distList()
	if err != nil {
		t.Fatal(err)
	}
	got := Targets(real)
	for _, must := range []string{"windows/amd64", "windows/arm64", "freebsd/amd64", "linux/arm64", "darwin/arm64", "netbsd/amd64", "openbsd/amd64", "solaris/amd64"} {
		if !slices.Contains(got, must) {
			t.Errorf("the release for this Go lacks %s: %v", must, got)
		}
	}
	for _, never := range []string{"openbsd/arm64", "darwin/386", "js/wasm"} {
		if slices.Contains(got, never) {
			t.Errorf("the release builds %s, which the scaffolding does not", never)
		}
	}
}

// fakeRelease writes release files for version on this platform and
// windows/amd64 whose binary is a shell script answering describe with
// desc, so that checkInstall can be shown to catch each fault.
func fakeRelease(t *testing.T, version, desc string) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the fake plugin is a shell script")
	}
	dir := t.TempDir()
	sums := map[string]string{}
	for _, p := range []string{runtime.GOOS + "_" + runtime.GOARCH, "windows_amd64"} {
		name := fmt.Sprintf("packer-plugin-hotpath_v%s_x5.0_%s", version, p)
		bin := name
		if strings.HasPrefix(p, "windows") {
			bin += ".exe"
		}
		script := fmt.Sprintf("#!/bin/sh\necho '%s'\n", desc)
		if err := os.WriteFile(filepath.Join(dir, bin), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		sum, err := zipOne(filepath.Join(dir, name+".zip"), filepath.Join(dir, bin))
		if err != nil {
			t.Fatal(err)
		}
		sums[name+".zip"] = sum
	}
	if err := writeSums(filepath.Join(dir, "packer-plugin-hotpath_v"+version+"_SHA256SUMS"), sums); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The check of what packer init checks fails where Packer would.
func TestCheckInstall(t *testing.T) {
	host := runtime.GOOS + "_" + runtime.GOARCH
	good := `{"version":"0.3.0","api_version":"x5.0"}`
	sums := "packer-plugin-hotpath_v0.3.0_SHA256SUMS"
	for _, tc := range []struct {
		name    string
		desc    string
		version string // asked for; default 0.3.0
		mutate  func(dir string) error
		want    string // in the error; "" = passes
	}{
		{name: "good", desc: good},
		{name: "prerelease describe", desc: `{"version":"0.3.0-dev","api_version":"x5.0"}`, want: "pre-release"},
		{name: "other version describe", desc: `{"version":"0.3.1","api_version":"x5.0"}`, want: "reported version"},
		{name: "other API describe", desc: `{"version":"0.3.0","api_version":"x5.1"}`, want: "API version"},
		{name: "prerelease asked", desc: good, version: "0.3.0-rc1", want: "prerelease"},
		{name: "other version asked", desc: good, version: "0.3.1", want: "SHA256SUMS"},
		{name: "checksum", desc: good, mutate: func(dir string) error {
			return os.WriteFile(filepath.Join(dir, fmt.Sprintf("packer-plugin-hotpath_v0.3.0_x5.0_%s.zip", host)), []byte("PK"), 0o644)
		}, want: "checksums did not match"},
		{name: "checksum line", desc: good, mutate: func(dir string) error {
			return appendFile(filepath.Join(dir, sums), "deadbeef packer-plugin-hotpath_v0.3.0_x5.0_linux_386.zip\n")
		}, want: "is not <sha256> <file>"},
		{name: "API 6", desc: good, mutate: func(dir string) error {
			return appendFile(filepath.Join(dir, sums), strings.Repeat("0", 64)+"  packer-plugin-hotpath_v0.3.0_x6.0_linux_386.zip\n")
		}, want: "MAJOR"},
		{name: "name parts", desc: good, mutate: func(dir string) error {
			return appendFile(filepath.Join(dir, sums), strings.Repeat("0", 64)+"  packer-plugin-hotpath_v0.3.0_linux_386.zip\n")
		}, want: "malformed filename"},
		{name: "no zip for the platform", desc: good, mutate: func(dir string) error {
			return os.WriteFile(filepath.Join(dir, sums), nil, 0o644)
		}, want: "could not install any compatible version"},
		{name: "second file in the zip", desc: good, mutate: func(dir string) error {
			name := fmt.Sprintf("packer-plugin-hotpath_v0.3.0_x5.0_%s", host)
			return rezip(dir, name, name, "README")
		}, want: "should be alone"},
		{name: "binary named without the version", desc: good, mutate: func(dir string) error {
			name := fmt.Sprintf("packer-plugin-hotpath_v0.3.0_x5.0_%s", host)
			return rezip(dir, name, "packer-plugin-hotpath")
		}, want: "Packer looks for"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := fakeRelease(t, "0.3.0", tc.desc)
			if tc.mutate != nil {
				if err := tc.mutate(dir); err != nil {
					t.Fatal(err)
				}
			}
			version := tc.version
			if version == "" {
				version = "0.3.0"
			}
			err := checkInstall(dir, source, version, runtime.GOOS, runtime.GOARCH)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("checkInstall: %v, want %q", err, tc.want)
			}
		})
	}
	// The Windows zip holds the .exe, as Packer looks for it there.
	if err := checkInstall(fakeRelease(t, "0.3.0", good), source, "0.3.0", "windows", "amd64"); err != nil {
		t.Errorf("windows/amd64: %v", err)
	}
	if err := checkInstall(fakeRelease(t, "0.3.0", good), source, "0.3.0", "freebsd", "amd64"); err == nil {
		t.Errorf("freebsd/amd64 passed without a zip for it")
	}
}

// rezip replaces name.zip with a zip of the given entries (the binary's
// bytes under each name) and fixes its checksum line.
func rezip(dir, name string, entries ...string) error {
	bin := filepath.Join(dir, name)
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return err
	}
	var files []string
	for _, e := range entries {
		if err := os.WriteFile(filepath.Join(tmp, e), data, 0o755); err != nil {
			return err
		}
		files = append(files, filepath.Join(tmp, e))
	}
	if err := zipFiles(filepath.Join(dir, name+".zip"), files); err != nil {
		return err
	}
	sum, err := fileSHA256(filepath.Join(dir, name+".zip"))
	if err != nil {
		return err
	}
	sumsPath := filepath.Join(dir, "packer-plugin-hotpath_v0.3.0_SHA256SUMS")
	b, err := os.ReadFile(sumsPath)
	if err != nil {
		return err
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasSuffix(l, " "+name+".zip") {
			l = sum + "  " + name + ".zip"
		}
		lines = append(lines, l)
	}
	return os.WriteFile(sumsPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// zipFiles writes a zip of files, one entry each under its base name.
func zipFiles(path string, files []string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		w, err := zw.Create(filepath.Base(file))
		if err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	return zw.Close()
}

func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// The real release, for this machine: every file packer init needs passes
// its checks (checkInstall), with a binary that describes itself with the
// released version and API x5.0. (Only this platform: a cross build of
// the plugin compiles the AWS SDK again, minutes per platform; the release
// workflow builds them all, and TestCheckInstall covers Windows' names.)
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the plugin twice and the init twice")
	}
	out := filepath.Join(t.TempDir(), "dist")
	host := runtime.GOOS + "/" + runtime.GOARCH
	targets := []string{host}
	if err := release("0.2.0", out, targets, "../..", "../../..", io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, target := range targets {
		goos, goarch, _ := strings.Cut(target, "/")
		if err := checkInstall(out, source, "0.2.0", goos, goarch); err != nil {
			t.Errorf("packer init on %s would fail: %v", target, err)
		}
	}
	if err := checkInstall(out, source, "0.2.1", runtime.GOOS, runtime.GOARCH); err == nil {
		t.Errorf("the files of 0.2.0 pass as 0.2.1")
	}

	entries, _ := os.ReadDir(out)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := []string{"hotpath-init_v0.2.0_SHA256SUMS", "hotpath-init_v0.2.0_linux_amd64", "hotpath-init_v0.2.0_linux_arm64",
		"packer-plugin-hotpath_v0.2.0_SHA256SUMS"}
	for _, target := range targets {
		name := "packer-plugin-hotpath_v0.2.0_x5.0_" + strings.Replace(target, "/", "_", 1)
		if strings.HasPrefix(target, "windows/") {
			want = append(want, name+".exe")
		} else {
			want = append(want, name)
		}
		want = append(want, name+".zip")
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}

	// One init per builder architecture, each an executable for it.
	for goarch, machine := range map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64} {
		ef, err := elf.Open(filepath.Join(out, "hotpath-init_v0.2.0_linux_"+goarch))
		if err != nil {
			t.Fatal(err)
		}
		if ef.Machine != machine || ef.Type != elf.ET_EXEC {
			t.Errorf("%s init: %v %v, want a %v executable", goarch, ef.Machine, ef.Type, machine)
		}
		ef.Close()
	}

	if err := release("0.2.0", out, []string{host}, "../..", "", io.Discard); err == nil {
		t.Error("an existing output directory was reused")
	}
}
