package server_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotpath-dev/hotpath/server"
	"github.com/hotpath-dev/hotpath/server/jsonenc"
)

type hello struct{ Message string }

func (m hello) AppendJSON(dst []byte) []byte {
	e := jsonenc.NewEncoder(dst)
	e.BeginObject()
	e.Key("message")
	e.String(m.Message)
	e.EndObject()
	return e.Bytes()
}

type logWriter struct{ t testing.TB }

func (l logWriter) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// start runs a server on a free loopback port with the test routes and
// stops it when the test ends.
func start(t *testing.T, mod func(*server.Config)) (*server.Server, string) {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.Addr = "127.0.0.1"
	cfg.Port = 0
	cfg.CPUs = []int{firstCPU(t)}
	cfg.Log = logWriter{t}
	if mod != nil {
		mod(&cfg)
	}
	s := server.New(cfg)
	s.Handle("GET", "/json", func(c *server.Ctx) { server.WriteJSON(c, hello{"Hello, World!"}) })
	s.Handle("POST", "/echo", func(c *server.Ctx) {
		c.SetContentType("application/octet-stream")
		c.Write(c.Body())
	})
	s.Handle("GET", "/seq", func(c *server.Ctx) { c.Write(c.Query()) })
	s.Handle("GET", "/cpu", func(c *server.Ctx) {
		in, err := c.IncomingCPU()
		if err != nil {
			in = -1
		}
		c.SetResponseBody(fmt.Appendf(c.ResponseBody(), "%d %d", c.WorkerCPU(), in))
	})
	s.Handle("GET", "/panic", func(c *server.Ctx) { panic("boom") })
	// /cached answers a []byte the handler keeps between requests.
	cached := make([]byte, len("cached-value"), 64)
	copy(cached, "cached-value")
	s.Handle("GET", "/cached", func(c *server.Ctx) { c.SetResponseBody(cached) })
	// /inject tries to smuggle headers in and reports what was accepted.
	s.Handle("GET", "/inject", func(c *server.Ctx) {
		ok := []bool{
			c.AddHeader("X-Evil", "a\r\nSet-Cookie: evil=1"),
			c.AddHeader("X-Evil\r\nSet-Cookie", "evil=1"),
			c.AddHeader("Content-Length", "5"),
			c.SetContentType("text/html\r\nX-Evil: 1"),
			c.AddHeader("X-Fine", "yes\tit is"),
		}
		c.SetResponseBody(fmt.Appendf(c.ResponseBody(), "%v", ok))
	})
	// /cputime answers the CPU time the worker's thread has used, in ns.
	s.Handle("GET", "/cputime", func(c *server.Ctx) {
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
		c.SetResponseBody(strconv.AppendInt(c.ResponseBody(), ts.Nano(), 10))
	})
	// /sleep?d blocks the worker for d: input piles up meanwhile.
	s.Handle("GET", "/sleep", func(c *server.Ctx) {
		d, _ := time.ParseDuration(string(c.Query()))
		time.Sleep(d)
	})
	// /stamp answers how many /stamp requests the server has served,
	// this one included: the order in which connections were served.
	var stamps atomic.Int64
	s.Handle("GET", "/stamp", func(c *server.Ctx) {
		c.SetResponseBody(strconv.AppendInt(c.ResponseBody(), stamps.Add(1), 10))
	})
	s.Handle("", "/any", func(c *server.Ctx) { c.Write(c.Method()) })
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return s, net.JoinHostPort(loopbackFor(cfg.Addr), strconv.Itoa(s.Port()))
}

// loopbackFor is the loopback address a client uses to reach a server
// listening on addr: ::1 for the dual-stack default.
func loopbackFor(addr string) string {
	if addr == "" || addr == "::" {
		return "::1"
	}
	return addr
}

func affinity(t *testing.T) []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for c := 0; c < 1024; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

func firstCPU(t *testing.T) int { return affinity(t)[0] }

func TestStandardClient(t *testing.T) {
	_, addr := start(t, nil)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	tests := []struct {
		method, path, body string
		status             int
		wantBody, ctype    string
	}{
		{"GET", "/json", "", 200, `{"message":"Hello, World!"}`, "application/json"},
		{"HEAD", "/json", "", 200, "", "application/json"},
		{"POST", "/echo", "some body", 200, "some body", "application/octet-stream"},
		{"GET", "/seq?abc", "", 200, "abc", ""},
		{"DELETE", "/any", "", 200, "DELETE", ""},
		{"POST", "/json", "", 405, "method not allowed\n", "text/plain"},
		{"GET", "/nope", "", 404, "not found\n", "text/plain"},
		{"GET", "/panic", "", 500, "internal server error\n", "text/plain"},
		{"GET", "/json", "", 200, `{"message":"Hello, World!"}`, "application/json"}, // after the panic
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, "http://"+addr+tt.path, strings.NewReader(tt.body))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tt.method, tt.path, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != tt.status || string(body) != tt.wantBody || resp.Header.Get("Content-Type") != tt.ctype {
			t.Errorf("%s %s = %d %q %q, want %d %q %q", tt.method, tt.path, resp.StatusCode, body, resp.Header.Get("Content-Type"), tt.status, tt.wantBody, tt.ctype)
		}
		if resp.Header.Get("Server") != "hotpath" || resp.Header.Get("Date") == "" {
			t.Errorf("%s %s: headers %v", tt.method, tt.path, resp.Header)
		}
		if _, err := time.Parse(http.TimeFormat, resp.Header.Get("Date")); err != nil {
			t.Errorf("Date: %v", err)
		}
		if tt.status == 405 && resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("Allow = %q", resp.Header.Get("Allow"))
		}
	}
}

// readResponses reads n responses from r and returns their status codes
// and bodies.
func readResponses(t *testing.T, r *bufio.Reader, n int) (codes []int, bodies []string, closing []bool) {
	t.Helper()
	for range n {
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("response %d: %v", len(codes), err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, resp.StatusCode)
		bodies = append(bodies, string(b))
		closing = append(closing, resp.Close)
	}
	return codes, bodies, closing
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

func TestPipelined64(t *testing.T) {
	_, addr := start(t, nil)
	c, r := dial(t, addr)
	var buf bytes.Buffer
	for i := range 64 {
		fmt.Fprintf(&buf, "GET /seq?%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
	}
	if _, err := c.Write(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	codes, bodies, _ := readResponses(t, r, 64)
	for i := range 64 {
		if codes[i] != 200 || bodies[i] != strconv.Itoa(i) {
			t.Fatalf("response %d = %d %q, want 200 %q", i, codes[i], bodies[i], strconv.Itoa(i))
		}
	}
}

// TestPipelinedOneSend checks that the responses to one read leave in one
// send: the client receives them all in one segment.
func TestPipelinedOneSend(t *testing.T) {
	_, addr := start(t, nil)
	c, _ := dial(t, addr)
	req := strings.Repeat("GET /json HTTP/1.1\r\nHost: x\r\n\r\n", 16)
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let everything arrive
	buf := make([]byte, 64<<10)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := bytes.Count(buf[:n], []byte("HTTP/1.1 200 OK")); got != 16 {
		t.Errorf("first read has %d responses, want 16", got)
	}
}

func TestByteAtATime(t *testing.T) {
	_, addr := start(t, nil)
	c, r := dial(t, addr)
	req := "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /json HTTP/1.1\r\nHost: x\r\n\r\n"
	for i := range len(req) {
		if _, err := c.Write([]byte{req[i]}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	codes, bodies, _ := readResponses(t, r, 2)
	if codes[0] != 200 || bodies[0] != "abc" || codes[1] != 200 || bodies[1] != `{"message":"Hello, World!"}` {
		t.Errorf("got %v %q", codes, bodies)
	}
}

// TestBadInput sends each class of bad input on its own connection and
// expects its status and then EOF, while a keep-alive connection on the
// same (single) worker keeps being served in between.
func TestBadInput(t *testing.T) {
	_, addr := start(t, func(c *server.Config) {
		c.MaxHeaderBytes = 1024
		c.MaxBodyBytes = 100
	})
	good, goodR := dial(t, addr)
	askGood := func() {
		t.Helper()
		if _, err := good.Write([]byte("GET /json HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		if codes, _, _ := readResponses(t, goodR, 1); codes[0] != 200 {
			t.Fatalf("good connection got %d", codes[0])
		}
	}
	askGood()
	tests := []struct {
		name, in string
		status   int
	}{
		{"garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400},
		{"bad request line", "GET /\r\n\r\n", 400},
		{"bad header", "GET / HTTP/1.1\r\nHost x\r\n\r\n", 400},
		{"obs fold", "GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400},
		{"missing host", "GET / HTTP/1.1\r\n\r\n", 400},
		{"bad content-length", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n", 400},
		{"CL and TE", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc", 400},
		{"gzip chunked", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 501},
		{"bad chunk", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n", 400},
		{"chunked too large", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n65\r\n", 413},
		{"request target too large", "GET /" + strings.Repeat("a", 2000) + " HTTP/1.1\r\nHost: x\r\n\r\n", 414},
		{"headers too large", "GET / HTTP/1.1\r\nHost: x\r\nX: " + strings.Repeat("a", 2000) + "\r\n\r\n", 431},
		{"body too large", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n", 413},
		{"version", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505},
		{"good then bad", "GET /json HTTP/1.1\r\nHost: x\r\n\r\nBAD\r\n\r\n", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, r := dial(t, addr)
			if _, err := c.Write([]byte(tt.in)); err != nil {
				t.Fatal(err)
			}
			askGood()
			n := 1
			if tt.name == "good then bad" {
				n = 2
			}
			codes, _, closing := readResponses(t, r, n)
			if codes[n-1] != tt.status || !closing[n-1] {
				t.Errorf("got %v (close %v), want %d and Connection: close", codes, closing, tt.status)
			}
			if b, err := r.ReadByte(); err != io.EOF {
				t.Errorf("after the error: read %q, %v; want EOF", b, err)
			}
			askGood()
		})
	}
}

func TestConnectionClose(t *testing.T) {
	_, addr := start(t, nil)
	for _, req := range []string{
		"GET /json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
		"GET /json HTTP/1.0\r\n\r\n",
	} {
		c, r := dial(t, addr)
		// The second request must be ignored: the first one closes.
		c.Write([]byte(req + "GET /json HTTP/1.1\r\nHost: x\r\n\r\n"))
		codes, _, closing := readResponses(t, r, 1)
		if codes[0] != 200 || !closing[0] {
			t.Errorf("%q: %d close=%v", req, codes[0], closing[0])
		}
		if _, err := r.ReadByte(); err != io.EOF {
			t.Errorf("%q: connection not closed: %v", req, err)
		}
	}
	// HTTP/1.0 keep-alive stays open and says so.
	c, r := dial(t, addr)
	for range 2 {
		c.Write([]byte("GET /json HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"))
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		if resp.Header.Get("Connection") != "keep-alive" {
			t.Errorf("HTTP/1.0 keep-alive response has Connection %q", resp.Header.Get("Connection"))
		}
	}
}

func TestLargeBody(t *testing.T) {
	_, addr := start(t, func(c *server.Config) { c.MaxBodyBytes = 200 << 10 })
	body := bytes.Repeat([]byte("0123456789"), 10<<10) // 100 KiB, beyond the 16 KiB buffer
	c, r := dial(t, addr)
	for range 2 {
		fmt.Fprintf(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(body))
		c.Write(body)
		codes, bodies, _ := readResponses(t, r, 1)
		if codes[0] != 200 || bodies[0] != string(body) {
			t.Fatalf("echo of %d bytes: %d, %d bytes back", len(body), codes[0], len(bodies[0]))
		}
	}
}

func TestChunkedBody(t *testing.T) {
	_, addr := start(t, func(c *server.Config) { c.MaxBodyBytes = 200 << 10 })
	// The standard client sends a body of unknown length chunked.
	body := bytes.Repeat([]byte("chunk-data"), 10<<10) // 100 KiB
	resp, err := http.Post("http://"+addr+"/echo", "text/plain", io.MultiReader(bytes.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, body) {
		t.Errorf("chunked echo: %d, %d bytes back, want %d", resp.StatusCode, len(got), len(body))
	}
	// Pipelined after a chunked request, with extensions and trailers.
	c, r := dial(t, addr)
	c.Write([]byte("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"3;x=1\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: 1\r\n\r\nGET /seq?next HTTP/1.1\r\nHost: x\r\n\r\n"))
	if codes, bodies, _ := readResponses(t, r, 2); codes[0] != 200 || bodies[0] != "abcde" || bodies[1] != "next" {
		t.Errorf("got %v %q", codes, bodies)
	}
}

func TestExpectContinue(t *testing.T) {
	_, addr := start(t, nil)
	c, r := dial(t, addr)
	c.Write([]byte("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"))
	line, err := r.ReadString('\n')
	if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("got %q, %v", line, err)
	}
	r.ReadString('\n')
	c.Write([]byte("hi"))
	if codes, bodies, _ := readResponses(t, r, 1); codes[0] != 200 || bodies[0] != "hi" {
		t.Errorf("got %v %q", codes, bodies)
	}
}

func TestTimeouts(t *testing.T) {
	_, addr := start(t, func(c *server.Config) {
		c.HeaderTimeout = 300 * time.Millisecond
		c.IdleTimeout = 300 * time.Millisecond
	})
	var wg sync.WaitGroup
	// A request that never completes gets 408 and a close.
	wg.Go(func() {
		c, r := dial(t, addr)
		c.Write([]byte("GET /json HTTP/1.1\r\nHost:"))
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Errorf("slow request: %v", err)
			return
		}
		if resp.StatusCode != 408 || !resp.Close {
			t.Errorf("slow request: %d close=%v", resp.StatusCode, resp.Close)
		}
	})
	// An idle keep-alive connection is closed.
	wg.Go(func() {
		c, r := dial(t, addr)
		c.Write([]byte("GET /json HTTP/1.1\r\nHost: x\r\n\r\n"))
		readResponses(t, r, 1)
		start := time.Now()
		if _, err := r.ReadByte(); err != io.EOF {
			t.Errorf("idle connection: %v, want EOF", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("idle connection closed after %v", d)
		}
	})
	wg.Wait()
}

func TestConnectionCap(t *testing.T) {
	_, addr := start(t, func(c *server.Config) { c.MaxConnsPerWorker = 2 })
	a, ar := dial(t, addr)
	b, br := dial(t, addr)
	for _, c := range []net.Conn{a, b} {
		c.Write([]byte("GET /json HTTP/1.1\r\nHost: x\r\n\r\n"))
	}
	readResponses(t, ar, 1)
	readResponses(t, br, 1)
	_, cr := dial(t, addr)
	if codes, _, _ := readResponses(t, cr, 1); codes[0] != 503 {
		t.Errorf("third connection got %d, want 503", codes[0])
	}
}

// TestShutdownDrains checks that Shutdown closes idle connections, lets a
// request in progress finish with "Connection: close", and returns.
func TestShutdownDrains(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.Addr, cfg.Port, cfg.CPUs, cfg.Log = "127.0.0.1", 0, []int{firstCPU(t)}, logWriter{t}
	s := server.New(cfg)
	s.Handle("GET", "/json", func(c *server.Ctx) { server.WriteJSON(c, hello{"bye"}) })
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(s.Port())
	idle, idleR := dial(t, addr)
	idle.Write([]byte("GET /json HTTP/1.1\r\nHost: x\r\n\r\n"))
	readResponses(t, idleR, 1)
	busy, busyR := dial(t, addr)
	busy.Write([]byte("GET /json HTTP/1.1\r\n"))
	time.Sleep(50 * time.Millisecond)

	done := make(chan error)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	if _, err := idleR.ReadByte(); err != io.EOF {
		t.Errorf("idle connection: %v, want EOF", err)
	}
	busy.Write([]byte("Host: x\r\n\r\n"))
	codes, bodies, closing := readResponses(t, busyR, 1)
	if codes[0] != 200 || bodies[0] != `{"message":"bye"}` || !closing[0] {
		t.Errorf("in-flight request: %d %q close=%v", codes[0], bodies[0], closing[0])
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Error("still accepting after Shutdown")
	}
}

// TestLocality runs one worker per CPU and connects from a thread pinned to
// each CPU in turn. On loopback the receiving CPU of a connection is the
// sender's (the packet is processed in the sender's softirq), so the CBPF
// program must pick that CPU's worker, and the accepted socket's
// SO_INCOMING_CPU must name it too.
func TestLocality(t *testing.T) {
	cpus := affinity(t)
	if len(cpus) < 2 {
		t.Skip("needs two CPUs")
	}
	cpus = cpus[:2]
	// The same over each family, and over both into the dual-stack
	// default (an IPv4 client reaches it as a v4-mapped address).
	for _, fam := range families {
		t.Run(fam.name, func(t *testing.T) {
			s, _ := start(t, func(c *server.Config) { c.CPUs, c.Addr = cpus, fam.listen })
			addr := net.JoinHostPort(fam.dial, strconv.Itoa(s.Port()))
			if got := s.CPUs(); len(got) != 2 || got[0] != cpus[0] || got[1] != cpus[1] {
				t.Fatalf("workers on %v, want %v", got, cpus)
			}
			// One P beyond the workers' own (see reserveIdleP).
			if p := runtime.GOMAXPROCS(0); p < 3 {
				t.Errorf("GOMAXPROCS %d with two workers, want at least 3", p)
			}
			const rounds = 3
			for round := range rounds {
				for _, cpu := range cpus {
					worker, incoming := askFromCPU(t, addr, cpu)
					if worker != cpu || incoming != cpu {
						t.Errorf("round %d: client on cpu %d served by worker %d, SO_INCOMING_CPU %d", round, cpu, worker, incoming)
					}
				}
			}
			// The server's own count, which a test outside the machine
			// reads: every connection accepted where it was received, by
			// each of the two workers.
			acc := s.Accepts()
			if len(acc) != len(cpus) {
				t.Errorf("Accepts: %+v, want one row a worker (%d)", acc, len(cpus))
			}
			for i, a := range acc {
				if a.CPU != cpus[i] || a.Accepted != rounds || a.Foreign != 0 {
					t.Errorf("worker %d: %+v, want cpu %d, %d accepted, 0 foreign", i, a, cpus[i], rounds)
				}
			}
		})
	}
}

// TestAcceptsForeign: a connection received on a CPU that runs no worker
// (the client's, on loopback) is accepted by the one worker there is and
// counted foreign; one received on the worker's CPU is not. This is what
// Accepts reports of a server whose steering does not follow the receiving
// CPU.
func TestAcceptsForeign(t *testing.T) {
	cpus := affinity(t)
	if len(cpus) < 2 {
		t.Skip("needs two CPUs")
	}
	s, addr := start(t, func(c *server.Config) { c.CPUs = cpus[:1] })
	for _, tc := range []struct {
		from              int
		foreign, incoming int
	}{{cpus[1], 1, cpus[1]}, {cpus[0], 1, cpus[0]}, {cpus[1], 2, cpus[1]}} {
		worker, incoming := askFromCPU(t, addr, tc.from)
		if worker != cpus[0] || incoming != tc.incoming {
			t.Fatalf("client on cpu %d: worker %d, SO_INCOMING_CPU %d, want %d and %d", tc.from, worker, incoming, cpus[0], tc.incoming)
		}
		a := s.Accepts()
		if len(a) != 1 || a[0].CPU != cpus[0] || a[0].Foreign != uint64(tc.foreign) {
			t.Errorf("after a client on cpu %d: %+v, want %d foreign", tc.from, a, tc.foreign)
		}
	}
	if a := s.Accepts(); a[0].Accepted != 3 {
		t.Errorf("%+v, want 3 accepted", a)
	}
}

func askFromCPU(t *testing.T, addr string, cpu int) (worker, incoming int) {
	t.Helper()
	var resp []byte
	// The send and the receive stay on the pinned thread too, through raw
	// system calls (net.Conn would hand them to the netpoller's threads):
	// SO_INCOMING_CPU names the CPU that last handled the connection's
	// packets.
	err := onCPU(addr, cpu, func(fd int) error {
		defer unix.Close(fd)
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5})
		if _, err := unix.Write(fd, []byte("GET /cpu HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")); err != nil {
			return err
		}
		buf := make([]byte, 4096)
		for {
			n, err := unix.Read(fd, buf)
			if err != nil {
				return err
			}
			if n == 0 {
				return nil
			}
			resp = append(resp, buf[:n]...)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := bytes.Cut(resp, []byte("\r\n\r\n"))
	if _, err := fmt.Sscanf(string(body), "%d %d", &worker, &incoming); err != nil || !ok {
		t.Fatalf("response %q: %v", resp, err)
	}
	return worker, incoming
}

// onCPU connects to addr from a thread pinned to cpu (on loopback the
// connection is then received on that CPU and steered to its worker) and
// runs use with the socket on that thread. use owns the socket.
func onCPU(addr string, cpu int, use func(fd int) error) error {
	ch := make(chan error)
	go func() {
		runtime.LockOSThread() // the thread dies with the goroutine, affinity and all
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			ch <- err
			return
		}
		ap := mustAddrPort(addr)
		family, sa := unix.AF_INET6, unix.Sockaddr(&unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()})
		if ap.Addr().Is4() {
			family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
		}
		fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			ch <- err
			return
		}
		if err := unix.Connect(fd, sa); err != nil {
			unix.Close(fd)
			ch <- err
			return
		}
		ch <- use(fd)
	}()
	return <-ch
}

func mustAddrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// TestStartErrors checks that a failed Start reports why, leaves nothing
// running, and that Shutdown afterwards does not hang.
func TestStartErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0") // no SO_REUSEPORT: the group cannot join
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	tests := []struct {
		name string
		mod  func(*server.Config)
		want string
	}{
		{"cpu not present", func(c *server.Config) { c.CPUs = []int{firstCPU(t), 1000} }, "pin thread to cpu 1000"},
		{"port taken", func(c *server.Config) { c.Port = busyPort }, "address already in use"},
		{"bad address", func(c *server.Config) { c.Addr = "not-an-ip" }, "listen address"},
	}
	for _, tt := range tests {
		cfg := server.DefaultConfig()
		cfg.Addr, cfg.Port, cfg.CPUs, cfg.Log = "127.0.0.1", 0, []int{firstCPU(t)}, logWriter{t}
		tt.mod(&cfg)
		s := server.New(cfg)
		err := s.Start()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Start() = %v, want error containing %q", tt.name, err, tt.want)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("%s: Shutdown after failed Start: %v", tt.name, err)
		}
		cancel()
		<-s.Done()
	}
}

// TestNonReadingClient pipelines requests without ever reading the
// responses. Once its socket buffers fill, the worker must stop reading
// from it (back-pressure, bounded memory: measured with MemoryInUse) and
// keep serving others.
func TestNonReadingClient(t *testing.T) {
	s, addr := start(t, nil)
	hog, _ := dial(t, addr)
	hog.(*net.TCPConn).SetReadBuffer(4096)
	batch := bytes.Repeat([]byte("GET /json HTTP/1.1\r\nHost: x\r\n\r\n"), 1000)
	go func() {
		for {
			hog.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := hog.Write(batch); err != nil {
				return // blocked: the server stopped reading, as it should
			}
		}
	}()
	time.Sleep(500 * time.Millisecond)
	before := s.Requests()
	c, r := dial(t, addr)
	for range 10 {
		c.Write([]byte("GET /json HTTP/1.1\r\nHost: x\r\n\r\n"))
		if codes, _, _ := readResponses(t, r, 1); codes[0] != 200 {
			t.Fatalf("got %d", codes[0])
		}
	}
	time.Sleep(200 * time.Millisecond)
	// The hog is no longer being served: only our 10 requests (and perhaps
	// one batch of the hog's that was in flight) were answered.
	if n := s.Requests() - before; n > 10+2000 {
		t.Errorf("%d requests served while the hog was not reading", n)
	}
	// And what it makes the worker hold is one input buffer plus one
	// turn's output per connection (Config.MemoryBudget), not a growing
	// pile of responses.
	cfg := server.DefaultConfig()
	if m, bound := s.MemoryInUse(), memoryBound(cfg, 2, 512)-cfg.MemoryBudget; m > bound {
		t.Errorf("the worker holds %d KiB for a hog that does not read, want at most %d KiB", m>>10, bound>>10)
	} else {
		t.Logf("the worker holds %d KiB (bound %d KiB)", m>>10, bound>>10)
	}
	hog.Close()
}

// TestDateRefreshed checks that the Date header follows the clock (it is
// re-rendered when the second changes, not per request).
func TestDateRefreshed(t *testing.T) {
	_, addr := start(t, nil)
	c, r := dial(t, addr)
	date := func() time.Time {
		c.Write([]byte("GET /json HTTP/1.1\r\nHost: x\r\n\r\n"))
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		d, err := time.Parse(http.TimeFormat, resp.Header.Get("Date"))
		if err != nil {
			t.Fatal(err)
		}
		if skew := time.Since(d); skew < 0 || skew > 2*time.Second {
			t.Errorf("Date %v is %v off the clock", d, skew)
		}
		return d
	}
	first := date()
	time.Sleep(1100 * time.Millisecond)
	if second := date(); !second.After(first) {
		t.Errorf("Date did not advance: %v then %v", first, second)
	}
}
