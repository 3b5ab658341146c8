package server_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/server"
)

// TestResponseBodyNotAliased checks that SetResponseBody copies a slice
// the handler owns: the next response must not be written into it.
func TestResponseBodyNotAliased(t *testing.T) {
	_, addr := start(t, nil)
	c, r := dial(t, addr)
	for i := range 3 {
		c.Write([]byte("GET /cached HTTP/1.1\r\nHost: x\r\n\r\nGET /json HTTP/1.1\r\nHost: x\r\n\r\n"))
		_, bodies, _ := readResponses(t, r, 2)
		if bodies[0] != "cached-value" || bodies[1] != `{"message":"Hello, World!"}` {
			t.Fatalf("round %d: %q", i, bodies)
		}
	}
}

// TestHeaderInjection checks that AddHeader and SetContentType refuse CR,
// LF and the server's own framing headers.
func TestHeaderInjection(t *testing.T) {
	_, addr := start(t, nil)
	c, r := dial(t, addr)
	c.Write([]byte("GET /inject HTTP/1.1\r\nHost: x\r\n\r\nGET /json HTTP/1.1\r\nHost: x\r\n\r\n"))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "[false false false false true]" {
		t.Errorf("accepted: %s, want only the valid header", body)
	}
	for _, h := range []string{"Set-Cookie", "X-Evil"} {
		if v := resp.Header.Values(h); len(v) > 0 {
			t.Errorf("injected header %s: %q", h, v)
		}
	}
	if resp.Header.Get("X-Fine") != "yes\tit is" || resp.Header.Get("Content-Type") != "" || resp.ContentLength != int64(len(body)) {
		t.Errorf("headers %v", resp.Header)
	}
	if codes, _, _ := readResponses(t, r, 1); codes[0] != 200 {
		t.Errorf("next response: %d", codes[0])
	}
}

// TestProtocolDetails covers request forms and framing a strict server
// must get right; each case runs on its own connection.
func TestProtocolDetails(t *testing.T) {
	_, addr := start(t, nil)
	tests := []struct {
		name, in string
		head     bool // the request is HEAD: no body may follow
		status   int
		body     string // "" when not checked
		closes   bool
	}{
		// The authority of an absolute-form target ends at '?': the path
		// is "/", not "/json".
		{name: "absolute form with query", in: "GET http://a?x/json HTTP/1.1\r\nHost: a\r\n\r\n", status: 404},
		{name: "absolute form", in: "GET http://a/json?x HTTP/1.1\r\nHost: a\r\n\r\n", status: 200, body: `{"message":"Hello, World!"}`},
		{name: "two Transfer-Encodings", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n", status: 400, closes: true},
		{name: "trailer with CR", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nT: a\rb\r\n\r\n", status: 400, closes: true},
		{name: "trailer folded", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nT: a\r\n b\r\n\r\n", status: 400, closes: true},
		{name: "trailer ok", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nT: a\r\n\r\n", status: 200, body: "a"},
		{name: "HEAD error has no body", in: "HEAD /json HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n", head: true, status: 400, closes: true},
		{name: "HEAD 404 has no body", in: "HEAD /nope HTTP/1.1\r\nHost: x\r\n\r\nGET /json HTTP/1.1\r\nHost: x\r\n\r\n", head: true, status: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, r := dial(t, addr)
			c.Write([]byte(tt.in))
			var req *http.Request
			if tt.head {
				req = &http.Request{Method: "HEAD"}
			}
			resp, err := http.ReadResponse(r, req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || (tt.body != "" && string(body) != tt.body) || resp.Close != tt.closes {
				t.Errorf("got %d %q close=%v, want %d %q close=%v", resp.StatusCode, body, resp.Close, tt.status, tt.body, tt.closes)
			}
			switch {
			case tt.closes:
				if b, err := r.ReadByte(); err != io.EOF {
					t.Errorf("after the response: %q, %v; want EOF", b, err)
				}
			case tt.head:
				// The next thing on the wire must be the next response.
				if codes, _, _ := readResponses(t, r, 1); codes[0] != 200 {
					t.Errorf("response after HEAD: %d", codes[0])
				}
			}
		})
	}
}

// TestNoContinueForHTTP10 checks that an HTTP/1.0 request's
// "Expect: 100-continue" is ignored (RFC 9110 10.1.1): the first response
// is the final one.
func TestNoContinueForHTTP10(t *testing.T) {
	_, addr := start(t, nil)
	c, r := dial(t, addr)
	c.Write([]byte("POST /echo HTTP/1.0\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"))
	time.Sleep(100 * time.Millisecond)
	c.Write([]byte("hi"))
	line, err := r.ReadString('\n')
	if err != nil || line != "HTTP/1.1 200 OK\r\n" {
		t.Fatalf("first line %q, %v; want the final response", line, err)
	}
}

// TestCapLingers checks that a connection refused at the connection cap
// gets its 503 and then an orderly end, even when its input is already
// waiting when the worker accepts it: closing a socket with unread input
// resets the connection (and on a real network a reset can destroy the
// 503 still in flight), so the worker lingers as after any final response.
func TestCapLingers(t *testing.T) {
	_, addr := start(t, func(c *server.Config) { c.MaxConnsPerWorker = 1 })
	a, ar := dial(t, addr)
	junk := bytes.Repeat([]byte("GET /json HTTP/1.1\r\nHost: x\r\n\r\n"), 2000)
	for i := range 5 {
		// Block the worker while the refused connection sends its input.
		a.Write([]byte("GET /sleep?100ms HTTP/1.1\r\nHost: x\r\n\r\n"))
		time.Sleep(10 * time.Millisecond)
		c, r := dial(t, addr)
		if _, err := c.Write(junk); err != nil {
			t.Fatal(err)
		}
		readResponses(t, ar, 1)
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("connection %d over the cap: %v", i, err)
		}
		if resp.StatusCode != 503 || !resp.Close {
			t.Errorf("connection %d over the cap: %d close=%v", i, resp.StatusCode, resp.Close)
		}
		if b, err := r.ReadByte(); err != io.EOF {
			t.Fatalf("connection %d over the cap, after the 503: %q, %v; want EOF, not a reset", i, b, err)
		}
		c.Close()
	}
}

// TestDrainAnswersQueue blocks the worker, queues 300 connections (more
// than one accept batch) each with a request, and shuts down: every one of
// them must get an answer (served, "Connection: close"), none a reset.
func TestDrainAnswersQueue(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.Addr, cfg.Port, cfg.CPUs, cfg.Log = "127.0.0.1", 0, []int{firstCPU(t)}, logWriter{t}
	s := server.New(cfg)
	s.Handle("GET", "/json", func(c *server.Ctx) { server.WriteJSON(c, hello{"bye"}) })
	s.Handle("GET", "/sleep", func(c *server.Ctx) { time.Sleep(300 * time.Millisecond) })
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", s.Port())
	b, br := dial(t, addr)
	b.Write([]byte("GET /sleep HTTP/1.1\r\nHost: x\r\n\r\n"))
	time.Sleep(50 * time.Millisecond) // the worker is in the handler now
	const n = 300
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte("GET /json HTTP/1.1\r\nHost: x\r\n\r\n"))
		conns[i] = c
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	readResponses(t, br, 1)
	answered := 0
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			if errors.Is(err, syscall.ECONNRESET) || strings.Contains(err.Error(), "EOF") {
				t.Errorf("queued connection %d: %v", i, err)
				continue
			}
			t.Fatalf("queued connection %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == 200 && string(body) == `{"message":"bye"}` && resp.Close {
			answered++
		} else {
			t.Errorf("queued connection %d: %d %q close=%v", i, resp.StatusCode, body, resp.Close)
		}
	}
	if answered != n {
		t.Errorf("%d of %d queued connections answered", answered, n)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// TestPanicInReadyPass: with one request per turn, connections take
// turns through the worker's ready queue (runReady). A handler that
// panics during such a pass is answered 500 and its connection closed;
// the connections queued behind it in the same pass still get their
// turns and every response (one left out of the queue would wait
// forever: its reads are skipped while it counts as queued).
func TestPanicInReadyPass(t *testing.T) {
	_, addr := start(t, func(c *server.Config) { c.MaxRequestsPerTurn = 1 })
	const others, depth = 12, 6
	for round := range 3 {
		p, pr := dial(t, addr)
		conns := make([]net.Conn, others)
		readers := make([]*bufio.Reader, others)
		for i := range conns {
			conns[i], readers[i] = dial(t, addr)
		}
		// The panicking connection first, so that the others are
		// behind it in the queue when its second request is served.
		p.Write([]byte("GET /seq?p0 HTTP/1.1\r\nHost: x\r\n\r\nGET /seq?p1 HTTP/1.1\r\nHost: x\r\n\r\nGET /panic HTTP/1.1\r\nHost: x\r\n\r\n"))
		for i, c := range conns {
			var b strings.Builder
			for j := range depth {
				fmt.Fprintf(&b, "GET /seq?%d-%d HTTP/1.1\r\nHost: x\r\n\r\n", i, j)
			}
			c.Write([]byte(b.String()))
		}
		codes, _, closing := readResponses(t, pr, 3)
		if codes[0] != 200 || codes[1] != 200 || codes[2] != 500 || !closing[2] {
			t.Fatalf("round %d: the panicking connection got %v close %v", round, codes, closing)
		}
		for i, r := range readers {
			codes, bodies, _ := readResponses(t, r, depth)
			for j := range depth {
				if codes[j] != 200 || bodies[j] != fmt.Sprintf("%d-%d", i, j) {
					t.Fatalf("round %d: connection %d response %d: %d %q", round, i, j, codes[j], bodies[j])
				}
			}
		}
		p.Close()
		for _, c := range conns {
			c.Close()
		}
	}
}

// TestPanicInPipeline: a handler that panics in the middle of a pipelined
// batch. The responses before it go out, it is answered 500 with
// Connection: close, nothing after it is served, the connection closes,
// and the worker goes on serving other connections (and the same handlers).
func TestPanicInPipeline(t *testing.T) {
	_, addr := start(t, nil)
	for round := range 2 {
		c, r := dial(t, addr)
		c.Write([]byte("GET /json HTTP/1.1\r\nHost: x\r\n\r\nGET /seq?a HTTP/1.1\r\nHost: x\r\n\r\n" +
			"GET /panic HTTP/1.1\r\nHost: x\r\n\r\nGET /seq?after HTTP/1.1\r\nHost: x\r\n\r\n"))
		codes, bodies, closing := readResponses(t, r, 3)
		if codes[0] != 200 || codes[1] != 200 || bodies[1] != "a" || closing[0] || closing[1] {
			t.Fatalf("round %d: before the panic: %v %q close %v", round, codes[:2], bodies[:2], closing[:2])
		}
		if codes[2] != 500 || bodies[2] != "internal server error\n" || !closing[2] {
			t.Fatalf("round %d: the panic answered %d %q close %v, want 500 and close", round, codes[2], bodies[2], closing[2])
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
			t.Fatalf("round %d: after the 500: %q, %v; want the connection closed and nothing more", round, rest, err)
		}
		c.Close()
	}
}
