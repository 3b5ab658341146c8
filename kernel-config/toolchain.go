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

// CheckTools reports every missing build dependency at once, with what to
// install, instead of letting make fail on the first one half-way through.
func CheckTools() error {
	var missing []string
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
		return fmt.Errorf("kernel build tools missing: %s\ninstall them with `image/deps.sh build` (as root) "+
			"or `apt-get install build-essential flex bison bc libelf-dev`", strings.Join(missing, ", "))
	}
	return nil
}

// DetectToolchain runs the compiler and linker for their versions.
func DetectToolchain(ctx context.Context) (Toolchain, error) {
	var t Toolchain
	gcc, err := exec.CommandContext(ctx, "gcc", "--version").Output()
	if err != nil {
		return t, fmt.Errorf("gcc --version: %w (install build-essential)", err)
	}
	ld, err := exec.CommandContext(ctx, "ld", "--version").Output()
	if err != nil {
		return t, fmt.Errorf("ld --version: %w (install binutils)", err)
	}
	t.Compiler = firstLine(string(gcc))
	t.Linker = firstLine(string(ld))
	t.Full = string(gcc) + string(ld)
	return t, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(l)
}
