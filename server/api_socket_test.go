package server_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/server"
)

// startAPI runs a server with the routes register adds, on a free
// loopback port, until the test ends.
func startAPI(t *testing.T, mod func(*server.Config), register func(*server.Server)) (*server.Server, string) {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.Addr, cfg.Port = "127.0.0.1", 0
	cfg.CPUs = []int{firstCPU(t)}
	cfg.Log = logWriter{t}
	if mod != nil {
		mod(&cfg)
	}
	s := server.New(cfg)
	register(s)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return s, net.JoinHostPort(loopbackFor(cfg.Addr), strconv.Itoa(s.Port()))
}

// jsonError is an ErrorHandler in the API's format.
func jsonError(c *server.Ctx, code int, msg string) {
	c.SetContentType("application/json")
	c.SetResponseBody(fmt.Appendf(c.ResponseBody(), `{"error":%q}`, msg))
}

// TestRouteBodyLimitOverSocket: a 1 MiB body announced to a route limited
// to 4 KiB is refused with 413 as soon as its head is in, and the
// server's buffers do not grow for it (MemoryInUse), while the same
// upload to a route with the server's 1 MiB limit does make them grow
// (the control: the measurement sees growth when there is some).
func TestRouteBodyLimitOverSocket(t *testing.T) {
	s, addr := startAPI(t, func(c *server.Config) { c.ErrorHandler = jsonError }, func(s *server.Server) {
		s.HandleWith("POST", "/small/{id}", server.RouteOptions{MaxBodyBytes: 4 << 10}, func(c *server.Ctx) { c.Write(c.Body()) })
		s.Handle("POST", "/big/{id}", func(c *server.Ctx) { c.Write(c.Body()[:1]) })
	})
	memAfter := func() int64 {
		time.Sleep(50 * time.Millisecond) // the worker publishes once per loop turn
		return s.MemoryInUse()
	}
	idle := memAfter()
	chunk := strings.Repeat("x", 64<<10)

	c, r := dial(t, addr)
	c.Write([]byte("POST /small/1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n"))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 413 || string(b) != `{"error":"request body too large"}` || !resp.Close {
		t.Fatalf("1 MiB to a 4 KiB route: %d %q close=%v", resp.StatusCode, b, resp.Close)
	}
	// What the client sends after the 413 is discarded, not buffered.
	for range 4 {
		c.Write([]byte(chunk))
	}
	// One default input buffer for the connection (kept as a spare once
	// it lingers), nothing grown.
	if m := memAfter(); m > idle+16<<10 {
		t.Errorf("MemoryInUse %d after the refused upload, %d idle: the buffer grew", m, idle)
	}

	// The control: the same upload, half sent, to the server's limit.
	c2, _ := dial(t, addr)
	c2.Write([]byte("POST /big/1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n"))
	for range 8 {
		c2.Write([]byte(chunk))
	}
	// The worker reads the half body at its own pace (slower on a loaded
	// machine): wait for the growth, up to a bound.
	m := memAfter()
	for deadline := time.Now().Add(5 * time.Second); m < idle+256<<10 && time.Now().Before(deadline); {
		m = memAfter()
	}
	if m < idle+256<<10 {
		t.Errorf("MemoryInUse %d with half of a 1 MiB body in, %d idle: the control saw no growth in 5 s", m, idle)
	}
}

// TestRemoteAddr: the handler sees the client's address and port as the
// client's socket has them, an IPv4 client of the dual-stack listener as
// IPv4.
func TestRemoteAddr(t *testing.T) {
	for _, fam := range families {
		t.Run(fam.name, func(t *testing.T) {
			_, addr := startAPI(t, func(c *server.Config) { c.Addr = fam.listen }, func(s *server.Server) {
				s.Handle("GET", "/addr", func(c *server.Ctx) { c.WriteString(c.RemoteAddr().String()) })
			})
			addr = net.JoinHostPort(fam.dial, addr[strings.LastIndexByte(addr, ':')+1:])
			for range 2 { // two connections: the address is per connection
				c, r := dial(t, addr)
				c.Write([]byte("GET /addr HTTP/1.1\r\nHost: x\r\n\r\nGET /addr HTTP/1.1\r\nHost: x\r\n\r\n"))
				_, bodies, _ := readResponses(t, r, 2)
				want := c.LocalAddr().String()
				if bodies[0] != want || bodies[1] != want {
					t.Errorf("RemoteAddr %q, %q; the client is %s", bodies[0], bodies[1], want)
				}
				c.Close()
			}
		})
	}
}

// TestErrorHandlerOverSocket: the responses made outside any request (408
// of a request that does not arrive in time, 503 beyond the connection
// cap) go through the hook too.
func TestErrorHandlerOverSocket(t *testing.T) {
	_, addr := startAPI(t, func(c *server.Config) {
		c.ErrorHandler = jsonError
		c.HeaderTimeout = 300 * time.Millisecond
		c.MaxConnsPerWorker = 1
	}, func(s *server.Server) {
		s.Handle("GET", "/json", func(c *server.Ctx) { server.WriteJSON(c, hello{"Hello, World!"}) })
	})
	c, r := dial(t, addr)
	c.Write([]byte("GET /json HTTP/1.1\r\nHost: x\r\n\r\n"))
	readResponses(t, r, 1)
	// A second connection is over the cap.
	_, r2 := dial(t, addr)
	codes, bodies, closing := readResponses(t, r2, 1)
	if codes[0] != 503 || bodies[0] != `{"error":"server busy: too many connections"}` || !closing[0] {
		t.Errorf("over the cap: %d %q close=%v", codes[0], bodies[0], closing[0])
	}
	// The first one starts a request and stalls.
	c.Write([]byte("GET /json HTTP/1.1\r\nHost:"))
	codes, bodies, closing = readResponses(t, r, 1)
	if codes[0] != 408 || bodies[0] != `{"error":"request not received in time"}` || !closing[0] {
		t.Errorf("stalled request: %d %q close=%v", codes[0], bodies[0], closing[0])
	}
}
