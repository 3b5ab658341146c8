package vm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/hotpath-dev/hotpath/init/report"
)

// Console collects a guest's serial output in memory (for waiting and
// parsing) and, when a file is given, on disk too (to read after a failure).
// It is safe for concurrent use: QEMU's output is written by one goroutine
// while the test waits on it from another.
type Console struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	file    io.Writer
	changed chan struct{} // closed and replaced on every write and on Close
	closed  bool
}

// NewConsole returns a console that also copies everything to file (nil: none).
func NewConsole(file io.Writer) *Console {
	return &Console{file: file, changed: make(chan struct{})}
}

// Write appends p. It never fails, so a full disk cannot stall the guest.
func (c *Console) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if c.file != nil {
		c.file.Write(p)
	}
	close(c.changed)
	c.changed = make(chan struct{})
	return len(p), nil
}

// Close marks the end of output (QEMU exited); waiters stop waiting.
func (c *Console) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.changed)
	}
}

// Len is the number of bytes received so far: a mark for "after now".
func (c *Console) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Len()
}

// String returns everything received so far.
func (c *Console) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// Tail returns the last n lines, for failure messages.
func (c *Console) Tail(n int) string {
	lines := strings.Split(strings.TrimRight(c.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// oopsMarkers begin the kernel's reports of its own faults: the first
// lines of an oops, a BUG, a warning with a backtrace, or a panic.
var oopsMarkers = []string{"BUG: ", "Oops: ", "general protection fault", "WARNING: CPU:", "Kernel panic - not syncing"}

// Oops returns the console from the first line that starts a kernel fault
// report (at most n lines), or "" when the kernel reported none. A
// failing test logs it beside the tail: a panic's tail is registers and
// "Kernel panic", while what faulted, and where, is the start of the
// report, often more lines up than a tail shows.
func (c *Console) Oops(n int) string {
	lines := strings.Split(strings.TrimRight(c.String(), "\n"), "\n")
	for i, l := range lines {
		for _, m := range oopsMarkers {
			if strings.Contains(l, m) {
				lines = lines[i:]
				if len(lines) > n {
					lines = lines[:n]
				}
				return strings.Join(lines, "\n")
			}
		}
	}
	return ""
}

// ErrConsoleClosed is returned by waits that end because the output ended.
var ErrConsoleClosed = errors.New("console closed (QEMU exited)")

// wait calls match with the complete lines received from offset since on,
// each time more output arrives, until match reports done, ctx ends or the
// console closes. match gets whole lines only (up to the last newline).
func (c *Console) wait(ctx context.Context, since int, match func(lines []byte) (bool, error)) error {
	for {
		c.mu.Lock()
		b := c.buf.Bytes()
		if since > len(b) {
			since = len(b)
		}
		end := bytes.LastIndexByte(b[since:], '\n') + 1
		lines := append([]byte(nil), b[since:since+end]...)
		changed, closed := c.changed, c.closed
		c.mu.Unlock()

		if done, err := match(lines); err != nil || done {
			return err
		}
		if closed {
			return ErrConsoleClosed
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitString waits until s appears in a complete line after offset since and
// returns the offset just past that line.
func (c *Console) WaitString(ctx context.Context, since int, s string) (int, error) {
	var at int
	err := c.wait(ctx, since, func(lines []byte) (bool, error) {
		i := bytes.Index(lines, []byte(s))
		if i < 0 {
			return false, nil
		}
		at = since + i + bytes.IndexByte(lines[i:], '\n') + 1
		return true, nil
	})
	if err != nil {
		return 0, fmt.Errorf("waiting for %q on the console: %w\n--- console tail ---\n%s", s, err, c.Tail(30))
	}
	return at, nil
}

// WaitReport waits for the boot report and returns the first one.
func (c *Console) WaitReport(ctx context.Context) (*report.Report, error) {
	var rep *report.Report
	err := c.wait(ctx, 0, func(lines []byte) (bool, error) {
		if !bytes.Contains(lines, []byte(report.ReportPrefix)) {
			return false, nil
		}
		reps, _, err := report.Parse(bytes.NewReader(lines))
		if err != nil {
			return false, err
		}
		if len(reps) == 0 {
			return false, nil
		}
		rep = &reps[0]
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the boot report: %w\n--- console tail ---\n%s", err, c.Tail(40))
	}
	return rep, nil
}

// Events returns the events received after offset since.
func (c *Console) Events(since int) ([]report.Event, error) {
	var evs []report.Event
	err := c.wait(context.Background(), since, func(lines []byte) (bool, error) {
		var err error
		_, evs, err = report.Parse(bytes.NewReader(lines))
		return true, err
	})
	return evs, err
}

// WaitEvent waits for an event of the given kind after offset since, and
// returns it and every event seen after since up to and including it.
func (c *Console) WaitEvent(ctx context.Context, since int, kind string) (report.Event, []report.Event, error) {
	var found report.Event
	var seen []report.Event
	err := c.wait(ctx, since, func(lines []byte) (bool, error) {
		_, evs, err := report.Parse(bytes.NewReader(lines))
		if err != nil {
			return false, err
		}
		for i, ev := range evs {
			if ev.Kind == kind {
				found, seen = ev, evs[:i+1]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return found, nil, fmt.Errorf("waiting for event %q: %w\n--- console tail ---\n%s", kind, err, c.Tail(30))
	}
	return found, seen, nil
}
