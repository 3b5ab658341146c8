package server

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/server/jsonenc"
)

type benchMessage struct{ Message string }

func (m benchMessage) AppendJSON(dst []byte) []byte {
	e := jsonenc.NewEncoder(dst)
	e.BeginObject()
	e.Key("message")
	e.String(m.Message)
	e.EndObject()
	return e.Bytes()
}

// newTestWorker returns a worker with no sockets, for driving the request
// path (parse, route, handler, response) directly.
func newTestWorker(t testing.TB) (*worker, *conn) {
	s := New(Config{Log: io.Discard})
	s.Handle("GET", "/json", func(c *Ctx) { WriteJSON(c, benchMessage{Message: "Hello, World!"}) })
	s.Handle("POST", "/echo", func(c *Ctx) { c.Write(c.Body()) })
	w := &worker{srv: s, cpu: 0, bud: newBudget(&s.cfg), out: make([]byte, 0, initialOutSize), body: make([]byte, 0, initialBodySize), epoch: time.Now().Add(-time.Second)}
	w.limits.MaxHeaderBytes = s.cfg.MaxHeaderBytes
	w.limits.MaxBodyBytes = s.cfg.MaxBodyBytes
	w.ctx.w = w
	w.tick()
	return w, &conn{fd: -1, in: make([]byte, 0, s.cfg.ReadBufferSize)}
}

const wrkRequest = "GET /json HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"

func TestRequestPathResponse(t *testing.T) {
	w, c := newTestWorker(t)
	c.in = append(c.in, wrkRequest+"GET /missing HTTP/1.1\r\nHost: a\r\n\r\nHEAD /json HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"...)
	out := string(w.respond(c))
	date := string(w.date)
	want := "HTTP/1.1 200 OK\r\nServer: hotpath\r\n" + date + "Content-Type: application/json\r\nContent-Length: 27\r\n\r\n{\"message\":\"Hello, World!\"}" +
		"HTTP/1.1 404 Not Found\r\nServer: hotpath\r\n" + date + "Content-Type: text/plain\r\nContent-Length: 10\r\n\r\nnot found\n" +
		"HTTP/1.1 200 OK\r\nServer: hotpath\r\n" + date + "Content-Type: application/json\r\nContent-Length: 27\r\nConnection: keep-alive\r\n\r\n"
	if out != want {
		t.Errorf("responses:\n%q\nwant\n%q", out, want)
	}
	if len(c.in) != 0 || c.closeAfter {
		t.Errorf("left %d bytes, closeAfter %v", len(c.in), c.closeAfter)
	}
}

// TestRequestPathNoAllocs is the zero-allocation guarantee of the request
// path: parse, route, handler with a fresh JSON value, response.
func TestRequestPathNoAllocs(t *testing.T) {
	w, c := newTestWorker(t)
	pipelined := bytes.Repeat([]byte(wrkRequest), 16)
	body := []byte("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello")
	chunked := []byte("POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n")
	for _, in := range [][]byte{[]byte(wrkRequest), pipelined, body, chunked} {
		if a := testing.AllocsPerRun(1000, func() {
			c.in = append(c.in[:0], in...)
			w.out = w.respond(c)
		}); a != 0 {
			t.Errorf("%q: %v allocations per batch, want 0", in[:20], a)
		}
	}
}

func BenchmarkRequestPath(b *testing.B) {
	w, c := newTestWorker(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(wrkRequest)))
	for b.Loop() {
		c.in = append(c.in[:0], wrkRequest...)
		w.out = w.respond(c)
	}
}

func BenchmarkRequestPathPipelined16(b *testing.B) {
	w, c := newTestWorker(b)
	in := bytes.Repeat([]byte(wrkRequest), 16)
	b.ReportAllocs()
	for b.Loop() {
		c.in = append(c.in[:0], in...)
		w.out = w.respond(c)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*16), "ns/request")
}

// FuzzRequestPath feeds arbitrary bytes through the whole request path:
// nothing a client sends may panic the worker, and an error response must
// mark the connection for closing.
func FuzzRequestPath(f *testing.F) {
	f.Add([]byte(wrkRequest))
	f.Add([]byte("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\nab"))
	f.Add([]byte("GET /json HTTP/1.0\r\n\r\nGET /json HTTP/1.1\r\n"))
	f.Add([]byte("PUT /json HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		w, c := newTestWorker(t)
		if len(in) > cap(c.in) {
			in = in[:cap(c.in)]
		}
		c.in = append(c.in[:0], in...)
		out := w.respond(c)
		if len(c.in) > 0 && c.closeAfter && !bytes.Contains(out, []byte("Connection: close")) {
			t.Fatalf("closing without telling the client: %q", out)
		}
		if bytes.HasPrefix(out, []byte("HTTP/1.1 4")) && !c.closeAfter && !bytes.HasPrefix(out, []byte("HTTP/1.1 404")) && !bytes.HasPrefix(out, []byte("HTTP/1.1 405")) {
			t.Fatalf("error response without closing: %q", out)
		}
	})
}
