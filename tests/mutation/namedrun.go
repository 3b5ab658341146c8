package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// The outcomes of one named mutation.
const (
	Killed       = "killed"             // a test of its pattern failed
	TimedOut     = "killed (timed out)" // go test's -timeout ended it: counted killed, as gremlins does
	Survived     = "SURVIVED"           // its tests passed with the bug in
	NoCompile    = "DOES NOT COMPILE"   // not a bug the tests can see: the entry needs fixing
	NoLonger     = "NO LONGER APPLIES"  // Check failed: the code moved
	NoTests      = "NO TESTS RAN"       // the pattern selected nothing
	ControlFails = "FAILS UNMUTATED"    // its tests fail without the mutation: no verdict
	NotRun       = "not run (boot)"     // a QEMU entry without -boot
	Skipped      = "SKIPPED"            // its tests skipped (not root, a tool missing): no verdict
)

// NamedResult is one entry's outcome.
type NamedResult struct {
	Named   Named
	Status  string
	Failed  []string // the tests that failed (Test or Test/sub)
	Passed  []string // top-level tests of the pattern that passed
	Lines   []string // the first lines the failed tests printed
	Seconds float64
	Detail  string // the reason of a no-verdict status
}

// ok reports whether the result is what the catalogue claims (the bug is
// caught), or an entry deliberately not run.
func (r NamedResult) ok() bool {
	return r.Status == Killed || r.Status == TimedOut || r.Status == NotRun
}

// NamedRunner replays a catalogue in a stage (a throwaway copy of the
// repository: the tree the user works in is never written).
type NamedRunner struct {
	Stage *Stage
	Repo  string // the repository the stage was copied from (for messages)
	// Boot runs the QEMU entries too; Lock, when set, is flocked around
	// each of their go test runs (the team's QEMU lock).
	Boot bool
	Lock string
	// Control runs each distinct test set once unmutated first: an entry
	// whose tests already fail gets no verdict.
	Control bool
	Env     []string
	Log     io.Writer // each go test's output, for the log file
	Status  io.Writer // one line per entry as it is decided
}

// Run replays every entry, one after another.
func (r *NamedRunner) Run(ctx context.Context, ns []Named) []NamedResult {
	type set struct{ pkg, run string }
	control := map[set]string{} // "" passed, else why not
	var out []NamedResult
	for _, n := range ns {
		res := NamedResult{Named: n}
		start := time.Now()
		switch {
		case ctx.Err() != nil:
			res.Status, res.Detail = "stopped", ctx.Err().Error()
		case n.Boot && !r.Boot:
			res.Status = NotRun
		default:
			if err := n.Check(r.Stage.Root); err != nil {
				res.Status, res.Detail = NoLonger, err.Error()
				break
			}
			k := set{n.Pkg, n.Run}
			why, done := control[k]
			if r.Control && !done {
				fmt.Fprintf(r.Status, "%-34s control run (unmutated) of %s -run '%s'\n", n.Name, n.Pkg, n.Run)
				t := r.goTest(ctx, n)
				switch {
				case t.buildFailed:
					why = "does not compile unmutated"
				case len(t.failed) > 0 || t.timedOut:
					why = "fails unmutated: " + strings.Join(t.failed, ", ")
				case t.err != nil && ctx.Err() == nil:
					why = "go test: " + t.err.Error()
				case len(t.passed) == 0:
					why = "no test ran unmutated"
					if len(t.skipped) > 0 {
						why = "skipped: " + strings.Join(t.skipped, ", ")
					}
				}
				control[k] = why
			}
			if why != "" {
				res.Status, res.Detail = ControlFails, why
				break
			}
			r.mutate(ctx, n, &res)
		}
		res.Seconds = time.Since(start).Seconds()
		fmt.Fprintf(r.Status, "%-34s %s (%.0f s)\n", n.Name, res.Status, res.Seconds)
		out = append(out, res)
	}
	return out
}

// mutate puts n in, runs its tests, and takes it out again.
func (r *NamedRunner) mutate(ctx context.Context, n Named, res *NamedResult) {
	file := filepath.Join(r.Stage.Root, filepath.FromSlash(n.File))
	orig, err := os.ReadFile(file)
	if err != nil {
		res.Status, res.Detail = NoLonger, err.Error()
		return
	}
	mutated := strings.Replace(string(orig), n.Old, n.New, 1)
	if err := os.WriteFile(file, []byte(mutated), 0o644); err != nil {
		res.Status, res.Detail = "error", err.Error()
		return
	}
	defer func() {
		if err := os.WriteFile(file, orig, 0o644); err != nil {
			// The stage is thrown away; but every later entry would
			// run on a mutated tree.
			panic(fmt.Sprintf("revert %s: %v", file, err))
		}
	}()
	t := r.goTest(ctx, n)
	res.Failed, res.Passed, res.Lines = t.failed, t.passed, t.lines
	switch {
	case t.buildFailed:
		res.Status, res.Lines = NoCompile, t.buildLines
	case len(t.failed) > 0:
		res.Status = Killed
	case t.timedOut:
		res.Status = TimedOut
	case t.err != nil && ctx.Err() != nil:
		res.Status, res.Detail = "stopped", ctx.Err().Error()
	case len(t.passed) == 0 && len(t.skipped) > 0:
		res.Status, res.Detail = Skipped, "skipped: "+strings.Join(t.skipped, ", ")
	case len(t.passed) == 0:
		res.Status, res.Detail = NoTests, "the pattern selected no test"
		if t.err != nil {
			res.Detail = t.err.Error()
		}
	case t.err != nil:
		// The package failed with no test failing: a panic outside a
		// test, TestMain: the bug is seen.
		res.Status, res.Detail = Killed, "package failed outside any test: "+t.err.Error()
	default:
		res.Status = Survived
	}
}

// testRun is what one go test -json run said.
type testRun struct {
	failed, passed    []string
	skipped           []string
	lines, buildLines []string
	buildFailed       bool
	timedOut          bool
	err               error
}

// testEvent is a line of go test -json (test2json, and since Go 1.24 the
// build's output too).
type testEvent struct {
	Action      string
	Test        string
	Output      string
	ImportPath  string
	FailedBuild string
}

// goTest runs n's tests in the stage: go test -json -count=1 -vet=off
// -timeout T -run P ./pkg/ from the root of the module that holds n.Pkg.
func (r *NamedRunner) goTest(ctx context.Context, n Named) testRun {
	var t testRun
	mod, _, err := r.Stage.module(n.Pkg)
	if err != nil {
		t.err = err
		return t
	}
	rel, err := filepath.Rel(mod, filepath.Join(r.Stage.Root, filepath.FromSlash(n.Pkg)))
	if err != nil {
		t.err = err
		return t
	}
	if n.Boot && r.Lock != "" {
		unlock, err := flockFile(r.Lock, r.Status)
		if err != nil {
			t.err = err
			return t
		}
		defer unlock()
	}
	pkg := "./" + filepath.ToSlash(rel)
	if rel == "." {
		pkg = "."
	}
	// go test's own limit first; the context's a minute later, in case
	// the build itself hangs.
	cctx, cancel := context.WithTimeout(ctx, n.timeout()+time.Minute)
	defer cancel()
	args := []string{"test", "-json", "-count=1", "-vet=off", "-timeout", n.timeout().String(), "-run", n.Run, pkg}
	if n.Boot {
		args = append(args, "-v")
	}
	cmd := exec.CommandContext(cctx, "go", args...)
	cmd.Dir = mod
	cmd.Env = r.Env
	cmd.WaitDelay = 10 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.err = err
		return t
	}
	fmt.Fprintf(r.Log, "\n=== %s: go %s (in %s)\n", n.Name, strings.Join(args, " "), mod)
	if err := cmd.Start(); err != nil {
		t.err = err
		return t
	}
	output := map[string][]string{} // test -> its output lines
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var e testEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			fmt.Fprintln(r.Log, sc.Text())
			continue
		}
		if e.Output != "" {
			io.WriteString(r.Log, e.Output)
		}
		switch e.Action {
		case "build-output":
			t.buildLines = append(t.buildLines, strings.TrimRight(e.Output, "\n"))
		case "build-fail":
			t.buildFailed = true
		case "output":
			if strings.Contains(e.Output, "panic: test timed out after") {
				t.timedOut = true
			}
			if strings.Contains(e.Output, "[build failed]") || strings.Contains(e.Output, "[setup failed]") {
				t.buildFailed = true
			}
			if e.Test != "" {
				output[e.Test] = append(output[e.Test], strings.TrimRight(e.Output, "\n"))
			}
		case "fail":
			if e.FailedBuild != "" {
				t.buildFailed = true
			}
			if e.Test != "" {
				t.failed = append(t.failed, e.Test)
			}
		case "skip":
			if e.Test != "" && !strings.Contains(e.Test, "/") {
				t.skipped = append(t.skipped, e.Test)
			}
		case "pass":
			if e.Test != "" && !strings.Contains(e.Test, "/") {
				t.passed = append(t.passed, e.Test)
			}
		}
	}
	t.err = cmd.Wait()
	if s := strings.TrimSpace(stderr.String()); s != "" {
		fmt.Fprintln(r.Log, s)
		if t.buildFailed || len(t.buildLines) == 0 {
			t.buildLines = append(t.buildLines, strings.Split(s, "\n")...)
		}
	}
	// The failure messages of the deepest failed tests: their t.Error
	// and t.Log lines ("x_test.go:97: ..."), up to 3 a test, 10 in all;
	// other output (an image build's progress) only when a test has none.
	sort.Strings(t.failed)
	for _, f := range t.failed {
		if hasChild(t.failed, f) {
			continue
		}
		var msgs, other []string
		for _, l := range output[f] {
			s := strings.TrimSpace(l)
			switch {
			case s == "" || strings.HasPrefix(s, "=== ") || strings.HasPrefix(s, "--- "):
			case testLine.MatchString(s):
				msgs = append(msgs, f+": "+s)
			default:
				other = append(other, f+": "+s)
			}
		}
		if len(msgs) == 0 {
			msgs = other
		}
		t.lines = append(t.lines, msgs[:min(len(msgs), 3)]...)
	}
	t.lines = t.lines[:min(len(t.lines), 10)]
	return t
}

// testLine is what testing prints for t.Error, t.Fatal and t.Log: the
// file and line first.
var testLine = regexp.MustCompile(`^[\w.-]+\.go:\d+: `)

// hasChild reports whether a subtest of f is among failed.
func hasChild(failed []string, f string) bool {
	for _, g := range failed {
		if strings.HasPrefix(g, f+"/") {
			return true
		}
	}
	return false
}

// flockFile takes an exclusive lock on path, waiting for it.
func flockFile(path string, log io.Writer) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "waiting for the QEMU lock %s\n", path)
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// WriteNamedTable prints the results: one row per entry, then what each
// failed test printed, and the entries that need attention.
func WriteNamedTable(w io.Writer, rs []NamedResult) (ok bool) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "mutation\tfile\tresult\ts\tfailed tests")
	counts := map[string]int{}
	ok = true
	for _, r := range rs {
		counts[r.Status]++
		ok = ok && r.ok()
		failed := topLevel(r.Failed)
		if r.Status == Killed {
			for _, p := range r.Passed {
				failed = append(failed, "("+p+" passed)")
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%s\n", r.Named.Name, r.Named.File, r.Status, r.Seconds, strings.Join(failed, " "))
	}
	tw.Flush()
	var keys []string
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
	}
	fmt.Fprintf(w, "\n%d mutations: %s\n", len(rs), strings.Join(parts, ", "))
	for _, r := range rs {
		if r.Status == NotRun {
			continue
		}
		fmt.Fprintf(w, "\n%s [%s] %s\n  from: %s\n  go test -run '%s' ./%s/\n", r.Named.Name, r.Status, r.Named.File, r.Named.From, r.Named.Run, r.Named.Pkg)
		if r.Detail != "" {
			fmt.Fprintf(w, "  %s\n", r.Detail)
		}
		for _, l := range r.Lines {
			fmt.Fprintf(w, "  | %s\n", l)
		}
		for _, nt := range r.Named.Notes {
			fmt.Fprintf(w, "  note: %s\n", nt)
		}
	}
	return ok
}

// topLevel keeps the names in failed that no other name of it is a prefix
// of as a parent ("TestA" and "TestA/x" give "TestA/x").
func topLevel(failed []string) []string {
	var out []string
	for _, f := range failed {
		if !hasChild(failed, f) {
			out = append(out, f)
		}
	}
	return out
}

// SelectNamed keeps the entries named in only (comma-separated; all when
// empty).
func SelectNamed(ns []Named, only string) ([]Named, error) {
	if strings.TrimSpace(only) == "" {
		return ns, nil
	}
	want := map[string]bool{}
	for _, s := range strings.Split(only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			want[s] = true
		}
	}
	var out []Named
	for _, n := range ns {
		if want[n.Name] {
			out = append(out, n)
			delete(want, n.Name)
		}
	}
	if len(want) > 0 {
		var missing []string
		for k := range want {
			missing = append(missing, k)
		}
		sort.Strings(missing)
		return nil, errors.New("no mutation named " + strings.Join(missing, ", "))
	}
	return out, nil
}

// cleanEnv is the environment of the named mutations' go test runs: the
// caller's, without HOTPATH_TEST_KERNEL_BUILD (a 30-minute kernel build in
// kernel-config's tests) and GREMLINS_*. Unlike gremlins' runs there is
// no -short: the tests an entry names are the ones it must run.
func cleanEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOTPATH_TEST_KERNEL_BUILD" || strings.HasPrefix(k, "GREMLINS_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}
