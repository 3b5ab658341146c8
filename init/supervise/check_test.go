package supervise

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/report"
)

// TestCheckStatusLine drives one HTTP liveness probe against a listener
// that answers each status line in turn: a status below 500 is alive
// (404 too: the workload is up, its path is wrong), 500 and above is
// not, and a line that is not an HTTP status line is not.
func TestCheckStatusLine(t *testing.T) {
	for _, tt := range []struct {
		line string
		ok   bool
	}{
		{"HTTP/1.1 200 OK\r\n", true},
		{"HTTP/1.1 499 Client Closed Request\r\n", true},
		{"HTTP/1.0 404 Not Found\r\n", true},
		{"HTTP/1.1 500 Internal Server Error\r\n", false},
		{"HTTP/1.1 503 Service Unavailable\r\n", false},
		{"SSH-2.0-OpenSSH_9.2\r\n", false},
		{"HTTX/1.1 200 OK\r\n", false},
		{"HTTP/1.1 OK\r\n", false},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			buf := make([]byte, 512)
			c.Read(buf)
			c.Write([]byte(tt.line))
		}()
		s := &Supervisor{cfg: Config{Liveness: &Liveness{Path: "/healthz", Timeout: 5 * time.Second}}}
		err = s.check(context.Background(), ln.Addr().String())
		ln.Close()
		if (err == nil) != tt.ok {
			t.Errorf("status line %q: check = %v, want alive=%v", strings.TrimSpace(tt.line), err, tt.ok)
		}
	}
}

// exitVia asks a "serve" helper workload to exit with code.
func exitVia(t *testing.T, s *Supervisor, code int) {
	t.Helper()
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.cfg.Port))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "exit %d\n", code)
	c.Close()
}

// TestWindowEdges: a run exactly as long as the crash-loop window is a
// fresh start (the back-off resets), and two exits exactly a window apart
// are both within it (CrashLoopExits 2 then reports a crash loop).
func TestWindowEdges(t *testing.T) {
	t.Run("run of one window resets the back-off", func(t *testing.T) {
		s, clk, rec, _ := setup(t, "serve", func(c *Config) { c.CrashLoopExits = 100 })
		go s.Run()
		for round, run := range []time.Duration{time.Second, 10 * time.Second} {
			rec.next(t, report.EventStart)
			rec.next(t, report.EventReady)
			clk.Advance(run)
			exitVia(t, s, 7)
			rec.next(t, report.EventExit)
			rec.next(t, report.EventRestart)
			if d := clk.waitTimer(t); d != 100*time.Millisecond {
				t.Errorf("round %d: back-off %v after a %v run, want 100ms", round, d, run)
			}
			clk.Advance(100 * time.Millisecond)
		}
	})
	t.Run("exits one window apart are one crash loop", func(t *testing.T) {
		s, clk, rec, _ := setup(t, "serve", func(c *Config) { c.CrashLoopExits = 2 })
		go s.Run()
		rec.next(t, report.EventStart)
		rec.next(t, report.EventReady)
		exitVia(t, s, 7)
		rec.next(t, report.EventExit)
		rec.next(t, report.EventRestart)
		d := clk.waitTimer(t)
		clk.Advance(d)
		rec.next(t, report.EventStart)
		rec.next(t, report.EventReady)
		clk.Advance(10*time.Second - d) // the second exit is one window after the first
		exitVia(t, s, 7)
		rec.next(t, report.EventExit)
		if ev := rec.next(t, report.EventCrashLoop); ev.Kind != report.EventCrashLoop {
			t.Errorf("no crash loop for two exits one window apart: %+v", ev)
		}
	})
}
