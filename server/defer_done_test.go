package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/server"
)

// done is what an OnDone function saw.
type done struct {
	tag     string
	status  int
	n       int
	elapsed time.Duration
	cause   error
}

// TestDeferOnDone: a middleware learns, through Ctx.Deferred and
// Deferred.OnDone, how a deferred request ended: the status and body
// length of the response Finish's function made, the server's 504 at the
// deadline, or no response (Status 0) when the client left; its
// functions run in the order they were added, Elapsed covers the wait,
// and a panicking one is logged while the worker goes on. A request
// answered by its handler has no Deferred; nor has one Defer refused.
func TestDeferOnDone(t *testing.T) {
	seen := make(chan done, 16)
	record := func(tag string) func(*server.Deferred, *server.Ctx) {
		return func(d *server.Deferred, c *server.Ctx) {
			seen <- done{tag, c.Status(), c.ResponseLen(), d.Elapsed(), context.Cause(d.Context())}
		}
	}
	var syncDeferred error
	// mw is the middleware: it follows a deferred request to its end.
	mw := func(h server.Handler, hooks ...func(*server.Deferred, *server.Ctx)) server.Handler {
		return func(c *server.Ctx) {
			h(c)
			d := c.Deferred()
			switch {
			case c.Status() == 0 && d != nil:
				for _, f := range hooks {
					d.OnDone(f)
				}
			case d != nil:
				syncDeferred = fmt.Errorf("status %d with a Deferred", c.Status())
			}
		}
	}
	_, addr := startAPI(t, func(cfg *server.Config) { cfg.MaxDeferredPerConn = 2 }, func(s *server.Server) {
		s.Handle("GET", "/sync", mw(func(c *server.Ctx) { c.WriteString("now") }, record("sync")))
		s.Handle("GET", "/later", mw(func(c *server.Ctx) {
			d := c.Defer()
			go func() {
				time.Sleep(20 * time.Millisecond)
				d.Finish(func(c *server.Ctx) { c.SetStatus(201); c.WriteString("later") })
			}()
		}, record("a"), record("b")))
		s.HandleWith("GET", "/hang", server.RouteOptions{DeferTimeout: 50 * time.Millisecond},
			mw(func(c *server.Ctx) { c.Defer() }, record("hang")))
		s.Handle("GET", "/panic", mw(func(c *server.Ctx) {
			d := c.Defer()
			go d.Finish(func(c *server.Ctx) { c.WriteString("p") })
		}, func(*server.Deferred, *server.Ctx) { panic("in OnDone") }, record("after panic")))
		s.Handle("GET", "/refused", func(c *server.Ctx) {
			if d := c.Defer(); c.Deferred() != nil || c.Status() != 503 {
				syncDeferred = fmt.Errorf("refused: Deferred %v, status %d", c.Deferred(), c.Status())
			} else {
				d.OnDone(record("refused")) // does nothing
			}
		})
	})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	get := func(path string, wantCode int, wantBody string) {
		t.Helper()
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		code, body, err := readOne(br)
		if err != nil || code != wantCode || (wantBody != "" && body != wantBody) {
			t.Fatalf("GET %s: %d %q %v, want %d %q", path, code, body, err, wantCode, wantBody)
		}
	}
	next := func() done {
		t.Helper()
		select {
		case d := <-seen:
			return d
		case <-time.After(5 * time.Second):
			t.Fatal("no OnDone call")
		}
		return done{}
	}
	get("/sync", 200, "now")
	get("/later", 201, "later")
	a, b := next(), next()
	if a.tag != "a" || b.tag != "b" || a.status != 201 || a.n != len("later") || b.status != 201 || a.elapsed < 20*time.Millisecond {
		t.Errorf("Finish: OnDone saw %+v then %+v, want a then b, 201, %d bytes, elapsed >= 20ms", a, b, len("later"))
	}
	get("/hang", 504, "")
	if h := next(); h.tag != "hang" || h.status != 504 || h.elapsed < 50*time.Millisecond || h.cause != context.DeadlineExceeded {
		t.Errorf("deadline: OnDone saw %+v, want 504 after 50ms, DeadlineExceeded", h)
	}
	get("/panic", 200, "p")
	if p := next(); p.tag != "after panic" || p.status != 200 {
		t.Errorf("after a panicking OnDone function: %+v", p)
	}
	// Two held on the connection (MaxDeferredPerConn 2): the third is
	// refused at once.
	fmt.Fprintf(conn, "GET /hang HTTP/1.1\r\nHost: x\r\n\r\nGET /hang HTTP/1.1\r\nHost: x\r\n\r\nGET /refused HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(10 * time.Millisecond)
	conn.Close()
	for range 2 {
		if g := next(); g.tag != "hang" || g.status != 0 || g.cause != server.ErrClientGone {
			t.Errorf("client gone: OnDone saw %+v, want status 0, ErrClientGone", g)
		}
	}
	select {
	case d := <-seen:
		t.Errorf("unexpected OnDone call %+v", d)
	case <-time.After(20 * time.Millisecond):
	}
	if syncDeferred != nil {
		t.Error(syncDeferred)
	}
}
