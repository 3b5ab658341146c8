package kernelconfig

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Toolchain identifies the compiler and linker that build the kernel; it is
// part of the cache key because a different compiler makes different code.
type Toolchain struct {
	Compiler string // first line of `gcc --version`
	Linker   string // first line of `ld --version`
	Full     string // complete output of both, hashed into the key
}

// What kbuild needs on the host, with the Debian package that provides it.
var buildTools = []struct{ cmd, pkg string }{
	{"make", "make"},
	{"gcc", "gcc (build-essential)"},
	{"ld", "binutils"},
	{"flex", "flex"},
	{"bison", "bison"},
	{"bc", "bc"},
	{"perl", "perl"},
	{"gzip", "gzip"},
}

// Headers needed by host tools: objtool (ORC unwinder) links libelf.
var buildHeaders = []struct {
	paths []string
	pkg   string
}{
	{[]string{"/usr/include/libelf.h", "/usr/include/libelf/libelf.h"}, "libelf-dev"},
}

// CheckTools reports every missing build dependency of target t at once,
// with what to install, instead of letting make fail on the first one
// half-way through. A cross target needs the host's tools too (kbuild's
// own programs are built with the host gcc).
func CheckTools(target *Target) error {
	var missing []string
	if target.CrossCompile != "" {
		if _, err := exec.LookPath(target.CrossCompile + "gcc"); err != nil {
			missing = append(missing, fmt.Sprintf("%sgcc (package %s)", target.CrossCompile, target.CrossPkg))
		}
	}
	for _, t := range buildTools {
		if _, err := exec.LookPath(t.cmd); err != nil {
			missing = append(missing, fmt.Sprintf("%s (package %s)", t.cmd, t.pkg))
		}
	}
	for _, h := range buildHeaders {
		found := false
		for _, p := range h.paths {
			if _, err := os.Stat(p); err == nil {
				found = true
			}
		}
		if !found {
			missing = append(missing, fmt.Sprintf("%s (package %s)", h.paths[0], h.pkg))
		}
	}
	if len(missing) > 0 {
		group := "build"
		if target.CrossCompile != "" {
			group = "build " + target.Name
		}
		return fmt.Errorf("kernel build tools missing: %s\ninstall them with `image/deps.sh %s` (as root)", strings.Join(missing, ", "), group)
	}
	return nil
}

// DetectToolchain runs the compiler and linker of target for their
// versions. For a cross target, Full also names the target and its prefix
// and holds the host compiler's version (it builds kbuild's own tools), so
// the key of a cross build differs from any native one.
func DetectToolchain(ctx context.Context, target *Target) (Toolchain, error) {
	var t Toolchain
	version := func(cmd, pkg string) (string, error) {
		out, err := exec.CommandContext(ctx, cmd, "--version").Output()
		if err != nil {
			return "", fmt.Errorf("%s --version: %w (install %s)", cmd, err, pkg)
		}
		return string(out), nil
	}
	pkg := "build-essential"
	if target.CrossCompile != "" {
		pkg = target.CrossPkg
	}
	gcc, err := version(target.CrossCompile+"gcc", pkg)
	if err != nil {
		return t, err
	}
	ld, err := version(target.CrossCompile+"ld", pkg)
	if err != nil {
		return t, err
	}
	t.Compiler = firstLine(gcc)
	t.Linker = firstLine(ld)
	t.Full = gcc + ld
	if target.CrossCompile != "" {
		host, err := version("gcc", "build-essential")
		if err != nil {
			return t, err
		}
		t.Full = strings.Join(target.makeVars(), " ") + "\n" + t.Full + host
	}
	return t, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(l)
}
