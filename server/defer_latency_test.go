package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/server"
)

// TestDeferLatency is the reason for deferred responses: with 10% of the
// requests waiting on a 50 ms backend, the other requests of the same
// worker keep their latency when the handler defers, and do not when it
// blocks. An open-loop client offers 100 requests a second to one worker
// in three ways: no backend traffic (the baseline), 10% to a route that
// defers and finishes after 50 ms, 10% to a route that sleeps 50 ms on
// the worker; the latency of the other requests is measured from their
// scheduled send time (no coordinated omission). The three run in turns
// of 250 ms, 16 times, so that the shared machine's load hits them alike.
//
// Asserted, from the mechanism: blocking makes the worker unavailable
// half of the time (10 × 50 ms a second), so about half of the other
// requests arrive during a sleep and wait for the rest of it, uniform
// over 0-50 ms: a quarter of them wait over 25 ms. At least 10% more of
// them than in the baseline must take over 25 ms: that shows the test
// can fail. Deferring holds the worker a few microseconds per backend
// request: at most 5% more of the others than in the baseline take over
// 25 ms. The p99s and their ratios are logged, not asserted: they are
// the machine's. On this 2-core machine with every other process at nice
// 19 (2026-12-05, three runs) the ratio deferred/none was 0.93, 0.98 and
// 1.01 (p99 4.6-6.2 ms both, almost all of it wake-ups waiting behind the
// nice-19 processes and the client's millisecond timers), blocking 7.2x
// to 8.6x; with other processes at nice 0 (load 8-14) it was 1.86 once.
func TestDeferLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("18 s of open-loop load")
	}
	_, addr := startAPI(t, nil, func(s *server.Server) {
		s.Handle("GET", "/now", func(c *server.Ctx) { c.WriteString("ok") })
		s.Handle("GET", "/deferred", func(c *server.Ctx) {
			d := c.Defer()
			go func() {
				time.Sleep(50 * time.Millisecond)
				d.Finish(func(c *server.Ctx) { c.WriteString("backend") })
			}()
		})
		s.Handle("GET", "/blocking", func(c *server.Ctx) {
			time.Sleep(50 * time.Millisecond)
			c.WriteString("backend")
		})
	})
	var base, def, blk []time.Duration
	for range 16 {
		base = append(base, openLoop(t, addr, "")...)
		def = append(def, openLoop(t, addr, "/deferred")...)
		blk = append(blk, openLoop(t, addr, "/blocking")...)
	}
	p99 := func(l []time.Duration) time.Duration { slices.Sort(l); return l[len(l)*99/100] }
	over := func(l []time.Duration) float64 {
		n := 0
		for _, d := range l {
			if d > 25*time.Millisecond {
				n++
			}
		}
		return float64(n) / float64(len(l))
	}
	bp, dp, kp := p99(base), p99(def), p99(blk)
	t.Logf("other requests: p99 none %v, deferred %v (ratio %.2f), blocking %v (ratio %.2f); over 25 ms: %.1f%%, %.1f%%, %.1f%% (%d, %d, %d requests)",
		bp, dp, float64(dp)/float64(bp), kp, float64(kp)/float64(bp),
		100*over(base), 100*over(def), 100*over(blk), len(base), len(def), len(blk))
	if over(blk) < over(base)+0.10 {
		t.Errorf("blocking handler: %.1f%% of the others over 25 ms, baseline %.1f%%: the test cannot tell blocking from deferring", 100*over(blk), 100*over(base))
	}
	if over(def) > over(base)+0.05 {
		t.Errorf("deferring handler: %.1f%% of the others over 25 ms, baseline %.1f%%", 100*over(def), 100*over(base))
	}
}

// openLoop offers 100 requests a second for 250 ms (then waits for the
// answers and 60 ms more, so that no backend call overlaps the next run), every tenth to backend
// when it is not "", the others to /now, each on a connection of its own
// class's pool, and returns the latencies of the /now requests.
func openLoop(t *testing.T, addr, backend string) []time.Duration {
	const rate, dur = 100, 250 * time.Millisecond
	var conns []net.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	pool := func(n int) chan *bufio.ReadWriter {
		ch := make(chan *bufio.ReadWriter, n)
		for range n {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, nc)
			ch <- bufio.NewReadWriter(bufio.NewReader(nc), bufio.NewWriter(nc))
		}
		return ch
	}
	now, back := pool(32), pool(16)
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for i := range int(dur.Seconds() * rate) {
		at := start.Add(time.Duration(i) * time.Second / rate)
		time.Sleep(time.Until(at))
		path, p := "/now", now
		if backend != "" && i%10 == 5 {
			path, p = backend, back
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rw := <-p
			defer func() { p <- rw }()
			fmt.Fprintf(rw, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
			rw.Flush()
			code, _, err := readOne(rw.Reader)
			if err != nil || code != 200 {
				t.Errorf("%s: %d %v", path, code, err)
				return
			}
			if path == "/now" {
				mu.Lock()
				lat = append(lat, time.Since(at))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	time.Sleep(60 * time.Millisecond)
	return lat
}

var _ = io.EOF
