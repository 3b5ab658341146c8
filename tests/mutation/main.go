// Command mutation is `make mutation`: it runs gremlins (a mutation tester
// for Go, pinned in the Makefile) over the packages where a wrong line
// hurts users most, and writes which mutants survive and a score per
// package to out/mutation/report.txt (report.json for machines and for the
// next run's "before" column), printing the table.
//
// Usage (from the repository root; see tests/mutation/README.md):
//
//	go run ./tests/mutation -gremlins out/mutation/bin/gremlins [-pkg server/http1,init/nic] [-workers 1] [-baseline old.json]
//	go run ./tests/mutation -report-only    # the report again, from out/mutation/raw
//	go run ./tests/mutation -named tests/mutation/named.txt [-only a,b] [-boot [-lock /tmp/qemu.lock]]
//
// With -named it replays instead the catalogue of mutations written by hand
// (`make mutation-named`, named.txt): each put in a throwaway copy, its
// tests run and expected to fail, a table printed; it exits 1 when one
// survives (or does not compile, or no longer applies).
//
// It exits 1 when a target could not be run (its tests failed unmutated,
// gremlins failed): a report without it would look better than it is.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// options are the command line.
type options struct {
	repo, out, gremlins, config, baseline string
	targets                               []Target
	workers                               int
	reportOnly, keepStage                 bool
	// -named mode
	named, only, lock string
	boot, control     bool
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("mutation", flag.ContinueOnError)
	pkgs := fs.String("pkg", "", "comma-separated targets (default: "+fmt.Sprint(DefaultTargets)+")")
	fs.StringVar(&o.repo, "repo", ".", "repository root")
	fs.StringVar(&o.out, "out", "out/mutation", "directory of the report and of gremlins' raw results (raw/)")
	fs.StringVar(&o.gremlins, "gremlins", "out/mutation/bin/gremlins", "the gremlins binary")
	fs.StringVar(&o.config, "config", "tests/mutation/gremlins.yaml", "gremlins' configuration (mutators, timeout)")
	fs.StringVar(&o.baseline, "baseline", "", "report.json of an earlier run: its scores go in a \"before\" column")
	fs.IntVar(&o.workers, "workers", 1, "mutants tested at once (and go test -p)")
	fs.BoolVar(&o.reportOnly, "report-only", false, "run nothing: write the report from the raw results of the last run")
	fs.BoolVar(&o.keepStage, "keep-stage", false, "keep the staged copy of the repository (its path is printed)")
	fs.StringVar(&o.named, "named", "", "replay this catalogue of named mutations (tests/mutation/named.txt) instead of running gremlins")
	fs.StringVar(&o.only, "only", "", "with -named: the comma-separated names of the mutations to replay (default all)")
	fs.BoolVar(&o.boot, "boot", false, "with -named: replay the QEMU entries too (minutes each)")
	fs.StringVar(&o.lock, "lock", os.Getenv("HOTPATH_QEMU_LOCK"), "with -named -boot: file to flock around each boot entry's tests (default $HOTPATH_QEMU_LOCK)")
	fs.BoolVar(&o.control, "control", true, "with -named: run each entry's tests once unmutated first (a test that fails anyway proves nothing)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.workers < 1 {
		return o, fmt.Errorf("-workers %d: want 1 or more", o.workers)
	}
	var err error
	o.targets, err = ParseTargets(*pkgs)
	return o, err
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutation:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := run
	if o.named != "" {
		run = runNamed
	}
	ok, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutation:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// run runs the targets (unless -report-only) and writes the report; ok is
// false when a target failed.
func run(ctx context.Context, o options) (ok bool, err error) {
	for _, p := range []*string{&o.repo, &o.out, &o.gremlins, &o.config} {
		if *p, err = filepath.Abs(*p); err != nil {
			return false, err
		}
	}
	stage, done, err := newStage(o, "hotpath-mutation-")
	if err != nil {
		return false, err
	}
	defer done()
	r := Runner{Gremlins: o.gremlins, Config: o.config, Workers: o.workers, Raw: filepath.Join(o.out, "raw"), Env: os.Environ()}
	rep := Report{Gremlins: r.Version(), Started: time.Now().UTC()}
	for _, t := range o.targets {
		tr := TargetRun{Target: t.Name()}
		start := time.Now()
		if o.reportOnly {
			_, err = stage.Prepare(t)
		} else {
			fmt.Printf("mutation: %s (log: %s)\n", t.Name(), filepath.Join(r.Raw, t.File()+".log"))
			err = r.Run(ctx, stage, t)
			tr.Seconds = time.Since(start).Seconds()
		}
		if err != nil {
			tr.Error = err.Error()
		}
		// A run that failed or was stopped may have decided some mutants:
		// they are reported, marked partial.
		pkgs, lerr := Load(filepath.Join(r.Raw, t.File()), stage, t, o.repo)
		if lerr != nil && tr.Error == "" {
			tr.Error = lerr.Error()
		}
		rep.Packages = append(rep.Packages, pkgs...)
		rep.Targets = append(rep.Targets, tr)
		if ctx.Err() != nil {
			break
		}
	}
	return write(o, rep), nil
}

// write writes report.txt and report.json under o.out and prints the
// table; it reports whether every target ran.
func write(o options, rep Report) bool {
	var before *Report
	if o.baseline != "" {
		var err error
		if before, err = ReadReport(o.baseline); err != nil {
			fmt.Fprintln(os.Stderr, "mutation: baseline:", err)
		}
	}
	ok := true
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "mutation:", err)
		return false
	}
	for _, t := range rep.Targets {
		ok = ok && t.Error == ""
	}
	txt := filepath.Join(o.out, "report.txt")
	f, err := os.Create(txt)
	if err == nil {
		rep.WriteText(f, before)
		err = f.Close()
	}
	if err == nil {
		var b []byte
		b, err = json.MarshalIndent(rep, "", "\t")
		if err == nil {
			err = os.WriteFile(filepath.Join(o.out, "report.json"), append(b, '\n'), 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutation:", err)
		ok = false
	}
	fmt.Println()
	rep.Summary(os.Stdout, before)
	n := 0
	for _, p := range rep.Packages {
		n += len(p.Survivors)
	}
	fmt.Printf("\n%d surviving mutants, each with file:line and the mutation: %s (machine-readable: report.json)\n", n, txt)
	return ok
}

// newStage copies o.repo into a new temporary directory (its name
// starting with prefix); done removes it, unless -keep-stage, which prints
// its path instead.
func newStage(o options, prefix string) (stage *Stage, done func(), err error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, nil, err
	}
	done = func() { os.RemoveAll(dir) }
	if o.keepStage {
		fmt.Println("mutation: stage", dir)
		done = func() {}
	}
	if stage, err = NewStage(o.repo, dir); err != nil {
		done()
		return nil, nil, err
	}
	return stage, done, nil
}

// runNamed is -named: the catalogue replayed in a stage, the table
// printed and written to out/mutation/named.txt, the go test output to
// named.log.
func runNamed(ctx context.Context, o options) (ok bool, err error) {
	for _, p := range []*string{&o.repo, &o.out} {
		if *p, err = filepath.Abs(*p); err != nil {
			return false, err
		}
	}
	ns, err := ReadNamed(o.named)
	if err != nil {
		return false, err
	}
	if ns, err = SelectNamed(ns, o.only); err != nil {
		return false, err
	}
	stage, done, err := newStage(o, "hotpath-named-")
	if err != nil {
		return false, err
	}
	defer done()
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return false, err
	}
	logFile := filepath.Join(o.out, "named.log")
	lf, err := os.Create(logFile)
	if err != nil {
		return false, err
	}
	defer lf.Close()
	fmt.Printf("mutation: %d named mutations in a copy of %s (go test output: %s)\n", len(ns), o.repo, logFile)
	r := NamedRunner{Stage: stage, Repo: o.repo, Boot: o.boot, Lock: o.lock, Control: o.control, Env: cleanEnv(os.Environ()), Log: lf, Status: os.Stdout}
	rs := r.Run(ctx, ns)
	var b bytes.Buffer
	ok = WriteNamedTable(&b, rs)
	fmt.Println()
	os.Stdout.Write(b.Bytes())
	if err := os.WriteFile(filepath.Join(o.out, "named.txt"), b.Bytes(), 0o644); err != nil {
		return false, err
	}
	return ok && ctx.Err() == nil, nil
}
