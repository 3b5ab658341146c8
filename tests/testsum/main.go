// Command testsum reads `go test -json` on stdin and prints what a quiet
// `go test` prints (one line per package, the full output of failed tests),
// then every skipped test with its reason, so that a skip cannot hide in a
// green run. It exits 1 when a test, a package or a build failed, or when
// it read no package result at all; `make unit` uses it because sh has no
// pipefail to carry go test's own status through the pipe.
//
// With -stream it copies every output line as it comes instead (what
// `go test -v` prints), for the long QEMU boots whose progress must be seen
// while they run, and still ends with the list of skips and the status.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// event is one line of test2json output (go doc test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output and build-fail
}

// Skip is one skipped test and why.
type Skip struct {
	Package, Test, Reason string
}

// Result is what a run amounted to.
type Result struct {
	Passed, Failed, NoTests int // packages
	FailedTests             int
	BuildFailed             int
	Skips                   []Skip
}

// OK reports whether the run is green: something ran and nothing failed.
func (r *Result) OK() bool {
	return r.Failed == 0 && r.FailedTests == 0 && r.BuildFailed == 0 && r.Passed+r.NoTests > 0
}

// Summarise copies the quiet form of the events in in to out and returns the
// result. Lines that are not JSON (go's own messages) are copied as they are.
func Summarise(in io.Reader, out io.Writer) (*Result, error) {
	return summarise(in, out, false)
}

// Stream is Summarise copying every test's output as it arrives, as
// `go test -v` does, rather than only that of the tests that failed.
func Stream(in io.Reader, out io.Writer) (*Result, error) {
	return summarise(in, out, true)
}

func summarise(in io.Reader, out io.Writer, stream bool) (*Result, error) {
	res := &Result{}
	type key struct{ pkg, test string }
	buf := map[key]*strings.Builder{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(out, "%s\n", line)
			continue
		}
		k := key{e.Package, e.Test}
		switch {
		case e.Action == "build-output":
			io.WriteString(out, e.Output)
		case e.Action == "build-fail":
			res.BuildFailed++
		case e.Test == "" && e.Action == "output":
			// Package-level lines: "ok  \tpkg\t0.1s", "FAIL\tpkg", panics
			// outside a test; the bare PASS of a green package is noise.
			if e.Output != "PASS\n" {
				io.WriteString(out, e.Output)
			}
		case e.Test == "" && e.Action == "pass":
			res.Passed++
		case e.Test == "" && e.Action == "fail":
			res.Failed++
		case e.Test == "" && e.Action == "skip":
			res.NoTests++
		case e.Action == "output":
			if stream {
				io.WriteString(out, e.Output)
			}
			b := buf[k]
			if b == nil {
				b = &strings.Builder{}
				buf[k] = b
			}
			b.WriteString(e.Output)
		case e.Action == "fail":
			res.FailedTests++
			if b := buf[k]; b != nil && !stream {
				io.WriteString(out, b.String())
			}
			delete(buf, k)
		case e.Action == "skip":
			res.Skips = append(res.Skips, Skip{Package: e.Package, Test: e.Test, Reason: skipReason(buf[k])})
			delete(buf, k)
		case e.Action == "pass":
			delete(buf, k)
		}
	}
	if err := sc.Err(); err != nil {
		return res, fmt.Errorf("testsum: read: %w", err)
	}
	return res, nil
}

// skipReason is what the test logged before "--- SKIP", or after it (go
// prints the log lines of a finished test indented under its result line).
func skipReason(b *strings.Builder) string {
	if b == nil {
		return "(no reason given)"
	}
	var reasons []string
	for _, l := range strings.Split(b.String(), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- ") {
			continue
		}
		reasons = append(reasons, l)
	}
	if len(reasons) == 0 {
		return "(no reason given)"
	}
	return strings.Join(reasons, "; ")
}

// Report prints the skipped tests and the closing line.
func (r *Result) Report(out io.Writer) {
	if len(r.Skips) > 0 {
		fmt.Fprintf(out, "skipped tests (%d):\n", len(r.Skips))
		for _, s := range r.Skips {
			fmt.Fprintf(out, "  SKIP %s %s: %s\n", s.Package, s.Test, s.Reason)
		}
	}
	status := "ok"
	if !r.OK() {
		status = "FAIL"
	}
	fmt.Fprintf(out, "testsum: %s: %d packages passed, %d failed, %d without tests; %d tests failed, %d skipped; %d builds failed\n",
		status, r.Passed, r.Failed, r.NoTests, r.FailedTests, len(r.Skips), r.BuildFailed)
}

func main() {
	stream := flag.Bool("stream", false, "copy every test's output as it comes (go test -v), not only that of failed tests")
	flag.Parse()
	sum := Summarise
	if *stream {
		sum = Stream
	}
	res, err := sum(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	res.Report(os.Stdout)
	if !res.OK() {
		os.Exit(1)
	}
}
