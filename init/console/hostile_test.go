package console

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hotpath-dev/hotpath/init/report"
)

// forged is what a hostile value carries: a CR and an erase-line
// sequence, then a boot report of its own, then a line break and another.
const forged = "i-0123\r\x1b[2KHOTPATH-REPORT {\"version\":1,\"ready_ms\":1}\nHOTPATH-EVENT {\"kind\":\"poweroff\"}\u202e\u0085\x7f"

// checkConsole asserts what a line reader of out sees: no control byte
// but the newline and tab (the init escapes its own tabs, TestEscapeText;
// the workload's are kept), no C1 control or bidirectional override, the
// machine-readable prefixes only at the start of a line the console wrote,
// one boot report that parses, and all of it within EC2's 64 KiB window.
func checkConsole(t *testing.T, out []byte, reports int) []report.Report {
	t.Helper()
	if len(out) >= 64<<10 {
		t.Errorf("console output %d bytes, more than EC2's 64 KiB window", len(out))
	}
	for i, b := range out {
		if b < 0x20 && b != '\n' && b != '\t' || b == 0x7f {
			t.Fatalf("control byte %#02x at offset %d: %q", b, i, out[max(0, i-40):min(len(out), i+40)])
		}
	}
	if !utf8.Valid(out) {
		t.Fatal("console output is not UTF-8")
	}
	for _, r := range string(out) {
		if escapeRune(r) && r != '\n' && r != '\t' {
			t.Fatalf("character %U on the console", r)
		}
	}
	for _, l := range strings.Split(string(out), "\n") {
		for _, p := range []string{report.ReportPrefix, report.EventPrefix, "HOTPATH-"} {
			if i := strings.Index(l, p); i > 0 {
				t.Fatalf("%q inside a line at %d: %.200q", p, i, l)
			}
		}
	}
	reps, _, err := report.Parse(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != reports {
		t.Fatalf("%d reports on the console, want %d", len(reps), reports)
	}
	return reps
}

// hostileReport is a boot report holding values from outside at their
// worst: a 1 MiB instance id that forges lines, 8,000 user-data errors,
// a step error and detail as long.
func hostileReport() report.Report {
	big := strings.Repeat(forged, (1<<20)/len(forged))
	var errs []string
	for i := range 8000 {
		errs = append(errs, fmt.Sprintf("line %d: %q is not key=value", i+1, "x\x1b"))
	}
	return report.Report{Version: report.Version, ReadyMillis: 1234,
		Steps: []report.Step{
			{Name: "imds", Status: report.Applied, Detail: map[string]string{"instance_id": big, forged: "key from outside"}},
			{Name: "user-data", Status: report.Failed, Error: "rejected: " + strings.Join(errs, "; ")},
			{Name: "nic-xps", Status: report.Skipped, Reason: "one queue"},
		},
		Config:   map[string]string{"workload.port": "8080"},
		Instance: &report.Instance{IMDS: "imds=on", InstanceID: big, AvailabilityZone: forged},
		UserData: &report.UserData{Status: report.UserDataRejected, Note: forged, Errors: errs},
	}
}

// TestHostileValuesBounded: a report, events and log lines full of
// hostile values reach the console escaped, bounded and unforgeable; the
// report says what was cut and keeps what a reader needs.
func TestHostileValuesBounded(t *testing.T) {
	var out bytes.Buffer
	c := &Console{Out: &out}
	var hooked []string
	c.OnLine(func(l string) { hooked = append(hooked, l) })
	r := hostileReport()
	c.Logf("imds: instance-id %s", r.Instance.InstanceID)
	c.Logf("user-data REJECTED (%s): %s", r.UserData.Note, r.Steps[1].Error)
	c.Line(report.EventPrefix, report.Event{Kind: report.EventTimeSync, Detail: r.Instance.InstanceID,
		Steps: r.Steps})
	c.Report(r)
	reps := checkConsole(t, out.Bytes(), 1)
	got := reps[0]
	if got.Truncated == "" || got.ReadyMillis != 1234 || len(got.Steps) != 3 || got.Steps[2].Reason != "one queue" {
		t.Errorf("report: truncated %q, ready %d, steps %+v", got.Truncated, got.ReadyMillis, got.Steps)
	}
	if got.Instance == nil || !strings.HasPrefix(got.Instance.InstanceID, "i-0123\r\x1b[2KHOTPATH-REPORT") {
		t.Errorf("instance %.200q: want the value, cut, decoded back as it was", got.Instance)
	}
	// The hook got every line the init wrote, as the console shows it:
	// here all of the console's lines are the init's (no workload output),
	// less the empty line each event and report line starts with. Without
	// this the loop below passes with a hook that is never called.
	var lines []string
	for _, l := range strings.Split(out.String(), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	if !slices.Equal(hooked, lines) {
		t.Errorf("hook got %d lines, the console shows %d: want the same lines", len(hooked), len(lines))
	}
	// Both log calls, the event and the report, in that order.
	n := len(hooked)
	if n < 4 || !strings.HasPrefix(hooked[0], Prefix+"imds: instance-id i-0123") ||
		!slices.ContainsFunc(hooked, func(l string) bool { return strings.HasPrefix(l, Prefix+"user-data REJECTED (i-0123") }) ||
		!strings.HasPrefix(hooked[n-2], report.EventPrefix+`{"kind":"time-sync"`) ||
		!strings.HasPrefix(hooked[n-1], report.ReportPrefix+"{") {
		t.Errorf("hook got %d lines, want the two log calls' lines, then the event, then the report", n)
	}
	for _, l := range hooked {
		if strings.ContainsAny(l, "\r\x1b\n") || len(l) > MaxReport {
			t.Errorf("hook got %.100q (%d bytes)", l, len(l))
		}
	}
}

// TestEveryBound pushes each bound: a log line, a log call, an event, the
// report and its compact form, and a report too large for every level.
func TestEveryBound(t *testing.T) {
	t.Run("log line", func(t *testing.T) {
		var out bytes.Buffer
		c := &Console{Out: &out}
		c.Logf("%s", strings.Repeat("a", 10*MaxLine))
		if n := out.Len(); n > len(Prefix)+MaxLine+64 {
			t.Errorf("one log line of %d bytes", n)
		}
	})
	t.Run("log call", func(t *testing.T) {
		var out bytes.Buffer
		c := &Console{Out: &out}
		c.Logf("%s", strings.Repeat("line\n", 8000))
		if n := out.Len(); n > MaxLog+100 || !strings.Contains(out.String(), "not printed") {
			t.Errorf("one log call printed %d bytes", n)
		}
	})
	t.Run("event", func(t *testing.T) {
		var out bytes.Buffer
		c := &Console{Out: &out}
		steps := make([]report.Step, 5000)
		for i := range steps {
			steps[i] = report.Step{Name: fmt.Sprint("step ", i), Status: report.Applied, Error: strings.Repeat("e", 500)}
		}
		c.Line(report.EventPrefix, report.Event{Kind: report.EventNICReapply, Millis: 7, Steps: steps})
		n := out.Len()
		_, evs, err := report.Parse(&out)
		if err != nil || len(evs) != 1 || n > MaxEvent || evs[0].Kind != report.EventNICReapply || evs[0].Truncated == "" {
			t.Errorf("event line %d bytes, %d events, %v", n, len(evs), err)
		}
	})
	t.Run("report beyond every level", func(t *testing.T) {
		var out bytes.Buffer
		c := &Console{Out: &out}
		r := report.Report{Version: report.Version, ReadyMillis: -1, ReadyError: "not ready"}
		// Deeply nested is not possible in a report; many steps are.
		for i := range 100000 {
			r.Steps = append(r.Steps, report.Step{Name: fmt.Sprint("s", i), Status: report.Failed, Error: "x"})
		}
		c.Report(r)
		reps := checkConsole(t, out.Bytes(), 1)
		if out.Len() > MaxReport || reps[0].ReadyError != "not ready" || reps[0].Truncated == "" {
			t.Errorf("report %d bytes: %+v", out.Len(), reps[0].Truncated)
		}
		c.mu.Lock()
		n := len(c.keep)
		c.mu.Unlock()
		if n > MaxCompact+1 {
			t.Errorf("compact reprint of %d bytes", n)
		}
	})
}

// TestNormalUnchanged: a report and an event without hostile values
// print the same JSON as report.Format (apart from encoding/json's HTML
// escapes), with nothing truncated.
func TestNormalUnchanged(t *testing.T) {
	var out bytes.Buffer
	c := &Console{Out: &out}
	rep := report.Report{Version: report.Version, Kernel: "6.12.0", CPUs: 4, ReadyMillis: 812,
		Steps:  []report.Step{{Name: "nic-gro", Status: report.Applied, Millis: 0.25, Detail: map[string]string{"gro": "off"}}},
		Config: map[string]string{"workload.port": "8080", "net.mode": "dhcp"}, Facts: report.Facts{Sysctls: map[string]string{"a": "1"}}}
	c.Report(rep)
	want, _ := report.Format(report.ReportPrefix, rep)
	if got := strings.TrimPrefix(out.String(), "\n"); got != string(want) {
		t.Errorf("report\n%s\nwant\n%s", got, want)
	}
}

// TestEscapeText: each byte that would act on a terminal is escaped in a
// log line, and the prefixes are broken.
func TestEscapeText(t *testing.T) {
	for in, want := range map[string]string{
		"plain -- text é":        "plain -- text é",
		"a\rb\x1b[2Kc\td\x00":    `a\rb\x1b[2Kc\td\x00`,
		"\u0085\u202e\u2028\x7f": `\u0085\u202e\u2028\x7f`,
		"x HOTPATH-REPORT {}":    `x HOTPATH\x2dREPORT {}`,
		"bad \xff utf8":          `bad \xff utf8`,
	} {
		if got := string(appendText(nil, in)); got != want {
			t.Errorf("appendText(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWorkloadOutputEscaped: the workload's output keeps its lines and
// tabs, but a control byte or a "HOTPATH-" prefix, even split across
// writes, never reaches the console as it is.
func TestWorkloadOutputEscaped(t *testing.T) {
	var out bytes.Buffer
	c := &Console{Out: &out}
	w := c.Writer()
	for _, p := range []string{"served /a\tok é\n", "GET /x\rHOTPAT", "H-REPORT {\"version\":1}\x1b[31m\u0085\n", "HOTPATH", "-EVENT {}\n",
		"split C1 \xc2", "\x9b and bidi \xe2\x80", "\xae here, lone \x9b, é\n"} {
		fmt.Fprint(w, p)
	}
	c.Report(report.Report{Version: report.Version})
	checkConsole(t, out.Bytes(), 1)
	if !strings.HasPrefix(out.String(), "served /a\tok é\nGET /x\\x0dHOTPATH\\x2dREPORT") ||
		!strings.Contains(out.String(), `split C1 \u009b and bidi \u202e here, lone \x9b, é`) {
		t.Errorf("console %q", out.String())
	}
}

// TestFallback: a line that fits at no level is replaced by the caller's
// small fallback, whole (every key kept), with the reason.
func TestFallback(t *testing.T) {
	r := report.Report{Version: report.Version, ReadyMillis: -1, ReadyError: "not ready",
		Steps: make([]report.Step, 50)}
	line := boundLine(report.ReportPrefix, r, 600, func(why string) any {
		return report.Report{Version: r.Version, ReadyMillis: r.ReadyMillis, ReadyError: r.ReadyError, Compact: true, Truncated: why}
	})
	reps := checkConsole(t, line, 1)
	if got := reps[0]; !got.Compact || got.ReadyError != "not ready" || !strings.Contains(got.Truncated, "600 bytes") {
		t.Errorf("fallback %s", line)
	}
}

// TestLargeReportStaysInWindow: a full report near MaxReport is printed
// again (compact) before the output after it pushes it out of EC2's
// 64 KiB window, not only after KeepEvery bytes: after every write, the
// last Window bytes hold a whole report.
func TestLargeReportStaysInWindow(t *testing.T) {
	var out bytes.Buffer
	c := &Console{Out: &out}
	r := report.Report{Version: report.Version, ReadyMillis: 5}
	for i := range 300 {
		r.Steps = append(r.Steps, report.Step{Name: fmt.Sprint("step-", i), Status: report.Applied,
			Detail: map[string]string{"value": strings.Repeat("v", 100)}})
	}
	c.Report(r)
	if n := out.Len(); n < 32<<10 || n > MaxReport {
		t.Fatalf("report of %d bytes: want one between KeepEvery and MaxReport for this test", n)
	}
	w := c.Writer()
	for i := range 600 {
		switch i % 3 {
		case 0:
			c.Logf("log %d %s", i, strings.Repeat("x", 300))
		case 1:
			c.Line(report.EventPrefix, report.Event{Kind: report.EventRestart, Detail: strings.Repeat("d", 300)})
		case 2:
			fmt.Fprintf(w, "workload %d %s\n", i, strings.Repeat("y", 300))
		}
		all := out.Bytes()
		window := all[max(0, len(all)-Window):]
		if len(all) > Window {
			window = window[bytes.IndexByte(window, '\n')+1:] // whole lines only
		}
		reps, _, err := report.Parse(bytes.NewReader(window))
		if err != nil || len(reps) == 0 {
			t.Fatalf("after write %d (%d bytes in all): no whole report in the last %d bytes (%v)", i, len(all), Window, err)
		}
	}
}
