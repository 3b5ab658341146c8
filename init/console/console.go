// Package console writes the init's output: log lines prefixed
// "hotpath-init: " to the console and to the kernel log, and the
// machine-readable report and event lines to the console only.
//
// Everything the init writes through the Console is escaped and bounded
// here, in one place (escape.go, bound.go): no control byte, no
// bidirectional override and no "HOTPATH-" prefix from a value reaches the
// console, a log line holds at most MaxLine bytes, an event MaxEvent and
// the boot report MaxReport. Callers print values from outside as they
// are.
//
// Kernel-log copies are written at KERN_DEBUG (<7>) so that the kernel,
// at its default console log level, does not echo them to the console a
// second time; they are still in the kernel ring buffer (dmesg). Report
// lines do not go to /dev/kmsg at all: a kmsg record is limited to about
// 1 KiB and the boot report is longer.
//
// EC2's get-console-output returns only the last 64 KiB of the console.
// The boot report is printed once, so events, log lines and the
// workload's own output would push it out of that window on a long-lived
// instance: the Console counts what goes through it and, once KeepEvery
// bytes have followed the report, or sooner when the report printed last
// is so long that the output after it would push it out of the window,
// prints the report's compact form again.
package console

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/hotpath-dev/hotpath/init/report"
)

// Prefix starts every log line.
const Prefix = "hotpath-init: "

// KeepEvery is how much output may follow the latest report before it is
// printed again: half of EC2's 64 KiB window, leaving the other half for
// kernel messages, which do not pass through the Console.
const KeepEvery = 32 << 10

// Window is what EC2's get-console-output returns: the console's last
// 64 KiB. The report printed last is kept within it.
const Window = 64 << 10

// Console is safe for concurrent use; each line is one write.
type Console struct {
	mu   sync.Mutex
	Out  io.Writer // the console (/dev/console or stdout)
	Kmsg io.Writer // /dev/kmsg, or nil
	// Every overrides KeepEvery (tests).
	Every int
	// Hold, when set, keeps the kernel's own messages off the console
	// while a report line is sent, and returns what ends the hold (see
	// KernelHold); nil holds nothing.
	Hold func() (release func())

	since int               // bytes written since the report was last printed
	shown int               // length of the report line last printed (full or compact)
	match int               // bytes of marker the workload's output ends with (escapeStream)
	carry []byte            // an unfinished UTF-8 character the workload's last write ended with
	keep  []byte            // the report line to print again, nil before Keep
	kept  int               // times it was printed again
	lines func(line string) // OnLine's hook, nil without one
}

// Logf writes one log line (or one per line of the message), escaped and
// bounded: MaxLine bytes a line, MaxLog bytes a call.
func (c *Console) Logf(format string, args ...any) {
	lines := logLines(fmt.Sprintf(format, args...))
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range lines {
		c.before(len(Prefix) + len(l) + 1)
		c.out([]byte(Prefix + l + "\n"))
		if c.Kmsg != nil {
			io.WriteString(c.Kmsg, "<7>"+Prefix+l+"\n")
		}
		c.hook(Prefix + l)
	}
	c.keepReport()
}

// OnLine has f called with every later line the init itself writes: log
// lines (with Prefix), report and event lines (with their prefix), each
// without its newline, right after its console write. The workload's
// output (Writer, Passthrough) and the report's reprints are not lines of
// the init, so f never sees them, and a workload's partial line can
// neither hide an init line from f nor pass for one. f runs under the
// console's lock: it must not block or write to the console.
func (c *Console) OnLine(f func(line string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = f
}

func (c *Console) hook(line string) {
	if c.lines != nil {
		c.lines(line)
	}
}

// Write implements io.Writer for libraries that log through log.Logger.
func (c *Console) Write(p []byte) (int, error) {
	c.Logf("%s", p)
	return len(p), nil
}

// Line writes an event line (report.Format's form) to the console,
// escaped and within MaxEvent bytes.
func (c *Console) Line(prefix string, v any) {
	b := boundLine(prefix, v, MaxEvent, func(why string) any {
		ev := report.Event{Truncated: "event left out: " + why}
		if e, ok := v.(report.Event); ok {
			ev.Kind, ev.Millis, ev.PID = e.Kind, e.Millis, e.PID
		}
		return ev
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.before(len(b) + 1)
	c.line(b)
	c.keepReport()
}

// line writes b (report.Format's, newline included) on a fresh line, as
// kernel messages may have left the cursor mid-line on a serial console,
// and hands it to the hook. The caller holds c.mu.
func (c *Console) line(b []byte) {
	c.out(append([]byte("\n"), b...))
	c.hook(string(b[:len(b)-1]))
}

// Report prints the boot report and keeps its compact form (see
// report.Compacted) to print again whenever KeepEvery bytes have followed
// it.
//
// Both are escaped and bounded (MaxReport, MaxCompact): a report that does
// not fit has its longest strings and lists cut (the "truncated" key says
// what), then is printed compact, and at worst reduced to its version,
// readiness and a note, so that it always fits in EC2's 64 KiB window.
func (c *Console) Report(r report.Report) {
	compact := r.Compacted()
	least := func(why string) any {
		return report.Report{Version: r.Version, ReadyMillis: r.ReadyMillis, ReadyError: r.ReadyError, Compact: true,
			Truncated: "report reduced to its readiness: " + why}
	}
	b := fit(report.ReportPrefix, r, MaxReport, levels[:2])
	if b == nil {
		b = boundLine(report.ReportPrefix, compact, MaxReport, least)
	}
	cb := boundLine(report.ReportPrefix, compact, MaxCompact, least)
	c.mu.Lock()
	defer c.mu.Unlock()
	release := c.hold()
	c.line(b)
	release()
	c.keep = append([]byte("\n"), cb...)
	c.since, c.shown = 0, len(b)+1
}

// Reprints returns how many times the report was printed again.
func (c *Console) Reprints() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kept
}

// Writer returns a writer of output that is not the init's own (the
// workload's): written to the console as it comes (lines as they are,
// control bytes other than newline and tab escaped, and no "HOTPATH-"
// prefix, see escapeStream), counted towards KeepEvery, never passed to
// OnLine's hook.
func (c *Console) Writer() io.Writer { return rawWriter{c} }

type rawWriter struct{ c *Console }

// Write cuts p where the report is due, so that a large write cannot
// carry the report out of the window.
func (w rawWriter) Write(p []byte) (int, error) {
	c := w.c
	c.mu.Lock()
	defer c.mu.Unlock()
	written := len(p)
	p = c.escapeStream(p)
	for len(p) > 0 {
		n := len(p)
		if room := c.due(); c.keep != nil && room > 0 && n > room {
			n = room
		}
		c.out(p[:n])
		c.keepReport()
		p = p[n:]
	}
	return written, nil
}

// Passthrough returns the write end of a pipe whose output (the
// workload's stdout and stderr) is copied to Writer as it comes. The
// caller passes it to the child and keeps it open.
func (c *Console) Passthrough() (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	go func() {
		io.CopyBuffer(c.Writer(), r, make([]byte, 4096))
		r.Close()
	}()
	return w, nil
}

func (c *Console) out(b []byte) {
	if c.Out != nil {
		c.Out.Write(b)
	}
	c.since += len(b)
}

func (c *Console) every() int {
	if c.Every != 0 {
		return c.Every
	}
	return KeepEvery
}

// due returns how many bytes may still follow the report last printed
// before it must be printed again: KeepEvery since it, and never so many
// that it would leave the last Window bytes (a full report of up to
// MaxReport bytes is reprinted, compact, sooner than KeepEvery).
func (c *Console) due() int {
	return min(c.every()-c.since, Window-c.shown-c.since)
}

// keepReport prints the report again when it is due. The caller holds
// c.mu.
func (c *Console) keepReport() {
	if c.keep != nil && c.due() <= 0 {
		c.reprint()
	}
}

// before prints the report again, ahead of an init line of n bytes, when
// the line would push it out of the window. The caller holds c.mu.
func (c *Console) before(n int) {
	if c.keep != nil && n > c.due() {
		c.reprint()
	}
}

// hold starts Hold's hold, if any, and returns its release. The caller
// holds c.mu.
func (c *Console) hold() func() {
	if c.Hold == nil {
		return func() {}
	}
	return c.Hold()
}

func (c *Console) reprint() {
	release := c.hold()
	c.out(c.keep)
	release()
	c.since, c.shown = 0, len(c.keep)
	c.kept++
}
