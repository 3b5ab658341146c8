package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/server"
)

// TestDeferAbandoned: 10,000 deferred requests whose clients leave. What
// they hold is counted (MemoryInUse grows while 1,000 are held), every
// context is cancelled with ErrClientGone, and the worker's memory and
// the goroutines go back to idle.
func TestDeferAbandoned(t *testing.T) {
	var deferred, cancelled, wrongCause atomic.Int64
	var backends sync.WaitGroup
	s, addr := startAPI(t, nil, func(s *server.Server) {
		s.Handle("GET", "/d", func(c *server.Ctx) {
			d := c.Defer()
			deferred.Add(1)
			backends.Add(1)
			go func() {
				defer backends.Done()
				<-d.Context().Done()
				if !errors.Is(context.Cause(d.Context()), server.ErrClientGone) {
					wrongCause.Add(1)
				}
				cancelled.Add(1)
			}()
		})
	})
	idleMem := settle(s)
	idleG := runtime.NumGoroutine()

	// 1,000 held at once.
	var conns []net.Conn
	for range 1000 {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
		io.WriteString(nc, "GET /d HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	waitFor(t, func() bool { return deferred.Load() == 1000 }, "1,000 deferred")
	time.Sleep(50 * time.Millisecond) // the worker publishes its figure once per loop turn
	held := s.MemoryInUse() - idleMem
	t.Logf("1,000 deferred requests: MemoryInUse +%d KiB (connections' input buffers included)", held>>10)
	if held < 1000*(16<<10+1024) {
		t.Errorf("MemoryInUse grew by %d bytes for 1,000 connections with a deferred request: the deferred requests are not counted", held)
	}
	for _, nc := range conns {
		nc.Close()
	}
	// 9,000 more, 50 clients at a time, each leaving right after its
	// request.
	var wg sync.WaitGroup
	for g := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 180 {
				nc, err := net.Dial("tcp", addr)
				if err != nil {
					t.Errorf("client %d dial %d: %v", g, i, err)
					return
				}
				io.WriteString(nc, "GET /d HTTP/1.1\r\nHost: x\r\n\r\n")
				if i%2 == 1 {
					nc.(*net.TCPConn).SetLinger(0) // half of them reset
				}
				nc.Close()
			}
		}()
	}
	wg.Wait()
	waitFor(t, func() bool { return cancelled.Load() == 10000 }, "10,000 cancelled")
	backends.Wait()
	if d := deferred.Load(); d != 10000 {
		t.Errorf("deferred %d, want 10,000", d)
	}
	if n := wrongCause.Load(); n != 0 {
		t.Errorf("%d contexts ended with another cause than ErrClientGone", n)
	}
	waitFor(t, func() bool { return runtime.NumGoroutine() <= idleG }, fmt.Sprintf("goroutines back to %d", idleG))
	// Idle: the worker's timeout pass gives the spare buffers back.
	waitFor(t, func() bool { return s.MemoryInUse() <= idleMem }, "MemoryInUse back to idle")
	t.Logf("MemoryInUse idle %d KiB, after %d KiB; goroutines %d", idleMem>>10, s.MemoryInUse()>>10, runtime.NumGoroutine())
}

// settle returns MemoryInUse once it stops changing.
func settle(s *server.Server) int64 {
	m := s.MemoryInUse()
	for range 30 {
		time.Sleep(50 * time.Millisecond)
		n := s.MemoryInUse()
		if n == m {
			return m
		}
		m = n
	}
	return m
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for end := time.Now().Add(15 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDeferDrain: Shutdown with deferred requests in flight. Those
// finished within the grace period are answered (with Connection:
// close); the hung ones are cancelled (ErrDrained) when the grace ends,
// their connections closed without a response, their late Finish false;
// Shutdown returns within the grace.
func TestDeferDrain(t *testing.T) {
	const grace = 400 * time.Millisecond
	held := make(chan *server.Deferred, 16)
	s, addr := startAPI(t, nil, func(s *server.Server) {
		s.Handle("GET", "/d", func(c *server.Ctx) { held <- c.Defer() })
	})
	type client struct {
		nc   net.Conn
		resp chan string
	}
	var clients []client
	for range 6 {
		nc, _ := dial(t, addr)
		io.WriteString(nc, "GET /d HTTP/1.1\r\nHost: x\r\n\r\n")
		cl := client{nc, make(chan string, 1)}
		go func() {
			b, _ := io.ReadAll(nc)
			cl.resp <- string(b)
		}()
		clients = append(clients, cl)
	}
	var ds []*server.Deferred
	for range 6 {
		ds = append(ds, <-held)
	}
	// Three finish during the drain, three never.
	for _, d := range ds[:3] {
		go func() {
			time.Sleep(100 * time.Millisecond)
			if !d.Finish(func(c *server.Ctx) { c.WriteString("done") }) {
				t.Error("Finish during the drain reported false")
			}
		}()
	}
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := s.Shutdown(ctx)
	el := time.Since(t0)
	t.Logf("Shutdown: %v after %v", err, el)
	if el > grace+300*time.Millisecond {
		t.Errorf("Shutdown took %v, grace %v", el, grace)
	}
	for i, cl := range clients {
		r := <-cl.resp
		switch {
		case i < 3 && !(strings.HasPrefix(r, "HTTP/1.1 200") && strings.Contains(r, "Connection: close") && strings.HasSuffix(r, "done")):
			t.Errorf("finished request %d: response %q, want 200 done with Connection: close", i, r)
		case i >= 3 && r != "":
			t.Errorf("hung request %d: response %q, want none", i, r)
		}
	}
	for _, d := range ds[3:] {
		if c := context.Cause(d.Context()); !errors.Is(c, server.ErrDrained) {
			t.Errorf("hung request: cause %v, want ErrDrained", c)
		}
		if d.Finish(func(*server.Ctx) {}) {
			t.Error("Finish after the drain reported true")
		}
	}
}

// TestDeferQueueClose: what is queued behind a deferred request when its
// response closes the connection, or when the server drains. A Close in
// the Finish function: its response says Connection: close and nothing
// follows it (the response queued behind it is dropped). A drain: the
// deferred response and those queued behind it all go out, then the
// connection closes.
func TestDeferQueueClose(t *testing.T) {
	held := make(chan *server.Deferred, 2)
	s, addr := startAPI(t, nil, func(s *server.Server) {
		s.Handle("GET", "/d", func(c *server.Ctx) { held <- c.Defer() })
		deferRoutes(s)
	})
	nc, _ := dial(t, addr)
	io.WriteString(nc, "GET /d HTTP/1.1\r\nHost: x\r\n\r\nGET /now/1 HTTP/1.1\r\nHost: x\r\n\r\n")
	(<-held).Finish(func(c *server.Ctx) { c.WriteString("closing"); c.Close() })
	b, _ := io.ReadAll(nc)
	if r := string(b); !strings.Contains(r, "Connection: close") || !strings.HasSuffix(r, "closing") {
		t.Errorf("Close in Finish: %q, want one response with Connection: close and nothing after", r)
	}

	nc, _ = dial(t, addr)
	io.WriteString(nc, "GET /d HTTP/1.1\r\nHost: x\r\n\r\nGET /now/2 HTTP/1.1\r\nHost: x\r\n\r\n")
	d := <-held
	time.Sleep(20 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	time.Sleep(50 * time.Millisecond)
	d.Finish(func(c *server.Ctx) { c.WriteString("first") })
	b, _ = io.ReadAll(nc)
	r := string(b)
	if i, j := strings.Index(r, "first"), strings.LastIndex(r, "\r\n\r\n2"); i < 0 || j < i || !strings.HasSuffix(r, "2") {
		t.Errorf("drain: %q, want the deferred response, then the one queued behind it, then the close", r)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}
