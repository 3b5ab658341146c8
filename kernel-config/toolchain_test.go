package kernelconfig

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTools writes executables into a new directory, each printing its
// text when run with --version, and returns the directory.
func fakeTools(t *testing.T, tools map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range tools {
		script := "#!/bin/sh\nprintf '%s' '" + text + "'\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestDetectToolchain: the compiler and linker named by their first
// lines, the whole of both in Full; a cross target's Full names the
// target and holds the host compiler too; a missing compiler names the
// package to install (the cross one for a cross target).
func TestDetectToolchain(t *testing.T) {
	const gcc, ld, xgcc, xld = "gcc (Debian 12.2.0-14) 12.2.0\nCopyright\n", "GNU ld 2.40\n", "x-gcc 12\n", "x-ld 2.40\n"
	cross := &Target{Name: "arm64", KernelArch: "arm64", CrossCompile: "x-", CrossPkg: "gcc-x"}
	for _, tc := range []struct {
		name   string
		target *Target
		tools  map[string]string
		want   Toolchain
		err    string
	}{
		{"native", AMD64, map[string]string{"gcc": gcc, "ld": ld}, Toolchain{"gcc (Debian 12.2.0-14) 12.2.0", "GNU ld 2.40", gcc + ld}, ""},
		{"native without gcc", AMD64, map[string]string{"ld": ld}, Toolchain{}, "(install build-essential)"},
		{"cross", cross, map[string]string{"gcc": gcc, "x-gcc": xgcc, "x-ld": xld}, Toolchain{"x-gcc 12", "x-ld 2.40", "ARCH=arm64 CROSS_COMPILE=x-\n" + xgcc + xld + gcc}, ""},
		{"cross without its gcc", cross, map[string]string{"gcc": gcc, "ld": ld}, Toolchain{},
			`x-gcc --version: exec: "x-gcc": executable file not found in $PATH (install gcc-x)`},
		{"cross without the host gcc", cross, map[string]string{"x-gcc": xgcc, "x-ld": xld}, Toolchain{},
			`gcc --version: exec: "gcc": executable file not found in $PATH (install build-essential)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PATH", fakeTools(t, tc.tools))
			got, err := DetectToolchain(context.Background(), tc.target)
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one with %q", err, tc.err)
			case tc.err == "" && (err != nil || got != tc.want):
				t.Errorf("%+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestCheckTools: every missing tool and header is named with its
// package in one error, with the deps.sh group to run; a header is found
// at any of its paths.
func TestCheckTools(t *testing.T) {
	dir := t.TempDir()
	header, missing := filepath.Join(dir, "present.h"), filepath.Join(dir, "missing.h")
	if err := os.WriteFile(header, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tools, headers := buildTools, buildHeaders
	t.Cleanup(func() { buildTools, buildHeaders = tools, headers })
	type tool = struct{ cmd, pkg string }
	type hdr = struct {
		paths []string
		pkg   string
	}
	cross := &Target{Name: "arm64", CrossCompile: "no-such-prefix-", CrossPkg: "gcc-x"}
	for _, tc := range []struct {
		name    string
		target  *Target
		tools   []tool
		headers []hdr
		want    []string // in the error; none: no error
	}{
		{"all there", AMD64, []tool{{"sh", "dash"}}, []hdr{{[]string{missing, header}, "libfoo-dev"}}, nil},
		{"a header missing", AMD64, []tool{{"sh", "dash"}}, []hdr{{[]string{missing, missing + "2"}, "libfoo-dev"}},
			[]string{"missing: " + missing + " (package libfoo-dev)\n", "`image/deps.sh build`"}},
		{"a tool missing", AMD64, []tool{{"sh", "dash"}, {"no-such-tool-hotpath", "pkgx"}}, []hdr{{[]string{header}, "libfoo-dev"}},
			[]string{"missing: no-such-tool-hotpath (package pkgx)\n"}},
		{"the cross compiler missing", cross, []tool{{"sh", "dash"}}, []hdr{{[]string{header}, "libfoo-dev"}},
			[]string{"missing: no-such-prefix-gcc (package gcc-x)\n", "`image/deps.sh build arm64`"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buildTools, buildHeaders = tc.tools, tc.headers
			err := CheckTools(tc.target)
			if tc.want == nil && err != nil || tc.want != nil && err == nil {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
