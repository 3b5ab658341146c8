package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Runner runs gremlins on one target of a stage.
type Runner struct {
	// Gremlins is the gremlins binary (the Makefile installs the pinned
	// version into out/mutation/bin).
	Gremlins string
	// Config is tests/mutation/gremlins.yaml: the mutators and the timeout.
	Config string
	// Workers is the number of mutants tested at once, and the -p of every
	// `go test` gremlins starts (2 cores shared by everyone: 1).
	Workers int
	// Raw is the directory of gremlins' JSON result and log per target.
	Raw string
	// Env is the environment gremlins starts from (os.Environ()).
	Env []string
}

// TestEnv is the environment of gremlins and of every `go test` it starts.
//
// What must not run under mutation, by the mechanisms the packages have:
//   - -short: kernel-config's tests that configure a real Linux tree from
//     /usr/src (TestConfigureLinux61, ...Arm64, TestBuildRelinkReproducible,
//     minutes each; linux_test.go:realOptions) skip in -short mode;
//   - HOTPATH_TEST_KERNEL_BUILD is dropped: set to 1 it lets
//     TestBuildRelinkReproducible build a kernel (~30 min);
//   - -count=1: gremlins times every mutant against its coverage run, which
//     must not come from the test cache (a cached 0.1 s run would make
//     every mutant time out); it also keeps mutant runs honest;
//   - GREMLINS_* are dropped: they would override tests/mutation/gremlins.yaml.
//
// The QEMU boots live in tests/e2e, which is no target; no target's tests
// start QEMU. Tests that need root (init/nic's netns watcher, init/supervise's
// credential tests) run when `make mutation` runs as root and skip otherwise.
// gremlins passes GOFLAGS through to `go test` as it is, and `go test`
// takes test flags such as -short from GOFLAGS.
func TestEnv(env []string, workers int) []string {
	var out []string
	goflags := ""
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == "GOFLAGS":
			goflags = v
		case k == "HOTPATH_TEST_KERNEL_BUILD", strings.HasPrefix(k, "GREMLINS_"):
		default:
			out = append(out, kv)
		}
	}
	flags := strings.Fields(goflags)
	flags = append(flags, "-short", "-count=1", "-p="+strconv.Itoa(workers))
	return append(out, "GOFLAGS="+strings.Join(flags, " "))
}

// Limits bound a mutant's test run. gremlins gives each mutant the time of
// the package's coverage run (build included), taken once at the start,
// times a coefficient, and counts a mutant that runs past it TIMED OUT
// (detected). On the shared 2-core machine the load moves several-fold
// during a run: a limit of 20 x a 1 s coverage run taken while the machine
// was quiet is passed by an unmutated build and run later under load, and
// mutants the tests would kill count as timed out for the wrong reason. So
// the limit is never below Floor (a build and run of the package under
// load), and the coefficient is chosen for it from the package's own
// unmutated run, timed just before gremlins starts.
type Limits struct {
	Coefficient int           // at least this times the unmutated run
	Floor       time.Duration // and never less than this
}

var (
	// DefaultLimits are those of packages whose tests are Go code over
	// fakes and loopback sockets (parsers, the AWS fake, the policy check).
	DefaultLimits = Limits{Coefficient: 20, Floor: 2 * time.Minute}
	// KernelLimits are those of packages whose tests run on the real
	// kernel: network namespaces, veth links, DHCP exchanges, child
	// processes with other credentials (the tests that need root,
	// KernelTests). They are the slow ones (init/netconf6: 47 s a run
	// under load), so they get their own limit: a longer floor, for the
	// build and the namespace set-up under load, and a smaller
	// coefficient, because most of their time is the kernel's timers
	// (duplicate address detection, advertisement intervals,
	// retransmissions), which the load does not stretch as it stretches
	// CPU work; 20 x 47 s would let each mutant that hangs run 16 min.
	KernelLimits = Limits{Coefficient: 8, Floor: 5 * time.Minute}
)

// CoefficientFor is gremlins' --timeout-coefficient for a package whose
// unmutated run took took: l.Coefficient, or more so that the limit is at
// least l.Floor.
func (l Limits) CoefficientFor(took time.Duration) int {
	c := l.Coefficient
	if took <= 0 {
		return c
	}
	if n := int((l.Floor + took - 1) / took); n > c {
		c = n
	}
	return c
}

// euid matches a test that checks for root: it needs a network namespace,
// a veth pair or another process's credentials, the real kernel's.
var euid = regexp.MustCompile(`\bos\.Geteuid\(\)`)

// KernelTests reports whether the tests of the package directories below
// dir (dir only unless recursive) run on the real kernel (see KernelLimits).
func KernelTests(dir string, recursive bool) (bool, error) {
	found := false
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || found {
			return err
		}
		if d.IsDir() {
			if p != dir && (!recursive || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		found = err == nil && euid.Match(b)
		return err
	})
	return found, err
}

// LimitsFor is KernelLimits for a target whose tests run on the real
// kernel (KernelTests), DefaultLimits otherwise.
func LimitsFor(dir string, recursive bool) (Limits, error) {
	kernel, err := KernelTests(dir, recursive)
	if err != nil || !kernel {
		return DefaultLimits, err
	}
	return KernelLimits, nil
}

// Args is gremlins' command line for target t, run on dir (in the stage),
// with the files exclude (relative to dir: generated ones, and the other
// files of a one-file target) left out and a mutant's test run limited to
// coefficient times the coverage run.
func (r Runner) Args(t Target, dir string, exclude []string, coefficient int) []string {
	args := []string{"unleash",
		"--config", r.Config,
		"--workers", strconv.Itoa(r.Workers),
		"--output", filepath.Join(r.Raw, t.File()+".json"),
		"--timeout-coefficient", strconv.Itoa(coefficient),
	}
	// gremlins mutates every non-test Go file below dir; the regexps
	// match paths relative to dir.
	if t.Recursive {
		args = append(args, "--exclude-files", `(^|/)testdata/`)
	} else {
		args = append(args, "--exclude-files", `/`)
	}
	for _, g := range exclude {
		args = append(args, "--exclude-files", "^"+regexp.QuoteMeta(g)+"$")
	}
	return append(args, dir)
}

// WarmArgs is the `go` command line, run in the target's staged
// directory, that builds its test binaries and runs no test.
func WarmArgs(t Target) []string {
	pkgs := "."
	if t.Recursive {
		pkgs = "./..."
	}
	return []string{"test", "-run", "^$", pkgs}
}

// Run runs gremlins on t; its output goes to Raw/<target>.log.
func (r Runner) Run(ctx context.Context, s *Stage, t Target) error {
	dir, err := s.Prepare(t)
	if err != nil {
		return err
	}
	gen, err := s.Generated(t)
	if err != nil {
		return fmt.Errorf("%s: %w", t.Name(), err)
	}
	if err := os.MkdirAll(r.Raw, 0o755); err != nil {
		return err
	}
	os.Remove(filepath.Join(r.Raw, t.File()+".json")) // never report an earlier run's result
	log, err := os.Create(filepath.Join(r.Raw, t.File()+".log"))
	if err != nil {
		return err
	}
	defer log.Close()
	// Build the target's tests once before gremlins times its coverage run
	// (build included) and gives every mutant 20 times that: on a cold
	// build cache packer/postprocessor's coverage run took 4 min 19 s
	// instead of 12 s, and each mutant that hangs then ran 86 min.
	warm := exec.CommandContext(ctx, "go", WarmArgs(t)...)
	warm.Dir = dir
	warm.Env = TestEnv(r.Env, r.Workers)
	fmt.Fprintf(log, "warming the build cache: go %s\n", strings.Join(warm.Args[1:], " "))
	warm.Stdout, warm.Stderr = log, log
	start := time.Now()
	if err := warm.Run(); err != nil {
		return fmt.Errorf("%s: building its tests: %w (see %s)", t.Name(), err, log.Name())
	}
	fmt.Fprintf(log, "built in %s\n", time.Since(start).Round(time.Millisecond))
	if t.Only != "" {
		others, err := otherFiles(dir, t.Only)
		if err != nil {
			return fmt.Errorf("%s: %w", t.Name(), err)
		}
		gen = append(gen, others...)
	}
	coefficient, err := r.coefficient(ctx, t, dir, log)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, r.Gremlins, r.Args(t, dir, gen, coefficient)...)
	cmd.Dir = s.Root
	cmd.Env = TestEnv(r.Env, r.Workers)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: gremlins: %w (see %s)", t.Name(), err, log.Name())
	}
	result := filepath.Join(r.Raw, t.File()+".json")
	if _, err := os.Stat(result); err == nil {
		return nil
	}
	// gremlins writes no file when it found nothing to mutate.
	if b, _ := os.ReadFile(log.Name()); strings.Contains(string(b), "No results to report") {
		return os.WriteFile(result, []byte(`{"files":[]}`), 0o644)
	}
	return fmt.Errorf("%s: gremlins wrote no result (see %s)", t.Name(), log.Name())
}

// coefficient runs t's tests once unmutated, as every mutant's run will
// be, and returns the timeout coefficient its limits give for that time.
func (r Runner) coefficient(ctx context.Context, t Target, dir string, log io.Writer) (int, error) {
	limits, err := LimitsFor(dir, t.Recursive)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", t.Name(), err)
	}
	args := WarmArgs(t)
	args = append(args[:1], args[3:]...) // the same packages, every test
	run := exec.CommandContext(ctx, "go", args...)
	run.Dir = dir
	run.Env = TestEnv(r.Env, r.Workers)
	fmt.Fprintf(log, "timing the unmutated tests: go %s\n", strings.Join(run.Args[1:], " "))
	run.Stdout, run.Stderr = log, log
	start := time.Now()
	if err := run.Run(); err != nil {
		return 0, fmt.Errorf("%s: its tests fail unmutated: %w (see %s)", t.Name(), err, r.logName(t))
	}
	took := time.Since(start)
	c := limits.CoefficientFor(took)
	fmt.Fprintf(log, "unmutated run %s; limits %+v (real-kernel tests: %v), timeout coefficient %d (~%s a mutant)\n",
		took.Round(time.Millisecond), limits, limits == KernelLimits, c, (took * time.Duration(c)).Round(time.Second))
	return c, nil
}

func (r Runner) logName(t Target) string { return filepath.Join(r.Raw, t.File()+".log") }

// otherFiles lists the Go files of dir, tests and subdirectories aside,
// but only: what a one-file target leaves out.
func otherFiles(dir, only string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := false
	for _, e := range ents {
		n := e.Name()
		switch {
		case e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go"):
		case n == only:
			seen = true
		default:
			out = append(out, n)
		}
	}
	if !seen {
		return nil, fmt.Errorf("no file %s in %s", only, dir)
	}
	return out, nil
}

// Version is the module version the gremlins binary was built from, for
// the report (`gremlins --version` says "dev" when built by go install).
func (r Runner) Version() string {
	out, err := exec.Command("go", "version", "-m", r.Gremlins).Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "mod" {
			return f[1] + " " + f[2]
		}
	}
	return "unknown"
}
