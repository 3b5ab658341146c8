package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotpath-dev/hotpath/server/jsonenc"
)

// item is what the API tests' item route answers.
type item struct {
	ID, Q []byte
	N     int64
}

func (it item) AppendJSON(dst []byte) []byte {
	e := jsonenc.NewEncoder(dst)
	e.BeginObject()
	e.Key("id")
	e.StringBytes(it.ID)
	e.Key("q")
	e.StringBytes(it.Q)
	e.Key("n")
	e.Int(it.N)
	e.EndObject()
	return e.Bytes()
}

// newAPIWorker is newTestWorker with the routes of a small API, an
// optional ErrorHandler and log.
func newAPIWorker(t testing.TB, eh ErrorHandler, log io.Writer) (*worker, *conn) {
	if log == nil {
		log = io.Discard
	}
	s := New(Config{Log: log, ErrorHandler: eh, MaxBodyBytes: 1 << 20})
	s.Handle("GET", "/json", func(c *Ctx) { WriteJSON(c, benchMessage{Message: "Hello, World!"}) })
	s.Handle("GET", "/v1/items/{id}", func(c *Ctx) {
		q, _ := c.QueryValue("q")
		n, _ := c.QueryValue("n")
		var v int64
		for _, d := range n {
			v = v*10 + int64(d-'0')
		}
		WriteJSON(c, item{ID: c.PathValue("id"), Q: q, N: v})
	})
	s.Handle("POST", "/v1/items/{id}", func(c *Ctx) { c.SetStatus(201) })
	s.Handle("GET", "/files/{path...}", func(c *Ctx) { c.Write(c.PathValue("path")) })
	s.Handle("GET", "/panic", func(c *Ctx) { panic("boom") })
	// /big?N answers N bytes, '0'+N%10 each.
	s.Handle("GET", "/big", func(c *Ctx) {
		n, _ := strconv.Atoi(string(c.Query()))
		c.SetResponseBody(append(c.ResponseBody(), bytes.Repeat([]byte{byte('0' + n%10)}, n)...))
	})
	s.HandleWith("POST", "/small", RouteOptions{MaxBodyBytes: 16}, func(c *Ctx) { c.Write(c.Body()) })
	w := &worker{srv: s, cpu: 0, bud: newBudget(&s.cfg), out: make([]byte, 0, initialOutSize), body: make([]byte, 0, initialBodySize),
		scratch: make([]byte, 0, initialScratchSize), discard: make([]byte, s.cfg.ReadBufferSize), epoch: time.Now().Add(-time.Second)}
	w.limits.MaxHeaderBytes = s.cfg.MaxHeaderBytes
	w.limits.MaxBodyBytes = s.cfg.MaxBodyBytes
	w.ctx.w = w
	w.tick()
	return w, &conn{fd: -1, in: make([]byte, 0, s.cfg.ReadBufferSize)}
}

// serveOne feeds in to the request path and returns the responses.
func serveOne(w *worker, c *conn, in string) string {
	c.in = append(c.in[:0], in...)
	c.closeAfter = false
	out := string(respondRecovering(w, c))
	w.out = w.out[:0]
	return out
}

// respondRecovering is respond, with a handler's panic recovered as the
// loop does (loopOnce: panickedTurn), for tests that call the request
// path without a loop.
func respondRecovering(w *worker, c *conn) (out []byte) {
	defer func() {
		if !w.inHandler {
			return
		}
		if v := recover(); v != nil {
			out = w.panickedTurn(v)
		}
	}()
	return w.respond(c)
}

// body returns the body of the one response in resp.
func body(resp string) string {
	_, b, _ := strings.Cut(resp, "\r\n\r\n")
	return b
}

func TestAPIRoutes(t *testing.T) {
	w, c := newAPIWorker(t, nil, nil)
	tests := []struct{ req, status, body string }{
		{"GET /v1/items/42?q=a+b%21&n=7 HTTP/1.1\r\nHost: a\r\n\r\n", "200", `{"id":"42","q":"a b!","n":7}`},
		{"GET /v1/items/%34%32 HTTP/1.1\r\nHost: a\r\n\r\n", "200", `{"id":"42","q":"","n":0}`},
		{"POST /v1/items/42 HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", "201", ""},
		{"DELETE /v1/items/42 HTTP/1.1\r\nHost: a\r\n\r\n", "405", "method not allowed\n"},
		{"GET /files/a/b%20c HTTP/1.1\r\nHost: a\r\n\r\n", "200", "a/b c"},
		{"GET /v1/items/ HTTP/1.1\r\nHost: a\r\n\r\n", "404", "not found\n"},
	}
	for _, tt := range tests {
		out := serveOne(w, c, tt.req)
		if !strings.HasPrefix(out, "HTTP/1.1 "+tt.status+" ") || body(out) != tt.body {
			t.Errorf("%q:\n%q\nwant %s %q", tt.req, out, tt.status, tt.body)
		}
	}
	if out := serveOne(w, c, "DELETE /v1/items/42 HTTP/1.1\r\nHost: a\r\n\r\n"); !strings.Contains(out, "\r\nAllow: GET, POST, HEAD\r\n") {
		t.Errorf("405 without its Allow: %q", out)
	}
}

// TestAPINoAllocs: GET with a path parameter, and with query values that
// need decoding (into the worker's scratch space), allocate nothing; so
// does a 404 and a 405 (its Allow is built in the worker's buffer).
func TestAPINoAllocs(t *testing.T) {
	w, c := newAPIWorker(t, nil, nil)
	for _, in := range []string{
		"GET /v1/items/42 HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /v1/items/42?q=hello+w%C3%B6rld&n=7 HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /v1/items/%34%32?q=x HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /files/a/b/c HTTP/1.1\r\nHost: a\r\n\r\n",
		strings.Repeat("GET /v1/items/42?q=a HTTP/1.1\r\nHost: a\r\n\r\n", 16),
		"GET /nothing HTTP/1.1\r\nHost: a\r\n\r\n",
		"PUT /v1/items/42 HTTP/1.1\r\nHost: a\r\n\r\n",
	} {
		b := []byte(in)
		if a := testing.AllocsPerRun(1000, func() {
			c.in = append(c.in[:0], b...)
			w.out = w.respond(c)
		}); a != 0 {
			t.Errorf("%q: %v allocations per batch, want 0", in[:30], a)
		}
	}
	// AllocsPerRun rounds down: a scratch space that grew once in 1,000
	// runs (not emptied per request) would pass it.
	if cap(w.scratch) != initialScratchSize {
		t.Errorf("scratch space grew to %d bytes", cap(w.scratch))
	}
}

// jsonErrors is an ErrorHandler of a JSON API.
func jsonErrors(c *Ctx, code int, msg string) {
	c.SetContentType("application/json")
	c.SetResponseBody(fmt.Appendf(c.ResponseBody(), `{"error":%q,"code":%d}`, msg, code))
}

// TestErrorHandler: every response the server makes on its own goes
// through the hook, status and closing kept, with the request as far as
// it was parsed.
func TestErrorHandler(t *testing.T) {
	var seen []string
	eh := func(c *Ctx, code int, msg string) {
		seen = append(seen, fmt.Sprintf("%d %s %s", code, c.Method(), c.Path()))
		c.SetStatus(200) // ignored
		jsonErrors(c, code, msg)
	}
	w, c := newAPIWorker(t, eh, nil)
	tests := []struct {
		req    string
		status int
		msg    string
		closes bool
		seen   string
	}{
		{"GET /nothing HTTP/1.1\r\nHost: a\r\n\r\n", 404, "not found", false, "404 GET /nothing"},
		{"PUT /v1/items/1 HTTP/1.1\r\nHost: a\r\n\r\n", 405, "method not allowed", false, "405 PUT /v1/items/1"},
		{"GET /panic HTTP/1.1\r\nHost: a\r\n\r\n", 500, "internal server error", true, "500 GET /panic"},
		{"GET /x HTTP/1.1\r\n\r\n", 400, "missing Host header", true, "400 GET /x"},
		{"GET /x HTTP/1.1\r\nHost: a\r\nX: " + strings.Repeat("a", 9000) + "\r\n\r\n", 431, "header fields too large", true, "431 GET /x"},
		{"GET /" + strings.Repeat("a", 9000) + " HTTP/1.1\r\n", 414, "request target too long", true, "414  "},
		{"POST /small HTTP/1.1\r\nHost: a\r\nContent-Length: 17\r\n\r\n", 413, "request body too large", true, "413 POST /small"},
		{"GET /x HTTP/2.0\r\nHost: a\r\n\r\n", 505, "HTTP version not supported", true, "505 GET /x"},
	}
	for _, tt := range tests {
		seen = nil
		out := serveOne(w, c, tt.req)
		want := fmt.Sprintf(`{"error":%q,"code":%d}`, tt.msg, tt.status)
		if !strings.HasPrefix(out, fmt.Sprintf("HTTP/1.1 %d ", tt.status)) || body(out) != want ||
			!strings.Contains(out, "Content-Type: application/json\r\n") ||
			!strings.Contains(out, "Content-Length: "+strconv.Itoa(len(want))+"\r\n") {
			t.Errorf("%.40q:\n%q\nwant %d %s", tt.req, out, tt.status, want)
		}
		if c.closeAfter != tt.closes || strings.Contains(out, "Connection: close") != tt.closes {
			t.Errorf("%.40q: closes %v (%q), want %v", tt.req, c.closeAfter, out, tt.closes)
		}
		if len(seen) != 1 || seen[0] != tt.seen {
			t.Errorf("%.40q: the hook saw %q, want %q", tt.req, seen, tt.seen)
		}
	}
	// HEAD: the length of the body it does not get.
	out := serveOne(w, c, "HEAD /nothing HTTP/1.1\r\nHost: a\r\n\r\n")
	if want := len(`{"error":"not found","code":404}`); !strings.Contains(out, "Content-Length: "+strconv.Itoa(want)+"\r\n") || body(out) != "" {
		t.Errorf("HEAD 404: %q", out)
	}
	// 408 and the 413 of a full buffer: no request.
	seen = nil
	c.in = c.in[:0]
	out = string(w.appendError(nil, c, 408, "request not received in time", false, false))
	if !strings.HasPrefix(out, "HTTP/1.1 408 ") || body(out) != `{"error":"request not received in time","code":408}` || len(seen) != 1 || seen[0] != "408  " {
		t.Errorf("408: %q, hook saw %q", out, seen)
	}
}

// TestErrorHandlerMisbehaves: a hook that panics or writes too much gets
// the default response sent (today's bytes), logged, and the worker goes
// on; the next request is served.
func TestErrorHandlerMisbehaves(t *testing.T) {
	for _, tt := range []struct {
		name string
		eh   ErrorHandler
		log  string
	}{
		{"panics", func(c *Ctx, code int, msg string) { c.AddHeader("X-Half", "1"); panic("hook bug") }, "ErrorHandler panic for 404"},
		{"nil deref", func(c *Ctx, code int, msg string) { var p *Ctx; p.Close() }, "ErrorHandler panic for 404"},
		{"too much", func(c *Ctx, code int, msg string) { c.Write(make([]byte, MaxErrorResponse+1)) }, "more than 4096"},
		{"huge header", func(c *Ctx, code int, msg string) { c.AddHeader("X-Big", strings.Repeat("a", MaxErrorResponse)) }, "more than 4096"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var log bytes.Buffer
			w, c := newAPIWorker(t, tt.eh, &log)
			out := serveOne(w, c, "GET /nothing HTTP/1.1\r\nHost: a\r\n\r\nGET /json HTTP/1.1\r\nHost: a\r\n\r\n")
			date := string(w.date)
			want := "HTTP/1.1 404 Not Found\r\nServer: hotpath\r\n" + date + "Content-Type: text/plain\r\nContent-Length: 10\r\n\r\nnot found\n" +
				"HTTP/1.1 200 OK\r\nServer: hotpath\r\n" + date + "Content-Type: application/json\r\nContent-Length: 27\r\n\r\n{\"message\":\"Hello, World!\"}"
			if out != want {
				t.Errorf("responses:\n%q\nwant\n%q", out, want)
			}
			if !strings.Contains(log.String(), tt.log) {
				t.Errorf("log %q, want %q", log.String(), tt.log)
			}
			// A connection-level error too: today's bytes.
			out = serveOne(w, c, "GET /x HTTP/1.1\r\n\r\n")
			want = "HTTP/1.1 400 Bad Request\r\nServer: hotpath\r\n" + date + "Content-Type: text/plain\r\nContent-Length: 20\r\nConnection: close\r\n\r\nmissing Host header\n"
			if out != want {
				t.Errorf("400:\n%q\nwant\n%q", out, want)
			}
		})
	}
}

// TestPanicLog: a handler's panic is logged with its value and the first
// frames of its stack, from the panic's site.
func TestPanicLog(t *testing.T) {
	var log bytes.Buffer
	w, c := newAPIWorker(t, nil, &log)
	out := serveOne(w, c, "GET /panic HTTP/1.1\r\nHost: a\r\n\r\n")
	if !strings.HasPrefix(out, "HTTP/1.1 500 ") || !c.closeAfter {
		t.Fatalf("%q", out)
	}
	l := log.String()
	t.Log(l)
	lines := strings.Split(strings.TrimSpace(l), "\n")
	if !strings.HasPrefix(lines[0], "hotpath: handler panic: boom") || len(lines) < 2 ||
		!strings.Contains(lines[1], "server.newAPIWorker.func") || !strings.Contains(lines[1], "api_test.go:") {
		t.Errorf("log:\n%s\nwant the panic and the handler's frame first", l)
	}
	if strings.Contains(l, "runtime.gopanic") || strings.Contains(l, "(*worker).") || len(lines) > 1+panicFrames {
		t.Errorf("log:\n%s\nwant no runtime or worker frames, at most %d", l, panicFrames)
	}
}

// TestPanicAfterGrownOutput: a handler panics after the responses before
// it in the same turn grew the output buffer past the worker's (w.out).
// Those responses go out whole and in order, then the 500, and nothing
// after it: the loop's recovery finds them where respond left them
// (serve keeps w.out on the grown buffer).
func TestPanicAfterGrownOutput(t *testing.T) {
	w, c := newAPIWorker(t, nil, nil)
	w.srv.cfg.MaxOutputPerTurn = 1 << 20
	sizes := []int{30001, 40002, 50003}
	var in strings.Builder
	for _, n := range sizes {
		fmt.Fprintf(&in, "GET /big?%d HTTP/1.1\r\nHost: a\r\n\r\n", n)
	}
	in.WriteString("GET /panic HTTP/1.1\r\nHost: a\r\n\r\nGET /json HTTP/1.1\r\nHost: a\r\n\r\n")
	before := w.requests.Load()
	out := serveOne(w, c, in.String())
	r := bufio.NewReader(strings.NewReader(out))
	for i, n := range sizes {
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != strings.Repeat(string(rune('0'+n%10)), n) {
			t.Fatalf("response %d: %d, %d bytes, want 200 and %d bytes of %c", i, resp.StatusCode, len(b), n, '0'+n%10)
		}
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil || resp.StatusCode != 500 || !resp.Close {
		t.Fatalf("after them: %v, %v; want 500 and close", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	if rest, _ := io.ReadAll(r); len(rest) != 0 || !c.closeAfter {
		t.Errorf("after the 500: %q, close %v", rest, c.closeAfter)
	}
	if got := w.requests.Load() - before; got != uint64(len(sizes)+1) {
		t.Errorf("requests counted %d, want %d (the panicking one included)", got, len(sizes)+1)
	}
}

// TestReadRecovering: startDrain reads the connections it finds with
// readRecovering, which answers a handler's panic itself (the 500, then
// the connection's close) and returns, so that the drain's own work goes
// on. Over a socket pair: the request waits in the socket as it does for
// a connection accepted just before the drain.
func TestReadRecovering(t *testing.T) {
	w, c := newAPIWorker(t, nil, nil)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	c.fd = fds[0]
	before := w.requests.Load()
	unix.Write(fds[1], []byte("GET /json HTTP/1.1\r\nHost: a\r\n\r\nGET /panic HTTP/1.1\r\nHost: a\r\n\r\nGET /json HTTP/1.1\r\nHost: a\r\n\r\n"))
	w.readRecovering(c) // a panic escaping it fails the test
	var b [4096]byte
	n, err := unix.Read(fds[1], b[:])
	if err != nil {
		t.Fatal(err)
	}
	out := string(b[:n])
	if strings.Count(out, "HTTP/1.1 ") != 2 || !strings.HasPrefix(out, "HTTP/1.1 200 ") ||
		!strings.Contains(out, "HTTP/1.1 500 ") || !strings.HasSuffix(out, "internal server error\n") {
		t.Errorf("answered %q, want the 200, then the 500 and nothing after", out)
	}
	if c.state != stateLinger || w.inHandler {
		t.Errorf("state %v, inHandler %v: want the connection lingering to its close", c.state, w.inHandler)
	}
	if got := w.requests.Load() - before; got != 2 {
		t.Errorf("requests counted %d, want 2", got)
	}
}

// TestRouteBodyLimit: a route's lower limit is enforced from the
// Content-Length as soon as the head is in, and for a complete body.
func TestRouteBodyLimit(t *testing.T) {
	w, c := newAPIWorker(t, nil, nil)
	if out := serveOne(w, c, "POST /small HTTP/1.1\r\nHost: a\r\nContent-Length: 16\r\n\r\n0123456789abcdef"); !strings.HasPrefix(out, "HTTP/1.1 200 ") || body(out) != "0123456789abcdef" {
		t.Errorf("at the limit: %q", out)
	}
	// The head only: refused before the body arrives.
	if out := serveOne(w, c, "POST /small HTTP/1.1\r\nHost: a\r\nContent-Length: 1048576\r\n\r\n"); !strings.HasPrefix(out, "HTTP/1.1 413 ") || !c.closeAfter {
		t.Errorf("1 MiB announced: %q", out)
	}
	// Chunked, complete, over the limit.
	if out := serveOne(w, c, "POST /small HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n11\r\n0123456789abcdefg\r\n0\r\n\r\n"); !strings.HasPrefix(out, "HTTP/1.1 413 ") || !c.closeAfter {
		t.Errorf("chunked over the limit: %q", out)
	}
	// Other routes keep the server's.
	if out := serveOne(w, c, "POST /v1/items/1 HTTP/1.1\r\nHost: a\r\nContent-Length: 17\r\n\r\n0123456789abcdefg"); !strings.HasPrefix(out, "HTTP/1.1 201 ") {
		t.Errorf("another route: %q", out)
	}
}

// TestCtxMiddlewareState: Status, ResponseLen and the value slot, read by
// a middleware around a handler; the slot is empty at every request.
func TestCtxMiddlewareState(t *testing.T) {
	s := New(Config{Log: io.Discard})
	var got []string
	mw := func(h Handler) Handler {
		return func(c *Ctx) {
			before := c.Value()
			c.SetValue(&got)
			h(c)
			got = append(got, fmt.Sprintf("%s %d %d %v", c.Pattern(), c.Status(), c.ResponseLen(), before))
		}
	}
	s.Handle("GET", "/a/{x}", mw(func(c *Ctx) { c.Write(c.PathValue("x")) }))
	s.Handle("", "/b", mw(func(c *Ctx) { c.SetStatus(404); c.WriteString("gone") }))
	w := &worker{srv: s, bud: newBudget(&s.cfg), out: make([]byte, 0, initialOutSize), body: make([]byte, 0, initialBodySize), epoch: time.Now()}
	w.limits.MaxHeaderBytes, w.limits.MaxBodyBytes = s.cfg.MaxHeaderBytes, s.cfg.MaxBodyBytes
	w.ctx.w = w
	w.tick()
	c := &conn{fd: -1, in: make([]byte, 0, s.cfg.ReadBufferSize)}
	serveOne(w, c, "GET /a/hello HTTP/1.1\r\nHost: a\r\n\r\nPOST /b HTTP/1.1\r\nHost: a\r\n\r\nHEAD /a/xy HTTP/1.1\r\nHost: a\r\n\r\n")
	want := []string{"GET /a/{x} 200 5 <nil>", "/b 404 4 <nil>", "GET /a/{x} 200 2 <nil>"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("middleware saw %q, want %q", got, want)
	}
}

// FuzzAPIRequestPath is FuzzRequestPath with pattern routes, a route
// body limit and a JSON ErrorHandler: nothing a client sends may panic
// the worker, every error but 404 and 405 closes the connection, and an
// error response is the hook's.
func FuzzAPIRequestPath(f *testing.F) {
	f.Add([]byte("GET /v1/items/42?q=a+b HTTP/1.1\r\nHost: a\r\n\r\n"))
	f.Add([]byte("GET /files/a/%2F/b HTTP/1.1\r\nHost: a\r\n\r\nPUT /v1/items/1 HTTP/1.1\r\nHost: a\r\n\r\n"))
	f.Add([]byte("POST /small HTTP/1.1\r\nHost: a\r\nContent-Length: 20\r\n\r\n"))
	f.Add([]byte("POST /small HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		w, c := newAPIWorker(t, jsonErrors, nil)
		if len(in) > cap(c.in) {
			in = in[:cap(c.in)]
		}
		c.in = append(c.in[:0], in...)
		out := w.respond(c)
		if c.closeAfter && len(out) > 0 && !bytes.Contains(out, []byte("Connection: close")) {
			t.Fatalf("closing without telling the client: %q", out)
		}
		for _, resp := range bytes.SplitAfter(out, []byte("HTTP/1.1 ")) {
			if len(resp) > 3 && (resp[0] == '4' || resp[0] == '5') && !bytes.Contains(resp, []byte(`{"error":`)) {
				t.Fatalf("an error response not from the hook: %q", out)
			}
		}
	})
}

func BenchmarkRequestPathParam(b *testing.B) {
	w, c := newAPIWorker(b, nil, nil)
	in := []byte("GET /v1/items/42?q=x HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n")
	b.ReportAllocs()
	for b.Loop() {
		c.in = append(c.in[:0], in...)
		w.out = w.respond(c)
	}
}
