package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/server"
)

// deferRoutes registers /now/{n} (answered at once with n) and
// /later/{n}?ms=D (deferred; a goroutine finishes it after D ms with n
// and the value of a request header, read again in Finish from the
// request's own copy).
func deferRoutes(s *server.Server) {
	s.Handle("GET", "/now/{n}", func(c *server.Ctx) {
		c.Write(c.PathValue("n"))
	})
	s.Handle("GET", "/later/{n}", func(c *server.Ctx) {
		v, _ := c.QueryValue("ms")
		ms, _ := strconv.Atoi(string(v))
		d := c.Defer()
		go func() {
			time.Sleep(time.Duration(ms) * time.Millisecond)
			d.Finish(func(c *server.Ctx) {
				c.Write(c.PathValue("n"))
				c.Write(c.Header("X-Tag"))
			})
		}()
	})
}

// TestDeferOrder: responses on one connection go out in request order
// whatever order the deferred ones finish in: pipelines mixing immediate
// and deferred requests (random order, random completion times), on
// several connections at once.
func TestDeferOrder(t *testing.T) {
	_, addr := startAPI(t, nil, deferRoutes)
	rounds := 40
	if testing.Short() {
		rounds = 10
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				errs <- err
				return
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(30 * time.Second))
			br := bufio.NewReader(nc)
			for r := range rounds {
				k := 1 + rng.IntN(12)
				var req strings.Builder
				var want []string
				for i := range k {
					n := fmt.Sprintf("%d-%d-%d", g, r, i)
					if rng.IntN(2) == 0 {
						fmt.Fprintf(&req, "GET /now/%s HTTP/1.1\r\nHost: x\r\n\r\n", n)
						want = append(want, n)
					} else {
						fmt.Fprintf(&req, "GET /later/%s?ms=%d HTTP/1.1\r\nHost: x\r\nX-Tag: t%d\r\n\r\n", n, rng.IntN(4), i)
						want = append(want, n+"t"+strconv.Itoa(i))
					}
				}
				if _, err := nc.Write([]byte(req.String())); err != nil {
					errs <- err
					return
				}
				for i := range k {
					resp, body, err := readOne(br)
					if err != nil {
						errs <- fmt.Errorf("conn %d round %d response %d: %v", g, r, i, err)
						return
					}
					if resp != 200 || body != want[i] {
						errs <- fmt.Errorf("conn %d round %d response %d: %d %q, want 200 %q", g, r, i, resp, body, want[i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// readOne reads one response with a Content-Length.
func readOne(br *bufio.Reader) (code int, body string, err error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return 0, "", err
	}
	if len(line) < 12 {
		return 0, "", fmt.Errorf("status line %q", line)
	}
	code, _ = strconv.Atoi(line[9:12])
	n := -1
	for {
		h, err := br.ReadString('\n')
		if err != nil {
			return 0, "", err
		}
		if h == "\r\n" {
			break
		}
		if v, ok := strings.CutPrefix(strings.ToLower(h), "content-length: "); ok {
			n, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if n < 0 {
		return code, "", errors.New("no Content-Length")
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return 0, "", err
	}
	return code, string(b), nil
}

var _ = context.Background
var _ atomic.Int64

// TestDeferHoldsReading: a connection with a deferred request is read
// only as far as the bound allows: a client that pipelines 400 KB of
// requests (800 KB of responses) behind it makes the worker queue about
// MaxOutputPerTurn (32 KiB) of their responses, then stop reading (the
// rest waits in the kernel, and the client's writes block); no request is
// refused for a full buffer. Once the deferred request is finished, every
// request behind it is answered, in order.
func TestDeferHoldsReading(t *testing.T) {
	held := make(chan *server.Deferred, 1)
	s, addr := startAPI(t, nil, func(s *server.Server) {
		s.Handle("GET", "/now/{n}", func(c *server.Ctx) { c.Write(c.PathValue("n")) })
		s.Handle("GET", "/d", func(c *server.Ctx) { held <- c.Defer() })
	})
	nc, br := dial(t, addr)
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	io.WriteString(nc, "GET /d HTTP/1.1\r\nHost: x\r\n\r\n")
	d := <-held
	time.Sleep(20 * time.Millisecond)
	before := s.MemoryInUse()
	const n = 10000
	wrote := make(chan error, 1)
	go func() {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "GET /now/%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
		}
		_, err := io.WriteString(nc, b.String())
		wrote <- err
	}()
	time.Sleep(300 * time.Millisecond)
	during := s.MemoryInUse()
	t.Logf("MemoryInUse with a deferred request and 400 KB pipelined behind it: %d KiB before, %d KiB during", before>>10, during>>10)
	if during > before+96<<10 {
		t.Errorf("MemoryInUse grew from %d to %d while the connection's request was deferred: it was read", before, during)
	}
	if !d.Finish(func(c *server.Ctx) { c.WriteString("deferred") }) {
		t.Fatal("Finish reported false")
	}
	if code, body, err := readOne(br); err != nil || code != 200 || body != "deferred" {
		t.Fatalf("deferred request: %d %q %v", code, body, err)
	}
	for i := range n {
		code, body, err := readOne(br)
		if err != nil || code != 200 || body != strconv.Itoa(i) {
			t.Fatalf("request %d behind the deferred one: %d %q %v", i, code, body, err)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}

// TestDeferRequestCopy: the function given to Finish sees the deferred
// request whole (path value, %-decoded wildcard, query value, header,
// Content-Length and chunked bodies, after empty lines the parser
// skipped), though the worker's buffers have served other requests since.
func TestDeferRequestCopy(t *testing.T) {
	held := make(chan *server.Deferred, 4)
	_, addr := startAPI(t, nil, func(s *server.Server) {
		s.Handle("GET", "/now/{n}", func(c *server.Ctx) { c.Write(c.PathValue("n")) })
		s.Handle("POST", "/echo/{id}", func(c *server.Ctx) { held <- c.Defer() })
	})
	for _, tc := range []struct{ req, want string }{
		{"POST /echo/a%20b?q=x+y HTTP/1.1\r\nHost: x\r\nX-Tag: t1\r\nContent-Length: 5\r\n\r\nhello", "a b|x y|t1|hello"},
		{"\r\n\r\nPOST /echo/c?q=z HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nX-Tag: t2\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", "c|z|t2|abcde"},
	} {
		nc, br := dial(t, addr)
		// A request pipelined behind it: the worker moves it to the
		// front of the connection's buffer, over the deferred one.
		io.WriteString(nc, tc.req+"GET /now/after-the-deferred-one HTTP/1.1\r\nHost: x\r\n\r\n")
		d := <-held
		// Other requests overwrite the worker's buffers and scratch.
		nc2, br2 := dial(t, addr)
		for i := range 3 {
			fmt.Fprintf(nc2, "GET /now/zz%%20%d HTTP/1.1\r\nHost: yyyyyyyy\r\nX-Tag: other\r\n\r\n", i)
			readOne(br2)
		}
		d.Finish(func(c *server.Ctx) {
			q, _ := c.QueryValue("q")
			fmt.Fprintf(c, "%s|%s|%s|%s", c.PathValue("id"), q, c.Header("X-Tag"), c.Body())
		})
		if code, body, err := readOne(br); err != nil || code != 200 || body != tc.want {
			t.Errorf("%q: %d %q %v, want %q", tc.req, code, body, err, tc.want)
		}
		if code, body, err := readOne(br); err != nil || code != 200 || body != "after-the-deferred-one" {
			t.Errorf("the request behind: %d %q %v", code, body, err)
		}
	}
}
