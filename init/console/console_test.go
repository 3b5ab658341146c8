package console

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/report"
)

// TestReportStaysInWindow: however much follows the report (log lines,
// events, the workload's output), the console's last 2×Every bytes always
// hold a report, and the repeats are the compact form.
func TestReportStaysInWindow(t *testing.T) {
	var out bytes.Buffer
	const every = 4096
	c := &Console{Out: &out, Every: every}
	c.Logf("before the report")
	rep := report.Report{Version: report.Version, ReadyMillis: 1234,
		Steps:  []report.Step{{Name: "nic-xps", Status: report.Skipped, Reason: "one queue", Detail: map[string]string{"a": "b"}}},
		Config: map[string]string{"workload.port": "8080"}}
	c.Report(rep)
	w, err := c.Passthrough()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range 200 {
		switch i % 3 {
		case 0:
			c.Logf("event number %d %s", i, strings.Repeat("x", 100))
		case 1:
			c.Line(report.EventPrefix, report.Event{Kind: report.EventRestart, Millis: int64(i)})
		case 2:
			fmt.Fprintf(w, "workload says %d %s\n", i, strings.Repeat("y", 100))
		}
	}
	w.Close()
	// Let the passthrough copy drain.
	for range 100 {
		c.mu.Lock()
		n := out.Len()
		c.mu.Unlock()
		if n > 200*100 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.mu.Lock()
	all := out.String()
	c.mu.Unlock()
	if c.Reprints() < 3 {
		t.Fatalf("%d reprints after ~%d bytes with every=%d", c.Reprints(), len(all), every)
	}
	for end := len(all); end > 2*every; end -= every / 2 {
		end = strings.LastIndex(all[:end], "\n") + 1 // whole lines only
		window := all[end-2*every : end]
		reps, _, err := report.Parse(strings.NewReader(window[strings.Index(window, "\n")+1:]))
		if err != nil {
			t.Fatal(err)
		}
		if len(reps) == 0 {
			t.Fatalf("no report in the %d bytes before offset %d", 2*every, end)
		}
	}
	reps, _, err := report.Parse(strings.NewReader(all))
	if err != nil {
		t.Fatal(err)
	}
	if reps[0].Compact || reps[0].Steps[0].Detail == nil || reps[0].Config == nil {
		t.Errorf("first report not the full one: %+v", reps[0])
	}
	last := reps[len(reps)-1]
	if !last.Compact || last.Steps[0].Detail != nil || last.Config != nil || last.ReadyMillis != 1234 ||
		last.Steps[0].Reason != "one queue" {
		t.Errorf("repeat %+v, want the compact form with statuses and reasons", last)
	}
}

// TestNoRepeatBeforeReport: nothing is repeated before a report exists.
func TestNoRepeatBeforeReport(t *testing.T) {
	var out bytes.Buffer
	c := &Console{Out: &out, Every: 100}
	for range 50 {
		c.Logf("line")
	}
	if strings.Contains(out.String(), report.ReportPrefix) || c.Reprints() != 0 {
		t.Errorf("a report appeared before one was printed")
	}
}

// TestOnLine: the hook gets exactly the init's own lines, whole, however
// the workload's output (a partial line, a line that looks like an init
// line) interleaves with them on the console.
func TestOnLine(t *testing.T) {
	var out bytes.Buffer
	c := &Console{Out: &out, Every: 1 << 20}
	var got []string
	c.OnLine(func(l string) { got = append(got, l) })
	w := c.Writer()
	fmt.Fprint(w, "workload partial line, no newline yet")
	c.Logf("two\nlines")
	fmt.Fprint(w, "hotpath-init: a workload pretending\n")
	c.Line(report.EventPrefix, report.Event{Kind: report.EventRestart})
	c.Report(report.Report{Version: report.Version})
	want := []string{Prefix + "two", Prefix + "lines", report.EventPrefix + `{"kind":"workload-restart","ms":0}`}
	if len(got) != 4 || fmt.Sprint(got[:3]) != fmt.Sprint(want) || !strings.HasPrefix(got[3], report.ReportPrefix+"{") {
		t.Errorf("hook got %q\nwant %q and the report", got, want)
	}
	if !strings.Contains(out.String(), "workload partial line, no newline yethotpath-init: two\n") {
		t.Errorf("console %q", out.String())
	}
}

// TestDefaultKeepEvery runs the threshold the init runs (Every unset):
// the compact report is printed again once 32 KiB of output (half of EC2's
// 64 KiB window; the other half is left to kernel messages, which do not
// pass through the Console) have followed the report, and not a byte
// sooner. The figure is written out here rather than taken from
// KeepEvery, so that a change of the default fails this test; every other
// test sets its own Every.
func TestDefaultKeepEvery(t *testing.T) {
	var out bytes.Buffer
	c := &Console{Out: &out}
	c.Report(report.Report{Version: report.Version, ReadyMillis: 7})
	reported := out.Len()
	const half = 32 << 10
	w := c.Writer()
	w.Write(bytes.Repeat([]byte("y"), half-1))
	if n := c.Reprints(); n != 0 {
		t.Fatalf("%d reprints after %d bytes, want none before %d", n, half-1, half)
	}
	w.Write([]byte("y"))
	if n := c.Reprints(); n != 1 {
		t.Fatalf("%d reprints after %d bytes, want 1", n, half)
	}
	rest := out.String()[reported+half:]
	if !strings.HasPrefix(rest, "\n"+report.ReportPrefix) {
		t.Errorf("after %d bytes of output: %.60q, want the report again", half, rest)
	}
	// The next one once another 32 KiB follow the reprint.
	w.Write(bytes.Repeat([]byte("y"), half-1))
	if n := c.Reprints(); n != 1 {
		t.Fatalf("%d reprints, want 1 until 32 KiB follow the reprint", n)
	}
	w.Write([]byte("y"))
	if n := c.Reprints(); n != 2 {
		t.Errorf("%d reprints after 32 KiB followed the first, want 2", n)
	}
}
