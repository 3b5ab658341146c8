package server_test

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/server"
)

// TestHeaderTimerStarts: the header timeout runs from when the request
// now at the front of the buffer began, which is, for each kind of
// request: the accept for a new connection's first request (nothing sent
// yet), the first byte of a request after an idle keep-alive gap, and
// the read that followed a served request for a pipelined request left
// partial behind it. The idle timeout is long (a minute), so that a
// header timer not started is seen: the connection is then kept.
//
// Times: HeaderTimeout h = 6 s, and timeout passes once a second, so a
// request is refused between h and h+1 s after its timer started. The
// pipelined case sends its second request's start 4 s after the first's
// and completes it 8 s after the first: past the first's h+1 (a timer
// left at the first request's start refuses it), 2 s before the
// second's h.
func TestHeaderTimerStarts(t *testing.T) {
	const h = 6 * time.Second
	_, addr := start(t, func(c *server.Config) {
		c.HeaderTimeout = h
		c.IdleTimeout = time.Minute
	})
	refused := func(t *testing.T, what string, send func() error, read func() (*http.Response, error)) {
		t.Helper()
		t0 := time.Now()
		if err := send(); err != nil {
			t.Errorf("%s: %v", what, err)
			return
		}
		resp, err := read()
		if err != nil {
			t.Errorf("%s: no 408 within %v: %v", what, time.Since(t0).Round(time.Millisecond), err)
			return
		}
		if resp.StatusCode != 408 {
			t.Errorf("%s: %d, want 408", what, resp.StatusCode)
		}
		if d := time.Since(t0); d < h-time.Second {
			t.Errorf("%s: 408 after %v, before the header timeout %v", what, d, h)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		c, r := dial(t, addr)
		c.SetDeadline(time.Now().Add(h + 4*time.Second))
		refused(t, "a new connection that sends nothing", func() error { return nil },
			func() (*http.Response, error) { return http.ReadResponse(r, nil) })
	})
	wg.Go(func() {
		c, r := dial(t, addr)
		c.Write([]byte("GET /json HTTP/1.1\r\nHost: x\r\n\r\n"))
		readResponses(t, r, 1)
		time.Sleep(time.Second) // idle between requests
		c.SetDeadline(time.Now().Add(h + 4*time.Second))
		refused(t, "a partial request after an idle gap", func() error {
			_, err := c.Write([]byte("GET /json HTTP/1.1\r\nHost:"))
			return err
		}, func() (*http.Response, error) { return http.ReadResponse(r, nil) })
	})
	wg.Go(func() {
		c, r := dial(t, addr)
		c.SetDeadline(time.Now().Add(h + 6*time.Second))
		t0 := time.Now()
		c.Write([]byte("GET /json HTTP/1.1\r\n"))
		time.Sleep(4 * time.Second)
		c.Write([]byte("Host: x\r\n\r\nGET /json HTTP/1.1\r\n"))
		if codes, _, _ := readResponses(t, r, 1); codes[0] != 200 {
			t.Errorf("pipelined: first request %d", codes[0])
			return
		}
		time.Sleep(time.Until(t0.Add(8 * time.Second)))
		if _, err := c.Write([]byte("Host: x\r\n\r\n")); err != nil {
			t.Errorf("pipelined: second request refused before its header timeout: %v", err)
			return
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("pipelined: second request, begun 4 s after the first and completed 4 s later (header timeout %v): %v %v; want 200", h, resp, err)
		}
	})
	wg.Wait()
}

// TestIdleTimerFollowsSlowReader: a response larger than the socket
// buffers goes out as the client reads it; each write that makes progress
// restarts the idle timer, so a client that reads steadily for longer
// than IdleTimeout receives all of it. (Timed from the request instead,
// the connection was reset IdleTimeout after it, mid-response.)
func TestIdleTimerFollowsSlowReader(t *testing.T) {
	const idle = 2 * time.Second
	_, addr := start(t, func(c *server.Config) {
		c.IdleTimeout = idle
		c.HeaderTimeout = idle
	})
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4096)
	body := bytes.Repeat([]byte("0123456789abcdef"), 256<<10/16)
	fmt.Fprintf(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(body))
	if _, err := c.Write(body); err != nil {
		t.Fatal(err)
	}
	// One read (up to the 4 KiB receive buffer) every 50 ms: 256 KiB in
	// about 3.2 s, longer than idle.
	t0 := time.Now()
	var got []byte
	buf := make([]byte, 16<<10)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	for !bytes.HasSuffix(got, body[len(body)-64:]) || len(got) < len(body) {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("after %d bytes in %v: %v (idle timeout %v)", len(got), time.Since(t0).Round(time.Millisecond), err, idle)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d := time.Since(t0); d < idle+500*time.Millisecond {
		t.Errorf("the response was read in %v, not longer than the idle timeout %v: the test did not test it", d, idle)
	}
}
