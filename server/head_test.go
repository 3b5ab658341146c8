package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/server/jsonenc"
)

// sized is a JSON value whose encoding is as long as the request asks.
type sized struct{ s string }

func (v sized) AppendJSON(dst []byte) []byte {
	e := jsonenc.NewEncoder(dst)
	e.BeginObject()
	e.Key("s")
	e.String(v.s)
	e.EndObject()
	return e.Bytes()
}

// TestJSONHeadCache sends requests whose WriteJSON bodies change length
// from one to the next (the whole head of such a response is rendered once
// per length, see worker.headJSON), pipelined in one write, in the forms
// the cached head does not cover (HEAD, HTTP/1.0, Connection: close, an
// added header) between them, and with the wall clock stepped between
// rounds. Every response is read by net/http: its Content-Length must be
// its body's, its Date the clock's, its other headers its own.
func TestJSONHeadCache(t *testing.T) {
	var step atomic.Int64
	s := startSteppedClock(t, &step, nil, func(s *Server) {
		s.Handle("", "/len", func(c *Ctx) {
			n, _ := strconv.Atoi(string(c.Query()))
			WriteJSON(c, sized{strings.Repeat("x", n)})
			if c.Header("X-Add") != nil {
				c.AddHeader("X-Added", "yes")
			}
		})
	})
	addr := "127.0.0.1:" + strconv.Itoa(s.Port())

	type req struct {
		n     int
		extra string // method, version and headers beyond the plain GET
	}
	plain := func(n int) req { return req{n: n} }
	rounds := [][]req{
		{plain(1), plain(1), plain(2), plain(100), plain(1), plain(8)},
		{plain(8), {n: 8, extra: "head"}, plain(9), {n: 9, extra: "1.0"}, plain(9), {n: 7, extra: "add"}, plain(7), plain(7)},
		{plain(7), plain(7000), plain(7), {n: 3, extra: "close"}},
	}
	for i, round := range rounds {
		step.Store(int64(time.Duration(i) * 5 * time.Hour)) // a new Date each round
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		var b strings.Builder
		for _, r := range round {
			switch r.extra {
			case "head":
				b.WriteString("HEAD /len?" + strconv.Itoa(r.n) + " HTTP/1.1\r\nHost: x\r\n\r\n")
			case "1.0":
				b.WriteString("GET /len?" + strconv.Itoa(r.n) + " HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
			case "add":
				b.WriteString("GET /len?" + strconv.Itoa(r.n) + " HTTP/1.1\r\nHost: x\r\nX-Add: 1\r\n\r\n")
			case "close":
				b.WriteString("GET /len?" + strconv.Itoa(r.n) + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			default:
				b.WriteString("GET /len?" + strconv.Itoa(r.n) + " HTTP/1.1\r\nHost: x\r\n\r\n")
			}
		}
		if _, err := c.Write([]byte(b.String())); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		for j, r := range round {
			method := "GET"
			if r.extra == "head" {
				method = "HEAD"
			}
			resp, err := http.ReadResponse(br, &http.Request{Method: method})
			if err != nil {
				t.Fatalf("round %d, response %d (%+v): %v", i, j, r, err)
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("round %d, response %d (%+v): body: %v", i, j, r, err)
			}
			want := `{"s":"` + strings.Repeat("x", r.n) + `"}`
			if r.extra == "head" {
				if len(body) != 0 || resp.ContentLength != int64(len(want)) {
					t.Errorf("round %d, HEAD %d: body %d bytes, Content-Length %d; want none and %d", i, j, len(body), resp.ContentLength, len(want))
				}
			} else if string(body) != want || resp.ContentLength != int64(len(want)) {
				t.Errorf("round %d, response %d (%+v): Content-Length %d, body %q; want %d, %q", i, j, r, resp.ContentLength, body, len(want), want)
			}
			if got := resp.Header.Get("X-Added"); (got == "yes") != (r.extra == "add") {
				t.Errorf("round %d, response %d (%+v): X-Added %q", i, j, r, got)
			}
			// net/http takes "close" out of the header into resp.Close.
			if got, want := resp.Header.Get("Connection"), map[string]string{"1.0": "keep-alive"}[r.extra]; got != want || resp.Close != (r.extra == "close") {
				t.Errorf("round %d, response %d (%+v): Connection %q, close %v; want %q, %v", i, j, r, got, resp.Close, want, r.extra == "close")
			}
			date, err := http.ParseTime(resp.Header.Get("Date"))
			if err != nil {
				t.Fatalf("round %d, response %d: Date: %v", i, j, err)
			}
			if off := date.Sub(time.Now().Add(time.Duration(step.Load()))); off < -3*time.Second || off > 3*time.Second {
				t.Errorf("round %d, response %d: Date %v is %v off the worker's clock", i, j, date, off)
			}
			if resp.Header.Get("Content-Type") != jsonType {
				t.Errorf("round %d, response %d: Content-Type %q", i, j, resp.Header.Get("Content-Type"))
			}
		}
		c.Close()
	}
}
