// Package kernelconfig turns a Linux source tree into hotpath's appliance
// kernel: it merges the Kconfig fragments (base guest support plus the
// appliance policy) onto allnoconfig, verifies that every requested option
// stuck, and builds a cached, reproducible EFI-stub kernel (x86's bzImage,
// arm64's Image, cross-built) with the image's initramfs and command line
// built in.
//
// Cache layout (CacheDir/kernel):
//
//	*.lock               flocks: one process per source, config dir, build tree
//	src/<sha16>/         tarballs, extracted once
//	conf/<id16>/         scratch O= directory for allnoconfig + merge (one per
//	                     source and target), and
//	                     the verified configs (reused while the tree, the
//	                     fragments and the toolchain are unchanged)
//	build/<key16>/       O= build trees, one per key (source, config, toolchain);
//	                     build.log is the last make's full output
//	bzimage/<v>.bzImage  finished kernels, one per (key, initramfs, cmdline)
//	bzimage/<v>.Image    (the arm64 ones named after their make target),
//	                     never overwritten, so a Result stays valid
package kernelconfig

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// maxCmdline is COMMAND_LINE_SIZE of x86 and arm64 alike (including the
// final NUL).
const maxCmdline = 2048

// keyVersion is hashed into every key: bump it when the way a kernel is
// built changes, so old cache entries are not reused.
const keyVersion = "hotpath-kernel-v1"

// Fixed build identity for reproducible kernels (what `uname -v` shows).
var reproducibleEnv = []string{
	"KBUILD_BUILD_TIMESTAMP=Thu Jan  1 00:00:00 UTC 1970",
	"KBUILD_BUILD_USER=hotpath",
	"KBUILD_BUILD_HOST=hotpath",
	"KBUILD_BUILD_VERSION=1",
	"LC_ALL=C",
	"TZ=UTC",
}

// Options for Configure and Build.
type Options struct {
	// Source is a Linux tarball or source tree; "" means DefaultSource.
	Source string
	// Arch is the target architecture, a GOARCH or kbuild name (see
	// LookupTarget); "" means amd64.
	Arch string
	// CacheDir holds extracted sources, build trees and kernels; "" means
	// DefaultCacheDir().
	CacheDir string
	// Initramfs is a newc cpio archive to build into the kernel; "" builds
	// a kernel without one.
	Initramfs string
	// Cmdline is appended to the policy's built-in command line
	// ("console=ttyS0,115200n8 mitigations=off no_timer_check panic=10 panic_on_oops=1" on x86).
	Cmdline string
	// Jobs is make's -j; 0 means the number of CPUs.
	Jobs int
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// Fragments replaces the built-in fragments of the target (for amd64
	// base.config, policy.config) when non-nil; see TargetFragments.
	Fragments []*Fragment
	// ProgressEvery is the progress interval; 0 means 10s.
	ProgressEvery time.Duration
	// Rebuild ignores an already built bzImage for the same inputs and
	// runs make again (the result replaces it atomically); used to check
	// that builds are reproducible.
	Rebuild bool

	target *Target // resolved from Arch by setDefaults
}

// Configured is a verified configuration, before any compilation.
type Configured struct {
	Target       *Target
	Source       *Source
	Toolchain    Toolchain
	Requirements []Requirement
	// Config is the merged, verified .config text without the per-image
	// initramfs and command line: the configuration part of the key.
	Config       string
	ConfigSHA256 string
	// Key identifies a build tree: sha256 of (source identity, Config,
	// toolchain). The initramfs and command line are not part of it.
	Key string
	// PolicyCmdline is the built-in command line the policy asks for.
	PolicyCmdline string
	Summary       string
}

// Result describes a built kernel.
type Result struct {
	// BzImage is the path of the EFI-stub kernel (a bzImage on amd64, an
	// Image on arm64); it stays valid after later builds.
	BzImage      string
	Arch         string // the target's GOARCH name, "amd64" or "arm64"
	Key          string
	SourceID     string
	Version      string // kernel version, e.g. "6.1.192"
	ConfigSHA256 string // of the merged config without initramfs/cmdline
	Compiler     string
	Cmdline      string // the full built-in command line
	Cached       bool   // no make run was needed
	Size         int64
	SHA256       string // of the bzImage
	Config       string // path of the final .config (with initramfs/cmdline)
	BuildDir     string
	LogFile      string
	Summary      string // policy summary
	Duration     time.Duration
}

// DefaultCacheDir is $HOTPATH_CACHE, else $XDG_CACHE_HOME/hotpath, else
// ~/.cache/hotpath.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv("HOTPATH_CACHE"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "hotpath"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: set HOTPATH_CACHE: %w", err)
	}
	return filepath.Join(home, ".cache", "hotpath"), nil
}

func (o *Options) setDefaults() error {
	t, err := LookupTarget(o.Arch)
	if err != nil {
		return err
	}
	o.target = t
	if o.CacheDir == "" {
		d, err := DefaultCacheDir()
		if err != nil {
			return err
		}
		o.CacheDir = d
	}
	abs, err := filepath.Abs(o.CacheDir)
	if err != nil {
		return err
	}
	o.CacheDir = abs
	if strings.ContainsAny(abs, " \t\n:") {
		// kbuild splits O= and CONFIG_INITRAMFS_SOURCE on whitespace.
		return fmt.Errorf("cache directory %q: kbuild cannot use a path with spaces or colons; set HOTPATH_CACHE to another directory", abs)
	}
	if o.Jobs <= 0 {
		o.Jobs = runtime.NumCPU()
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 10 * time.Second
	}
	if o.Fragments == nil {
		f, err := TargetFragments(o.target)
		if err != nil {
			return err
		}
		o.Fragments = f
	}
	return os.MkdirAll(filepath.Join(o.CacheDir, "kernel"), 0o755)
}

// Configure resolves the source, merges the fragments onto allnoconfig,
// runs olddefconfig and verifies every requirement. It compiles nothing
// but Kconfig itself.
func Configure(ctx context.Context, o Options) (*Configured, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	return configure(ctx, &o)
}

func configure(ctx context.Context, o *Options) (*Configured, error) {
	t := o.target
	if err := CheckTools(t); err != nil {
		return nil, err
	}
	reqs, err := Requirements(o.Fragments)
	if err != nil {
		return nil, err
	}
	src, err := ResolveSource(ctx, o.Source, o.CacheDir, o.Log)
	if err != nil {
		return nil, err
	}
	// A symbol no supported tree defines is a typo in a fragment; one only
	// another tree defines is reported and not counted.
	absent, err := verifyDefined(src.Tree, t.KernelArch, reqs)
	if err != nil {
		return nil, err
	}
	all := reqs
	reqs = checkable(reqs, absent)
	tc, err := DetectToolchain(ctx, t)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(o.CacheDir, "kernel", "conf", shortHash(src.ID+t.scope()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	unlock, err := lockFile(ctx, dir+".lock", "configuration", o.Log)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Kconfig is a pure function of the tree, the fragments and the
	// toolchain (its $(cc-option) tests): its result is kept and reused,
	// which spares a warm build two Kconfig runs. It is verified anyway.
	merged := filepath.Join(dir, "merged-"+Key(src.ID, MergedFragments(reqs).String(), tc.Full)[:16]+".config")
	if text, err := os.ReadFile(merged); err == nil {
		if cfg, err := ParseConfig(strings.NewReader(string(text))); err == nil {
			if err := verify(t, src.Tree, reqs, cfg, merged); err != nil {
				return nil, err
			}
			return newConfigured(t, src, tc, all, reqs, absent, cfg, string(text)), nil
		}
	}
	logf := filepath.Join(dir, "config.log")
	if err := runMake(ctx, t, src.Tree, dir, logf, 1, nil, "allnoconfig"); err != nil {
		return nil, err
	}
	base, err := readConfig(filepath.Join(dir, ".config"))
	if err != nil {
		return nil, err
	}
	base.Merge(MergedFragments(reqs))
	if err := writeFile(filepath.Join(dir, ".config"), base.String()); err != nil {
		return nil, err
	}
	if err := runMake(ctx, t, src.Tree, dir, logf, 1, nil, "olddefconfig"); err != nil {
		return nil, err
	}
	final := filepath.Join(dir, ".config")
	text, err := os.ReadFile(final)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(strings.NewReader(string(text)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", final, err)
	}
	if err := copyAtomic(final, merged); err != nil {
		return nil, err
	}
	if err := verify(t, src.Tree, reqs, cfg, merged); err != nil {
		return nil, err
	}
	return newConfigured(t, src, tc, all, reqs, absent, cfg, string(text)), nil
}

// newConfigured: all is every requirement, for the summary; reqs the ones
// the tree defines, which every later verification checks.
func newConfigured(t *Target, src *Source, tc Toolchain, all, reqs []Requirement, absent []Absent, cfg *Config, text string) *Configured {
	c := &Configured{
		Target:       t,
		Source:       src,
		Toolchain:    tc,
		Requirements: reqs,
		Config:       text,
		ConfigSHA256: sha256Hex([]byte(text)),
		Summary:      Summary(all, absent),
	}
	c.Key = Key(src.ID, c.Config, tc.Full)
	if v, ok := cfg.Get("CMDLINE"); ok {
		c.PolicyCmdline = Unquote(v)
	}
	return c
}

// Key is the cache key of a build tree: sha256 over the key version, the
// source identity, the merged configuration (without per-image values) and
// the toolchain's version text (for a cross build also ARCH and
// CROSS_COMPILE; see DetectToolchain).
func Key(sourceID, config, toolchain string) string {
	h := sha256.New()
	for _, part := range []string{keyVersion, sourceID, config, toolchain} {
		fmt.Fprintf(h, "%d\n%s\n", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func verify(t *Target, tree string, reqs []Requirement, cfg *Config, path string) error {
	vs := Check(reqs, cfg)
	if len(vs) == 0 {
		return nil
	}
	// The violations are the error; explaining them is best effort.
	_ = Explain(tree, t.KernelArch, cfg, vs)
	return &PolicyError{Violations: vs, Config: path}
}

// withImage applies the per-image values to the requirements. The policy's
// CMDLINE is kept beside the image's: Check holds the final line to both
// (it must start with the policy's and override none of its mitigations).
func withImage(reqs []Requirement, image *Fragment) []Requirement {
	out := append([]Requirement(nil), reqs...)
	for _, r := range image.Requirements {
		replaced := false
		for i := range out {
			if out[i].Symbol == r.Symbol && r.Symbol != "CMDLINE" {
				r.Why = out[i].Why + " (" + r.Why + ")"
				out[i], replaced = r, true
			}
		}
		if !replaced {
			out = append(out, r)
		}
	}
	return out
}

func verifyFile(t *Target, tree string, reqs []Requirement, path string) error {
	cfg, err := readConfig(path)
	if err != nil {
		return err
	}
	return verify(t, tree, reqs, cfg, path)
}

// sameVisibility reports whether have differs from want only in the values
// of the per-image symbols, and not in whether there is an initramfs at
// all (which shows or hides other symbols).
func sameVisibility(have, want *Config, image *Fragment) bool {
	perImage := map[string]bool{}
	for _, r := range image.Requirements {
		perImage[r.Symbol] = true
	}
	for _, s := range want.Symbols() {
		w, _ := want.Get(s)
		h, ok := have.Get(s)
		if perImage[s] || (w == NotSet && !ok) {
			continue
		}
		if h != w {
			return false
		}
	}
	h, _ := have.Get("INITRAMFS_SOURCE")
	w, _ := want.Get("INITRAMFS_SOURCE")
	return (h == `""` || h == "") == (w == `""` || w == "")
}

// hasValues reports whether have holds every value of want.
func hasValues(have, want *Config) bool {
	for _, s := range want.Symbols() {
		w, _ := want.Get(s)
		h, ok := have.Get(s)
		if w == NotSet && !ok {
			continue
		}
		if h != w {
			return false
		}
	}
	return true
}

// Build configures, verifies and builds the kernel with o.Initramfs and
// o.Cmdline built in, reusing the cache where it can.
func Build(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	initrdSum, err := o.prepare()
	if err != nil {
		return nil, err
	}
	c, err := configure(ctx, &o)
	if err != nil {
		return nil, err
	}
	// One build per tree at a time; other keys (and configuring) go on.
	unlock, err := lockFile(ctx, filepath.Join(o.CacheDir, "kernel", "build", c.Key[:16]+".lock"), "kernel build", o.Log)
	if err != nil {
		return nil, err
	}
	defer unlock()
	r, err := newResult(o, c, initrdSum)
	if err != nil {
		return nil, err
	}
	if r.cached(o, start) {
		return r, nil
	}
	reqs, err := writeBuildConfig(ctx, o, c, r, initrdSum)
	if err != nil {
		return nil, err
	}
	if err := compile(ctx, o, c, r, reqs, start); err != nil {
		return nil, err
	}
	if err := r.copyOut(c); err != nil {
		return nil, err
	}
	r.Duration = time.Since(start)
	fmt.Fprintf(o.Log, "kernel: built %s (%d bytes) in %s\n", r.BzImage, r.Size, r.Duration.Round(time.Second))
	return r, nil
}

// prepare sets the defaults, checks the per-image command line and makes
// the initramfs path absolute; it returns the initramfs's sha256 ("" for
// none), part of the cached kernel's name.
func (o *Options) prepare() (initrdSum string, err error) {
	if err := o.setDefaults(); err != nil {
		return "", err
	}
	if strings.ContainsAny(o.Cmdline, "\n\r\x00") {
		return "", fmt.Errorf("kernel command line %q: must be one line", o.Cmdline)
	}
	if err := CheckExtraCmdline(o.Cmdline); err != nil {
		return "", err
	}
	if o.Initramfs == "" {
		return "", nil
	}
	abs, err := filepath.Abs(o.Initramfs)
	if err != nil {
		return "", err
	}
	o.Initramfs = abs
	if initrdSum, err = fileSHA256(o.Initramfs); err != nil {
		return "", fmt.Errorf("initramfs: %w", err)
	}
	return initrdSum, nil
}

// newResult names everything the build of c with this initramfs and
// command line reads and writes: the build tree of c's key, and the
// cached kernel and .config of this variant.
func newResult(o Options, c *Configured, initrdSum string) (*Result, error) {
	cmdline := strings.TrimSpace(c.PolicyCmdline + " " + strings.TrimSpace(o.Cmdline))
	if len(cmdline) >= maxCmdline {
		return nil, fmt.Errorf("kernel command line is %d bytes; %s allows at most %d", len(cmdline), c.Target.Name, maxCmdline-1)
	}
	r := &Result{
		Arch:         c.Target.Name,
		Key:          c.Key,
		SourceID:     c.Source.ID,
		Version:      c.Source.Version,
		ConfigSHA256: c.ConfigSHA256,
		Compiler:     c.Toolchain.Compiler,
		Cmdline:      cmdline,
		Summary:      c.Summary,
		BuildDir:     filepath.Join(o.CacheDir, "kernel", "build", c.Key[:16]),
	}
	r.LogFile = filepath.Join(r.BuildDir, "build.log")
	outDir := filepath.Join(o.CacheDir, "kernel", "bzimage")
	variant := sha256Hex([]byte(c.Key + "\n" + initrdSum + "\n" + cmdline))
	r.BzImage = filepath.Join(outDir, variant+"."+c.Target.MakeTarget)
	r.Config = filepath.Join(outDir, variant+".config")
	return r, nil
}

// cached reports whether this variant was built before (and not
// o.Rebuild), filling in what the build would have.
func (r *Result) cached(o Options, start time.Time) bool {
	st, err := os.Stat(r.BzImage)
	if err != nil || o.Rebuild {
		return false
	}
	sum, err := fileSHA256(r.BzImage)
	if err != nil {
		return false
	}
	r.Cached, r.Size, r.SHA256 = true, st.Size(), sum
	r.Duration = time.Since(start)
	fmt.Fprintf(o.Log, "kernel: cached %s\n", r.BzImage)
	return true
}

// writeBuildConfig writes the per-image part into the build tree: the
// initramfs at a fixed path inside it (so the path never changes the
// config) and the full command line. It returns the requirements the built
// .config must meet.
func writeBuildConfig(ctx context.Context, o Options, c *Configured, r *Result, initrdSum string) ([]Requirement, error) {
	if err := os.MkdirAll(r.BuildDir, 0o755); err != nil {
		return nil, err
	}
	initrdPath := filepath.Join(r.BuildDir, "initramfs.cpio")
	image := &Fragment{Name: "image"}
	add := func(sym, val string) {
		image.Requirements = append(image.Requirements, Requirement{Symbol: sym, Value: val, Fragment: "image", Why: "per-image value"})
	}
	if o.Initramfs != "" {
		if err := copyIfDifferent(o.Initramfs, initrdPath, initrdSum); err != nil {
			return nil, fmt.Errorf("initramfs: %w", err)
		}
		add("INITRAMFS_SOURCE", Quote(initrdPath))
		// Stored uncompressed: the whole vmlinux (initramfs included) is
		// compressed once by the bzImage; compressing twice costs build
		// and boot time for nothing.
		add("INITRAMFS_COMPRESSION_NONE", "y")
	} else {
		os.Remove(initrdPath)
		add("INITRAMFS_SOURCE", `""`)
	}
	add("CMDLINE", Quote(r.Cmdline))
	reqs := withImage(c.Requirements, image)
	cfg, err := ParseConfig(strings.NewReader(c.Config))
	if err != nil {
		return nil, err
	}
	cfg.Merge(image.Config())
	buildConfig := filepath.Join(r.BuildDir, ".config")
	// Rewrite .config only when a value differs: an untouched .config
	// spares make a Kconfig run (syncconfig, with its dozens of compiler
	// probes) when only the initramfs contents changed.
	needKconfig := false
	have, err := readConfig(buildConfig)
	switch {
	case err == nil && hasValues(have, cfg):
		// Unchanged: make runs no Kconfig at all.
	case err == nil && sameVisibility(have, cfg, image):
		// Only string values changed (the command line): edit them in
		// place, so make's syncconfig finds no new symbol to ask about.
		have.Merge(image.Config())
		if err := writeFile(buildConfig, have.String()); err != nil {
			return nil, err
		}
	default:
		if err := writeFile(buildConfig, cfg.String()); err != nil {
			return nil, err
		}
		needKconfig = true
	}
	if _, err := os.Stat(filepath.Join(r.BuildDir, ".hotpath-objects")); err != nil || needKconfig {
		// Complete the .config (new symbols get their defaults; make's own
		// syncconfig would prompt for them) and verify it before spending
		// half an hour on a tree never built.
		if err := runMake(ctx, c.Target, c.Source.Tree, r.BuildDir, r.LogFile, 1, nil, "olddefconfig"); err != nil {
			return nil, err
		}
		if err := verifyFile(c.Target, c.Source.Tree, reqs, buildConfig); err != nil {
			return nil, err
		}
	}
	return reqs, nil
}

// compile runs make, with progress on o.Log, and verifies the .config make
// actually used (after its syncconfig) again: a kernel that fails the
// policy is never handed out.
func compile(ctx context.Context, o Options, c *Configured, r *Result, reqs []Requirement, start time.Time) error {
	fmt.Fprintf(o.Log, "kernel: building Linux %s %s %s in %s (-j%d, log %s)\n", c.Source.Version, c.Target.Name, c.Target.MakeTarget, r.BuildDir, o.Jobs, r.LogFile)
	est := expectedObjects(o, r.BuildDir, c.Source.Tree)
	logEstimate(o, est, countObjects(r.BuildDir))
	stop := startProgress(ctx, o, r.BuildDir, est, start)
	cpu, err := runMakeCPU(ctx, c.Target, c.Source.Tree, r.BuildDir, r.LogFile, o.Jobs, reproducibleEnv, c.Target.MakeTarget)
	objects := stop()
	if err != nil {
		return err
	}
	built := objects - readInt(filepath.Join(r.BuildDir, ".hotpath-objects-before"))
	fmt.Fprintf(o.Log, "kernel: %d objects (%d compiled) in %s, %.0f CPU-seconds\n", objects, built, time.Since(start).Round(time.Second), cpu.Seconds())
	if built > objects/2 {
		// A cold build (not a relink): its cost per object is the
		// estimate of the next one here.
		writeFile(cpuPerObjectFile(o), strconv.FormatFloat(cpu.Seconds()/float64(built), 'f', 3, 64))
	}
	if err := verifyFile(c.Target, c.Source.Tree, reqs, filepath.Join(r.BuildDir, ".config")); err != nil {
		return err
	}
	writeFile(filepath.Join(r.BuildDir, ".hotpath-objects"), strconv.Itoa(objects))
	writeFile(objectsEstimate(o), strconv.Itoa(objects))
	return nil
}

// copyOut copies the built kernel and its .config out of the build tree
// into the cache, where they stay valid after later builds of the tree.
func (r *Result) copyOut(c *Configured) error {
	if err := os.MkdirAll(filepath.Dir(r.BzImage), 0o755); err != nil {
		return err
	}
	if err := copyAtomic(filepath.Join(r.BuildDir, ".config"), r.Config); err != nil {
		return err
	}
	if err := copyAtomic(filepath.Join(r.BuildDir, filepath.FromSlash(c.Target.Output)), r.BzImage); err != nil {
		return fmt.Errorf("copying the %s out: %w", c.Target.MakeTarget, err)
	}
	st, err := os.Stat(r.BzImage)
	if err != nil {
		return err
	}
	r.Size = st.Size()
	sum, err := fileSHA256(r.BzImage)
	if err != nil {
		return err
	}
	r.SHA256 = sum
	return nil
}

// runMake runs kbuild for target (of architecture t) with the source tree
// read-only and all output in objDir. The environment is the caller's minus
// anything that would change the build behind the key's back (compiler
// flags, a parent make's jobserver), plus extra.
func runMake(ctx context.Context, t *Target, tree, objDir, logFile string, jobs int, extra []string, target string) error {
	_, err := runMakeCPU(ctx, t, tree, objDir, logFile, jobs, extra, target)
	return err
}

// runMakeCPU is runMake, returning the CPU time (user and system) of make
// and every process it waited for: the compilers.
func runMakeCPU(ctx context.Context, t *Target, tree, objDir, logFile string, jobs int, extra []string, target string) (time.Duration, error) {
	args := append([]string{"-C", tree, "O=" + objDir}, t.makeVars()...)
	args = append(args, "-j"+strconv.Itoa(jobs), target)
	cmd := exec.CommandContext(ctx, "make", args...)
	cmd.Dir = objDir
	cmd.Env = append(cleanEnv(os.Environ()), extra...)
	// make and its compilers in their own process group, so that a
	// cancelled build stops all of them, not just make.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	lf, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer lf.Close()
	fmt.Fprintf(lf, "\n### %s make %s\n", time.Now().UTC().Format(time.RFC3339), strings.Join(args, " "))
	cmd.Stdout, cmd.Stderr = lf, lf
	err = cmd.Run()
	var cpu time.Duration
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		if ctx.Err() != nil {
			return cpu, fmt.Errorf("make %s: %w", target, ctx.Err())
		}
		tail := logTail(logFile, 25)
		return cpu, fmt.Errorf("make %s failed: %w\nfull log: %s\nlast lines:\n%s%s", target, err, logFile, tail, hint(tail))
	}
	return cpu, nil
}

func cleanEnv(env []string) []string {
	drop := map[string]bool{
		"MAKEFLAGS": true, "MFLAGS": true, "MAKELEVEL": true, "MAKEOVERRIDES": true, "GNUMAKEFLAGS": true,
		"KCFLAGS": true, "KCPPFLAGS": true, "KAFLAGS": true, "KBUILD_CFLAGS": true, "CFLAGS": true, "LDFLAGS": true,
		"CC": true, "LD": true, "CROSS_COMPILE": true, "LLVM": true, "ARCH": true, "O": true, "V": true, "W": true, "C": true,
		"KBUILD_OUTPUT": true, "KCONFIG_CONFIG": true, "KCONFIG_ALLCONFIG": true, "INSTALL_PATH": true,
		"SOURCE_DATE_EPOCH": true, "LANG": true, "LC_ALL": true, "TZ": true,
	}
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if drop[k] || strings.HasPrefix(k, "KBUILD_") || strings.HasPrefix(k, "KCONFIG_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// hint turns well-known failures into what to install or change.
func hint(tail string) string {
	checks := []struct{ needle, advice string }{
		{"flex: not found", "install flex"},
		{"bison: not found", "install bison"},
		{"bc: not found", "install bc"},
		{"libelf.h", "install libelf-dev"},
		{"gelf.h", "install libelf-dev"},
		{"openssl/", "install libssl-dev"},
		{"is not clean", "the source tree has been configured in place: run `make mrproper` in it or pass a clean tree"},
		{"No space left on device", "free disk space (a build tree needs about 1 GiB) or point HOTPATH_CACHE elsewhere"},
		{"Killed signal terminated program", "the compiler was killed (out of memory?): lower -jobs"},
	}
	for _, c := range checks {
		if strings.Contains(tail, c.needle) {
			return "hint: " + c.advice + "\n"
		}
	}
	return ""
}

func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ") + "\n"
}

// startProgress reports objects built of objects expected (est) and the
// elapsed time every o.ProgressEvery. It returns a stop function giving
// the final count.
func startProgress(ctx context.Context, o Options, dir string, est objectEstimate, start time.Time) func() int {
	expected, estimate := est.n, est.mark()
	before, since := countObjects(dir), time.Now()
	writeFile(filepath.Join(dir, ".hotpath-objects-before"), strconv.Itoa(before))
	done := make(chan struct{})
	finished := make(chan int)
	go func() {
		t := time.NewTicker(o.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				finished <- countObjects(dir)
				return
			case <-t.C:
				n := countObjects(dir)
				if n > expected {
					// Past an estimate: the total is at least n, and
					// the line never claims more than 100%.
					expected, estimate = n, "~"
				}
				pct := 100 * n / max(expected, 1)
				left := ""
				if d, ok := timeLeft(time.Since(since), n-before, expected-n, expected); ok {
					left = fmt.Sprintf(", about %s left", d.Round(time.Minute))
				}
				fmt.Fprintf(o.Log, "kernel: %d/%s%d objects (%d%%), %s elapsed%s\n",
					n, estimate, expected, min(pct, 100), time.Since(start).Round(time.Second), left)
			}
		}
	}()
	return func() int { close(done); return <-finished }
}

// defaultObjectEstimate is the object count of hotpath's x86 configuration
// on Linux 6.12.118, used before the first build has counted its own
// (cold builds: 1,850 since issue 38's options, 1,780 before; a default
// left at the old count ended the cold CI run's progress 70 objects after
// "100%"). defaultObjectEstimateArm64 is arm64's (1,431; 1,396 before).
const (
	defaultObjectEstimate      = 1850
	defaultObjectEstimateArm64 = 1431
)

// defaultObjects is the target's default object count.
func defaultObjects(t *Target) int {
	if t == ARM64 {
		return defaultObjectEstimateArm64
	}
	return defaultObjectEstimate
}

// objectsEstimate is the file with the last object count of any build of
// the target.
func objectsEstimate(o Options) string {
	name := "objects-estimate"
	if o.target != nil && o.target != AMD64 {
		name += "-" + o.target.Name
	}
	return filepath.Join(o.CacheDir, "kernel", name)
}

func countObjects(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), ".o") {
			n++
		}
		return nil
	})
	return n
}

func readInt(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// lockFile takes an exclusive flock on path, so that two processes (two
// `go test` packages, two terminals) working on the same source, config or
// build tree serialise instead of sharing it half-done. It waits, saying so
// once, until ctx ends. The lock goes with the process, even on a crash.
func lockFile(ctx context.Context, path, what string, log io.Writer) (func(), error) {
	if log == nil {
		log = io.Discard
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	told := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !told {
			fmt.Fprintf(log, "kernel: waiting for another process's %s (lock %s)\n", what, path)
			told = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for %s lock %s: %w", what, path, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func readConfig(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := ParseConfig(bufio.NewReader(f))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func writeFile(path, text string) error { return os.WriteFile(path, []byte(text), 0o644) }

// copyIfDifferent copies src to dst unless dst already has sum: an
// unchanged initramfs keeps its mtime, so make does not relink.
func copyIfDifferent(src, dst, sum string) error {
	if got, err := fileSHA256(dst); err == nil && got == sum {
		return nil
	}
	return copyAtomic(src, dst)
}

// copyAtomic copies through a temporary file and a rename, so readers never
// see a half-written file.
func copyAtomic(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".tmp-"+filepath.Base(dst)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func shortHash(s string) string { return sha256Hex([]byte(s))[:16] }
