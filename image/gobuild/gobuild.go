// Package gobuild builds Go programs as static linux/amd64 or linux/arm64
// binaries whose bytes depend only on their sources and the toolchain, and
// checks that a binary a user brings is one for the image's architecture.
package gobuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hotpath-dev/hotpath/image/machine"
)

// Flags are the build flags of every binary in the image:
//   - -trimpath: no build-machine paths in the binary;
//   - -buildvcs=false: no VCS stamp (a dirty tree would change the bytes
//     without changing the code);
//   - -s -w: no symbol table or DWARF (smaller initramfs, smaller EFI binary);
//   - -buildid=: no build id (it hashes action IDs that include paths).
var Flags = []string{"-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid="}

// Env is the environment that makes a build static and for the appliance's
// CPU: no cgo (so no libc and no dynamic loader), linux/amd64. GOAMD64 is
// left as the user has it (default v1) and recorded by Toolchain.
var Env = EnvFor("amd64")

// EnvFor is Env for another GOARCH (a cross-compile: Go needs nothing
// else). GOARM64 is left as the user has it (default v8.0), like GOAMD64.
func EnvFor(goarch string) []string {
	return []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + goarch}
}

// arch returns goarch, or amd64 for "".
func arch(goarch string) string {
	if goarch == "" {
		return "amd64"
	}
	return goarch
}

// Options says what to build.
type Options struct {
	// Dir is the directory the go command runs in: the module (or
	// workspace) that provides Package.
	Dir string
	// Package is an import path or a ./relative package path.
	Package string
	// Arch is the GOARCH to build for; "" means amd64.
	Arch string
	// Output is the binary's path.
	Output string
	// Go is the go command; empty means "go" from PATH.
	Go string
	// Stderr receives the go command's diagnostics; nil discards them (they
	// are included in the returned error either way).
	Stderr io.Writer
}

// Build builds o.Package statically into o.Output and checks the result.
func Build(ctx context.Context, o Options) error {
	args := append([]string{"build", "-o", o.Output}, Flags...)
	args = append(args, o.Package)
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, goCmd(o.Go), args...)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), EnvFor(arch(o.Arch))...)
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	if o.Stderr != nil {
		cmd.Stderr = io.MultiWriter(&stderr, o.Stderr)
	}
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "build constraints exclude all Go files") || strings.Contains(msg, "cgo") {
			msg += "\n(the image needs a static linux/" + arch(o.Arch) + " binary built with CGO_ENABLED=0; a package that needs cgo cannot be used)"
		}
		return fmt.Errorf("go build %s (in %s): %w\n%s", o.Package, o.Dir, err, msg)
	}
	if err := CheckStatic(o.Output, o.Arch); err != nil {
		return fmt.Errorf("go build %s: %w", o.Package, err)
	}
	return nil
}

// ErrNotStatic is wrapped by CheckStatic's errors.
var ErrNotStatic = errors.New("not a static Linux executable for the image's architecture")

// notStatic is ErrNotStatic naming the architecture.
type notStatic struct{ goarch string }

func (e notStatic) Error() string        { return "not a static linux/" + e.goarch + " executable" }
func (e notStatic) Is(target error) bool { return target == ErrNotStatic }

// CheckStatic reports whether name is an ELF executable for goarch ("" is
// amd64) that needs nothing at run time: no program interpreter (PT_INTERP,
// the dynamic loader) and no shared libraries (DT_NEEDED). The initramfs
// has neither a loader nor libraries, and the kernel runs only its own
// architecture's code, so anything else would fail only at boot, as "exec
// format error" or "no such file" on the serial console.
func CheckStatic(name, goarch string) error {
	m, err := machine.For(goarch)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	goarch, want := m.Arch, m.ELF
	ns := notStatic{goarch}
	f, err := elf.Open(name)
	if err != nil {
		return fmt.Errorf("%s: %w: not an ELF file (%v)", name, ns, err)
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 || f.Machine != want {
		hint := ""
		for _, other := range machine.All {
			if f.Class == elf.ELFCLASS64 && f.Machine == other.ELF {
				hint = fmt.Sprintf(", or build a linux/%s image (-arch %s)", other.Arch, other.Arch)
			}
		}
		return fmt.Errorf("%s: %w: it is for %s (%s), the image is linux/%s; rebuild it with GOARCH=%s%s",
			name, ns, f.Machine, f.Class, goarch, goarch, hint)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("%s: %w: ELF type %s is not an executable", name, ns, f.Type)
	}
	if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return fmt.Errorf("%s: %w: OS ABI %s is not Linux", name, ns, f.OSABI)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			interp, _ := io.ReadAll(p.Open())
			return fmt.Errorf("%s: %w: it is dynamically linked (interpreter %s); build it with CGO_ENABLED=0 or link it statically", name, ns, strings.TrimRight(string(interp), "\x00"))
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("%s: read dynamic section: %w", name, err)
	}
	if len(libs) > 0 {
		return fmt.Errorf("%s: %w: it needs shared libraries %s", name, ns, strings.Join(libs, ", "))
	}
	if f.Entry == 0 {
		return fmt.Errorf("%s: %w: no entry point (a shared library?)", name, ErrNotStatic)
	}
	return nil
}

// Toolchain identifies the compiler and the settings that reach the bytes.
type Toolchain struct {
	GoVersion string `json:"go_version"` // e.g. go1.26.8
	Compiler  string `json:"compiler"`   // gc
	GOAMD64   string `json:"goamd64"`
	GOARM64   string `json:"goarm64,omitempty"`
	Flags     string `json:"flags"`
	Env       string `json:"env"`
	// GOFLAGS and GOEXPERIMENT reach every go build from the environment
	// (or `go env -w`) and change the bytes; they are recorded as the go
	// command resolves them.
	GOFLAGS      string `json:"goflags"`
	GOEXPERIMENT string `json:"goexperiment"`
}

// ReadToolchain asks the go command in dir what it builds with for goarch
// ("" is amd64). Only that architecture's level variable is recorded.
func ReadToolchain(ctx context.Context, goBin, dir, goarch string) (*Toolchain, error) {
	goarch = arch(goarch)
	var env struct{ GOVERSION, GOAMD64, GOARM64, GOFLAGS, GOEXPERIMENT string }
	// go env shows GOARM64 only when GOARCH is arm64.
	if err := goJSON(ctx, goBin, dir, EnvFor(goarch), &env, "env", "-json", "GOVERSION", "GOAMD64", "GOARM64", "GOFLAGS", "GOEXPERIMENT"); err != nil {
		return nil, err
	}
	t := &Toolchain{
		GoVersion:    env.GOVERSION,
		Compiler:     "gc",
		Flags:        strings.Join(Flags, " "),
		Env:          strings.Join(EnvFor(goarch), " "),
		GOFLAGS:      env.GOFLAGS,
		GOEXPERIMENT: env.GOEXPERIMENT,
	}
	if goarch == "arm64" {
		t.GOARM64 = env.GOARM64
	} else {
		t.GOAMD64 = env.GOAMD64
	}
	return t, nil
}

// Source is the identity of a package's source: the hash of every file the
// build reads from outside the standard library (which the Go version
// covers) and the versions of the modules they come from.
type Source struct {
	Package string `json:"package"` // import path
	// SHA256 covers, for each non-standard package in the build in import
	// path order, its import path and each Go, assembly, assembly header,
	// .syso and embedded file's name and contents, plus each module's go.mod
	// (the main module's too: its go line sets the language version, its
	// godebug lines the defaults) and each dependency module's path,
	// version and go.sum hash.
	SHA256  string   `json:"sha256"`
	Files   int      `json:"files"`
	Modules []string `json:"modules,omitempty"` // path@version of dependency modules
}

type listed struct {
	ImportPath string
	Dir        string
	Standard   bool
	GoFiles    []string
	SFiles     []string
	HFiles     []string
	SysoFiles  []string
	EmbedFiles []string
	Module     *struct {
		Path    string
		Version string
		Sum     string
		Main    bool
		GoMod   string // path of the go.mod file used
		Replace *struct {
			Path    string
			Version string
			Sum     string
		}
	}
	DepsErrors []*struct{ Err string }
	Error      *struct{ Err string }
}

// HashSource computes the Source of pkg as built for linux/goarch ("" is
// amd64) without cgo, using `go list -deps`: build constraints select other
// files for another architecture.
func HashSource(ctx context.Context, goBin, dir, pkg, goarch string) (*Source, error) {
	cmd := exec.CommandContext(ctx, goCmd(goBin), "list", "-deps", "-json", pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), EnvFor(arch(goarch))...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s (in %s): %w\n%s", pkg, dir, err, strings.TrimSpace(stderr.String()))
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("go list %s: %w", pkg, err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list %s: %s: %s", pkg, p.ImportPath, p.Error.Err)
		}
		if !p.Standard {
			pkgs = append(pkgs, p)
		}
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("go list %s: no packages", pkg)
	}
	// -deps lists the named package last; record its import path, not the
	// (possibly relative) name it was given by.
	main := pkgs[len(pkgs)-1].ImportPath
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].ImportPath < pkgs[j].ImportPath })
	h := sha256.New()
	s := &Source{Package: main}
	mods := map[string]string{}
	gomods := map[string]bool{}
	for _, p := range pkgs {
		fmt.Fprintf(h, "package %s\n", p.ImportPath)
		if m := p.Module; m != nil && !m.Main {
			v, sum := m.Version, m.Sum
			if m.Replace != nil {
				v, sum = m.Replace.Path+"@"+m.Replace.Version, m.Replace.Sum
			}
			mods[m.Path] = m.Path + "@" + v
			if sum != "" {
				// A module from the module cache is identified by its go.sum
				// hash; its files are hashed below anyway.
				fmt.Fprintf(h, "module %s %s %s\n", m.Path, v, sum)
			}
		}
		if m := p.Module; m != nil && m.GoMod != "" && !gomods[m.GoMod] {
			gomods[m.GoMod] = true
			b, err := os.ReadFile(m.GoMod)
			if err != nil {
				return nil, fmt.Errorf("hash source of %s: %w", pkg, err)
			}
			fmt.Fprintf(h, "go.mod %s %x\n", m.Path, sha256.Sum256(b))
		}
		var files []string
		for _, fs := range [][]string{p.GoFiles, p.SFiles, p.HFiles, p.SysoFiles, p.EmbedFiles} {
			files = append(files, fs...)
		}
		sort.Strings(files)
		for _, name := range files {
			b, err := os.ReadFile(filepath.Join(p.Dir, name))
			if err != nil {
				return nil, fmt.Errorf("hash source of %s: %w", pkg, err)
			}
			fs := sha256.Sum256(b)
			fmt.Fprintf(h, "file %s %x\n", name, fs)
			s.Files++
		}
	}
	for _, m := range mods {
		s.Modules = append(s.Modules, m)
	}
	sort.Strings(s.Modules)
	s.SHA256 = hex.EncodeToString(h.Sum(nil))
	return s, nil
}

func goJSON(ctx context.Context, goBin, dir string, env []string, v any, args ...string) error {
	cmd := exec.CommandContext(ctx, goCmd(goBin), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

func goCmd(s string) string {
	if s == "" {
		return "go"
	}
	return s
}
