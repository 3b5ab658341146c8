package main

import (
	"bytes"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/console"
)

// TestRouteSignals: shutdown signals become requests (INT a reboot), the
// rest are logged (first of a kind, then every 100th) and ignored.
func TestRouteSignals(t *testing.T) {
	var out bytes.Buffer
	con := &console.Console{Out: &out}
	sigs := make(chan os.Signal, 300)
	requests := make(chan request, 4)
	for range 150 {
		sigs <- syscall.SIGHUP
	}
	sigs <- syscall.SIGQUIT
	sigs <- syscall.SIGTERM
	sigs <- syscall.SIGINT
	close(sigs)
	done := make(chan struct{})
	go func() { routeSignals(con, sigs, requests); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("routeSignals did not return after its channel closed")
	}
	if r := <-requests; r.reboot || !strings.Contains(r.why, "SIGTERM") {
		t.Errorf("first request %+v, want power off on SIGTERM", r)
	}
	if r := <-requests; !r.reboot || !strings.Contains(r.why, "SIGINT") {
		t.Errorf("second request %+v, want a reboot on SIGINT", r)
	}
	select {
	case r := <-requests:
		t.Errorf("extra request %+v", r)
	default:
	}
	logs := out.String()
	for _, want := range []string{"signal hangup (1 times) ignored", "signal hangup (101 times) ignored", "signal quit (1 times) ignored"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if n := strings.Count(logs, "signal hangup"); n != 2 {
		t.Errorf("%d log lines for 150 SIGHUPs, want 2", n)
	}
}
