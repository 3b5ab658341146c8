package main

import (
	"context"
	"fmt"
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

// Args is gremlins' command line for target t, run on dir (in the stage),
// with the generated files gen (relative to dir) left out.
func (r Runner) Args(t Target, dir string, gen []string) []string {
	args := []string{"unleash",
		"--config", r.Config,
		"--workers", strconv.Itoa(r.Workers),
		"--output", filepath.Join(r.Raw, t.File()+".json"),
	}
	// gremlins mutates every non-test Go file below dir; the regexps
	// match paths relative to dir.
	if t.Recursive {
		args = append(args, "--exclude-files", `(^|/)testdata/`)
	} else {
		args = append(args, "--exclude-files", `/`)
	}
	for _, g := range gen {
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
	cmd := exec.CommandContext(ctx, r.Gremlins, r.Args(t, dir, gen)...)
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
