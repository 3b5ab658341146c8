package vm

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/report"
)

func line(t *testing.T, prefix string, v any) string {
	t.Helper()
	b, err := report.Format(prefix, v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestConsoleWaitReportAcrossWrites(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "console.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := NewConsole(f)
	rep := line(t, report.ReportPrefix, report.Report{Version: 1, CPUs: 2, ReadyMillis: 900,
		Steps: []report.Step{{Name: "mounts", Status: report.Applied}}})
	// The report arrives in pieces, as a serial port delivers it, after
	// kernel noise, with CRLF line ends.
	go func() {
		c.Write([]byte("[    0.000000] Linux version 6.1.0\r\n"))
		for i := 0; i < len(rep); i += 7 {
			time.Sleep(time.Millisecond)
			c.Write([]byte(strings.ReplaceAll(rep[i:min(i+7, len(rep))], "\n", "\r\n")))
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := c.WaitReport(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.CPUs != 2 || got.ReadyMillis != 900 || len(got.Steps) != 1 {
		t.Errorf("report = %+v", got)
	}
	b, _ := os.ReadFile(logPath)
	if !bytes.Contains(b, []byte("Linux version")) || !bytes.Contains(b, []byte(report.ReportPrefix)) {
		t.Errorf("console log file lacks the output: %q", b)
	}
}

func TestConsoleWaitEventSince(t *testing.T) {
	c := NewConsole(nil)
	c.Write([]byte(line(t, report.EventPrefix, report.Event{Kind: report.EventStart, PID: 2})))
	c.Write([]byte(line(t, report.EventPrefix, report.Event{Kind: report.EventExit, PID: 2, Detail: "old"})))
	mark := c.Len()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() {
		time.Sleep(10 * time.Millisecond)
		c.Write([]byte("noise\n"))
		c.Write([]byte(line(t, report.EventPrefix, report.Event{Kind: report.EventExit, PID: 7, Detail: "exit status 3"})))
		c.Write([]byte(line(t, report.EventPrefix, report.Event{Kind: report.EventRestart, BackoffMS: 100})))
	}()
	ev, seen, err := c.WaitEvent(ctx, mark, report.EventRestart)
	if err != nil {
		t.Fatal(err)
	}
	if ev.BackoffMS != 100 || len(seen) != 2 || seen[0].PID != 7 {
		t.Errorf("event %+v, seen %+v: want the restart after the new exit only", ev, seen)
	}
	evs, err := c.Events(mark)
	if err != nil || len(evs) != 2 {
		t.Errorf("Events(mark) = %+v, %v", evs, err)
	}
}

func TestConsoleWaitEnds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		close bool
		want  error
	}{
		{"closed", true, ErrConsoleClosed},
		{"deadline", false, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewConsole(nil)
			c.Write([]byte("a partial line with HOTPATH-REPORT but no newline"))
			if tc.close {
				c.Close()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, err := c.WaitReport(ctx)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), "partial line") {
				t.Errorf("error lacks the console tail: %v", err)
			}
		})
	}
}

func TestConsoleBadReportFails(t *testing.T) {
	c := NewConsole(nil)
	c.Write([]byte(report.ReportPrefix + "{\"version\":1,\"steps\":[\n"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := c.WaitReport(ctx); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a corrupt report: err = %v, want a parse error at once", err)
	}
}

func TestConsoleWaitString(t *testing.T) {
	c := NewConsole(nil)
	c.Write([]byte("one\ntwo ready\nthree\n"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	at, err := c.WaitString(ctx, 0, "ready")
	if err != nil || at != len("one\ntwo ready\n") {
		t.Fatalf("WaitString = %d, %v", at, err)
	}
	if _, err := c.WaitString(ctx, at, "ready"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a string before the mark was found again: %v", err)
	}
}

func TestConsoleOops(t *testing.T) {
	const trace = "BUG: unable to handle page fault for address: ffff9d8dfa201000\n" +
		"#PF: supervisor read access in kernel mode\n" +
		"RIP: 0010:virtnet_poll+0x1c/0x300\n" +
		"Kernel panic - not syncing: Fatal exception in interrupt\n"
	for _, tc := range []struct {
		name, console string
		n             int
		want          string
	}{
		{"none", "[    0.1] Linux version 6.12.117\nHOTPATH-EVENT {}\n", 10, ""},
		{"from the first fault line", "[    0.1] boot\n" + trace, 10, strings.TrimSuffix(trace, "\n")},
		{"at most n lines", "noise\n" + trace, 2, "BUG: unable to handle page fault for address: ffff9d8dfa201000\n#PF: supervisor read access in kernel mode"},
		{"a panic alone", "noise\nKernel panic - not syncing: VFS\nend\n", 5, "Kernel panic - not syncing: VFS\nend"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewConsole(nil)
			c.Write([]byte(tc.console))
			if got := c.Oops(tc.n); got != tc.want {
				t.Errorf("Oops(%d) = %q, want %q", tc.n, got, tc.want)
			}
		})
	}
}
