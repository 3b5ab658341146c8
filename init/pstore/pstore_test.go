package pstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/report"
	"golang.org/x/sys/unix"
)

// A panic dump as efi-pstore leaves it after sysrq-c: Part1 holds the
// newest lines (the panic), Part2 the ones before. Names as
// fs/pstore/inode.c makes them: (time*100+part)*1000+count.
var sysrqPanic = map[string]string{
	"dmesg-efi_pstore-173301234501001": "Panic#1 Part1\n" +
		"<6>[   41.200000] sysrq: Trigger a crash\n" +
		"<0>[   41.200100] Kernel panic - not syncing: sysrq triggered crash\n" +
		"<4>[   41.200200] CPU: 1 UID: 0 PID: 212 Comm: probe Not tainted 6.12.117 #1\n" +
		"<4>[   41.200300] Call Trace:\n" +
		"<4>[   41.200400]  <TASK>\n" +
		"<4>[   41.200500]  panic+0x34c/0x370\n",
	"dmesg-efi_pstore-173301234502001": "Panic#1 Part2\n" +
		"<6>[   30.000000] hotpath-init: ready in 30000 ms after kernel start\n" +
		"<6>[   40.000000] probe: writing c to /proc/sysrq-trigger\n",
}

func writeRecords(t *testing.T, recs map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range recs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func mustRead(t *testing.T, dir string) []Record {
	t.Helper()
	recs, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestDumpsJoinsParts(t *testing.T) {
	recs, err := Read(writeRecords(t, sysrqPanic))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Type != "dmesg" || recs[0].Backend != "efi_pstore" {
		t.Fatalf("records %+v", recs)
	}
	dumps := Dumps(recs)
	if len(dumps) != 1 {
		t.Fatalf("%d dumps, want 1: %+v", len(dumps), dumps)
	}
	d := dumps[0]
	if d.Reason != "Panic" || d.Count != 1 {
		t.Errorf("dump %s#%d, want Panic#1", d.Reason, d.Count)
	}
	// Oldest first: Part2's lines, then Part1's; no syslog priorities.
	if len(d.Lines) != 8 || !strings.Contains(d.Lines[0], "ready in 30000 ms") || !strings.HasSuffix(d.Lines[7], "panic+0x34c/0x370") {
		t.Errorf("lines out of order:\n%s", strings.Join(d.Lines, "\n"))
	}
	for _, l := range d.Lines {
		if strings.HasPrefix(l, "<") {
			t.Errorf("priority left on %q", l)
		}
	}
	if h := d.Headline(); h != "Kernel panic - not syncing: sysrq triggered crash" {
		t.Errorf("headline %q", h)
	}
}

// With panic_on_oops=1 an oops dumps twice: the oops (#1), then the panic
// it leads to (#2). The panic is the one to report; a compressed record
// the kernel could not decompress and a console record are not dumps.
func TestWorst(t *testing.T) {
	recs := []Record{
		parseName("dmesg-efi_pstore-100101001", []byte("Oops#1 Part1\n<1>[ 5.0] BUG: kernel NULL pointer dereference, address: 0000000000000000\n")),
		parseName("dmesg-efi_pstore-100101002", []byte("Panic#2 Part1\n<0>[ 5.1] Kernel panic - not syncing: Fatal exception\n")),
		parseName("dmesg-efi_pstore-100102003.enc.z", []byte("\x78\x9c garbage")),
		parseName("console-ramoops-0", []byte("Panic#9 Part1\nnot a dump\n")),
	}
	if !recs[2].Compressed || recs[3].Type != "console" || recs[3].Backend != "ramoops" {
		t.Fatalf("names parsed as %+v", recs)
	}
	dumps := Dumps(recs)
	if len(dumps) != 2 {
		t.Fatalf("%d dumps, want 2: %+v", len(dumps), dumps)
	}
	w, ok := Worst(dumps)
	if !ok || w.Reason != "Panic" || w.Headline() != "Kernel panic - not syncing: Fatal exception" {
		t.Errorf("worst %+v (%q)", w, w.Headline())
	}
	if h := dumps[0].Headline(); h != "BUG: kernel NULL pointer dereference, address: 0000000000000000" {
		t.Errorf("oops headline %q", h)
	}
	if _, ok := Worst(nil); ok {
		t.Error("Worst(nil) found a dump")
	}
}

func sysWithBackend(t *testing.T, name string) string {
	t.Helper()
	sys := t.TempDir()
	p := filepath.Join(sys, "module/pstore/parameters")
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "backend"), []byte(name+"\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	return sys
}

// The step reads the panic, prints it with its last lines, summarises it
// and removes every record, so that the boot after it reports nothing.
func TestStepReportsAndClears(t *testing.T) {
	dir := writeRecords(t, sysrqPanic)
	var out report.PreviousBoot
	var console []string
	mounted := ""
	c := Capture{Dir: dir, SysRoot: sysWithBackend(t, "efi_pstore"), Lines: 3,
		Mount: func(d string) error { mounted = d; return nil },
		Logf:  func(f string, a ...any) { console = append(console, fmt.Sprintf(f, a...)) },
		Out:   &out}
	r := boot.RunOne(context.Background(), c.Step())
	if r.Status != report.Applied {
		t.Fatalf("step %s: %s %s", r.Status, r.Reason, r.Error)
	}
	if mounted != dir {
		t.Errorf("mounted %q, want %q", mounted, dir)
	}
	want := "previous boot: panic, Kernel panic - not syncing: sysrq triggered crash"
	if !out.Crashed || out.Reason != "panic" || out.Summary != want || out.Records != 2 || out.Backend != "efi_pstore" || !out.Cleared {
		t.Errorf("report %+v", out)
	}
	// Lines: 3, from ten before the headline (here: from the first).
	if len(out.Lines) != 3 || !strings.HasSuffix(out.Lines[2], "sysrq: Trigger a crash") {
		t.Errorf("report lines %q, want the first 3", out.Lines)
	}
	// The default window: every line here, the panic line among them.
	c.Lines = 0
	if w := c.window(Dumps(mustRead(t, writeRecords(t, sysrqPanic)))[0]); len(w) != 8 || !strings.Contains(w[3], "Kernel panic") {
		t.Errorf("window %q", w)
	}
	if len(console) == 0 || !strings.HasPrefix(console[0], want) {
		t.Fatalf("console %q", console)
	}
	if !slices.ContainsFunc(console, func(l string) bool {
		return l == ConsolePrefix+"[   41.200100] Kernel panic - not syncing: sysrq triggered crash"
	}) {
		t.Errorf("console without the panic line:\n%s", strings.Join(console, "\n"))
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("%d records left after the step", len(left))
	}
	// The next boot: nothing to report, nothing printed.
	out, console = report.PreviousBoot{}, nil
	r = boot.RunOne(context.Background(), c.Step())
	if r.Status != report.Applied || out.Crashed || out.Records != 0 || len(console) != 0 {
		t.Errorf("second boot: step %s %s, report %+v, console %q", r.Status, r.Error, out, console)
	}
}

// A kernel without pstore skips; one without a backend skips and says a
// panic would leave nothing; a mount that fails otherwise fails.
func TestStepWithoutPstore(t *testing.T) {
	for _, c := range []struct {
		name    string
		mount   error
		backend bool
		want    report.Status
		reason  string
	}{
		{"no fs", unix.ENODEV, false, report.Skipped, "CONFIG_PSTORE"},
		{"no mount point", unix.ENOENT, false, report.Skipped, "CONFIG_PSTORE"},
		{"no backend", nil, false, report.Skipped, "no pstore backend"},
		{"mount refused", unix.EPERM, true, report.Failed, "operation not permitted"},
		{"empty", nil, true, report.Applied, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			sys := t.TempDir()
			if c.backend {
				sys = sysWithBackend(t, "efi_pstore")
			}
			var out report.PreviousBoot
			cp := Capture{Dir: t.TempDir(), SysRoot: sys, Out: &out,
				Mount: func(string) error { return c.mount }}
			r := boot.RunOne(context.Background(), cp.Step())
			if r.Status != c.want || !strings.Contains(r.Reason+r.Error, c.reason) {
				t.Errorf("step %s (%s%s), want %s with %q", r.Status, r.Reason, r.Error, c.want, c.reason)
			}
		})
	}
}

// A record that cannot be removed fails the step: the next boot would
// report the same crash again.
func TestStepClearFails(t *testing.T) {
	// A non-empty directory under the record name: Remove refuses it
	// even to root.
	dir := writeRecords(t, sysrqPanic)
	recs, _ := Read(dir)
	recs = append(recs, Record{Name: "sub"})
	if err := os.MkdirAll(filepath.Join(dir, "sub", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := Clear(dir, recs)
	if err == nil || !errors.Is(err, unix.ENOTEMPTY) && !strings.Contains(err.Error(), "still there") {
		t.Errorf("Clear = %v, want a failure for sub", err)
	}
}

// In a long dump the report keeps ten lines before the panic line and
// what follows it, up to Lines: the stack trace, not just the tail.
func TestWindowAroundHeadline(t *testing.T) {
	var b strings.Builder
	b.WriteString("Panic#1 Part1\n")
	for i := 0; i < 100; i++ {
		if i == 60 {
			b.WriteString("<0>[ 9.0] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000009\n")
			continue
		}
		fmt.Fprintf(&b, "<4>[ 9.0] line %d\n", i)
	}
	d := Dumps([]Record{parseName("dmesg-efi_pstore-1", []byte(b.String()))})[0]
	w := Capture{Lines: 20}.window(d)
	if len(w) != 20 || w[0] != "[ 9.0] line 50" || !strings.Contains(w[10], "Attempted to kill init") || w[19] != "[ 9.0] line 69" {
		t.Errorf("window %q", w)
	}
	if h := d.Headline(); h != "Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000009" {
		t.Errorf("headline %q", h)
	}
}
