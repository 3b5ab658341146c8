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
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/server"
)

// reply is one response as it came off the wire.
type reply struct {
	status int
	header http.Header
	body   string
	close  bool // Connection: close
}

// converse sends in on a connection of its own, reads until the server
// closes the connection, and returns every response it sent, in order.
// The server must end the connection in order (EOF, never a reset) and
// every byte it sent must belong to a response: so a test sees both what
// was answered and that nothing else was, such as a response to a request
// smuggled in a body. A conversation that should keep the connection
// open ends with a request carrying "Connection: close".
func converse(t *testing.T, addr, in string) []reply {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(in)); err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(c)
	if err != nil {
		if errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("connection reset after %q", raw)
		}
		t.Fatalf("reading the responses: %v (after %q)", err, raw)
	}
	var out []reply
	r := bufio.NewReader(bytes.NewReader(raw))
	for {
		if _, err := r.Peek(1); err == io.EOF {
			return out
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("response %d: %v in %q", len(out), err, raw)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("response %d body: %v in %q", len(out), err, raw)
		}
		out = append(out, reply{resp.StatusCode, resp.Header, string(body), resp.Close})
	}
}

// wantRefused checks that a conversation got exactly one response, the
// refusal with status, and that it closed the connection.
func wantRefused(t *testing.T, got []reply, status int) {
	t.Helper()
	if len(got) != 1 || got[0].status != status || !got[0].close {
		t.Errorf("got %s; want one %d with Connection: close, then EOF", summary(got), status)
	}
}

func summary(rs []reply) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(http.StatusText(r.status))
		if r.close {
			b.WriteString(" (close)")
		}
	}
	return "[" + b.String() + "]"
}

// follow is a request sent after the one under test: if the server reads
// past the request under test the wrong way, or keeps the connection open
// after refusing it, it answers this one too.
const follow = "GET /json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"

// TestRFC9112Details sends the request-line and Host cases of RFC 9112 3
// and 3.2 and the chunk-size syntax of 7.1 to the real server over
// loopback: each refusal has its status and closes the connection (the
// request after it is never answered), and each valid request is served
// with the connection kept.
func TestRFC9112Details(t *testing.T) {
	_, addr := start(t, nil) // the default limits: 8 KiB of request line and header fields
	target := "/" + strings.Repeat("a", 9000)
	tests := []struct {
		name, in string
		status   int // 0: served, then the follow-up too
		body     string
	}{
		{name: "9000-byte target", in: "GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n" + follow, status: 414},
		{name: "9000-byte target still arriving", in: "GET " + target, status: 414},
		{name: "9000-byte query", in: "GET /json?" + target + " HTTP/1.1\r\nHost: x\r\n\r\n" + follow, status: 414},
		{name: "9000-byte header field", in: "GET /json HTTP/1.1\r\nHost: x\r\nX: " + target + "\r\n\r\n" + follow, status: 431},
		{name: "Host a b", in: "GET /json HTTP/1.1\r\nHost: a b\r\n\r\n" + follow, status: 400},
		{name: "Host a/b", in: "GET /json HTTP/1.1\r\nHost: a/b\r\n\r\n" + follow, status: 400},
		{name: "Host a:xy", in: "GET /json HTTP/1.1\r\nHost: a:xy\r\n\r\n" + follow, status: 400},
		{name: "Host a, b", in: "GET /json HTTP/1.1\r\nHost: a, b\r\n\r\n" + follow, status: 400},
		{name: "Host in HTTP/1.0", in: "GET /json HTTP/1.0\r\nHost: a b\r\n\r\n" + follow, status: 400},
		{name: "no Host", in: "GET /json HTTP/1.1\r\n\r\n" + follow, status: 400},
		{name: "two Hosts", in: "GET /json HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n" + follow, status: 400},
		{name: "0xFF in target", in: "GET /js\xffon HTTP/1.1\r\nHost: x\r\n\r\n" + follow, status: 400},
		{name: "0xFF in query", in: "GET /json?\xff HTTP/1.1\r\nHost: x\r\n\r\n" + follow, status: 400},
		{name: "0xFF in target, line not ended", in: "GET /js\xff", status: 400},
		{name: "bad percent-encoding", in: "GET /json?%x HTTP/1.1\r\nHost: x\r\n\r\n" + follow, status: 400},
		{name: "fragment", in: "GET /json#top HTTP/1.1\r\nHost: x\r\n\r\n" + follow, status: 400},
		{name: "chunk size overflowing int64", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n" + follow, status: 400},
		{name: "chunk size over the limit", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0000000000100001\r\n" + follow, status: 413},

		{name: "valid Host forms", in: "GET /json HTTP/1.1\r\nHost: [::1]:8080\r\n\r\nGET /json HTTP/1.1\r\nHost:\r\n\r\nGET /json HTTP/1.1\r\nHost: a.example:\r\n\r\n" + follow},
		{name: "absolute form", in: "GET http://127.0.0.1:80/json HTTP/1.1\r\nHost: x\r\n\r\n" + follow},
		{name: "zero-padded 16-digit chunk size", in: "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n000000000000000a\r\n0123456789\r\n0000000000000000\r\n\r\n" + follow, body: "0123456789"},
		{name: "8000-byte target", in: "GET /json?" + target[:8000] + " HTTP/1.1\r\nHost: x\r\n\r\n" + follow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := converse(t, addr, tt.in)
			if tt.status != 0 {
				wantRefused(t, got, tt.status)
				return
			}
			served := strings.Count(tt.in, "HTTP/1.1\r\n")
			if len(got) != served {
				t.Fatalf("got %s, want %d responses", summary(got), served)
			}
			for i, r := range got {
				if r.status != 200 || r.close != (i == served-1) {
					t.Errorf("response %d of %s: want 200, the connection closed only after the last", i, summary(got))
				}
			}
			if tt.body != "" && got[0].body != tt.body {
				t.Errorf("body %q, want %q", got[0].body, tt.body)
			}
		})
	}
}

// TestFramingPairs sends every pairing of Content-Length and
// Transfer-Encoding that could make a proxy in front and this server
// disagree on where a request ends to the real server, each followed by
// another request: a refused one must get its RFC 9112 6.1/6.3 status and
// Connection: close, and nothing after it may be answered (not the
// request after it, nor one read out of its body); an accepted one must
// be served with its body, and the request after it too.
func TestFramingPairs(t *testing.T) {
	_, addr := start(t, nil)
	const head = "POST /echo HTTP/1.1\r\nHost: x\r\n"
	const chunked = "5\r\nhello\r\n0\r\n\r\n" // 15 bytes, 5 decoded
	// inner is a request inside a body: a server that reads the body
	// with the wrong length answers it.
	const inner = "GET /json HTTP/1.1\r\nHost: x\r\n\r\n"
	tests := []struct {
		name, in string
		status   int    // 0: served, and the request after it too
		body     string // the echo of a served request
	}{
		{name: "CL 0 then TE chunked", in: head + "Content-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked, status: 400},
		{name: "TE chunked then CL 0", in: head + "Transfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n" + chunked, status: 400},
		{name: "CL equal to the encoding", in: head + "Content-Length: 15\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked, status: 400},
		{name: "CL shorter than the encoding", in: head + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked, status: 400},
		{name: "CL longer than the encoding", in: head + "Content-Length: 46\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked + inner, status: 400},
		{name: "two equal CLs and TE", in: head + "Content-Length: 15\r\nTransfer-Encoding: chunked\r\nContent-Length: 15\r\n\r\n" + chunked, status: 400},
		{name: "CL and TE gzip, chunked", in: head + "Content-Length: 15\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" + chunked, status: 400},
		{name: "two different CLs", in: head + "Content-Length: 5\r\nContent-Length: 36\r\n\r\nhello" + inner, status: 400},
		{name: "two CLs, 0 first", in: head + "Content-Length: 0\r\nContent-Length: 31\r\n\r\n" + inner, status: 400},
		{name: "CL list 5, 5", in: head + "Content-Length: 5, 5\r\n\r\nhello", status: 400},
		{name: "CL list 31, 0", in: head + "Content-Length: 31, 0\r\n\r\n" + inner, status: 400},
		{name: "TE chunked, gzip", in: head + "Transfer-Encoding: chunked, gzip\r\n\r\n" + chunked, status: 400},
		{name: "TE gzip", in: head + "Transfer-Encoding: gzip\r\n\r\n" + chunked, status: 400},
		{name: "TE gzip, chunked", in: head + "Transfer-Encoding: gzip, chunked\r\n\r\n" + chunked, status: 501},
		{name: "TE chunked, chunked", in: head + "Transfer-Encoding: chunked, chunked\r\n\r\n" + chunked, status: 400},
		{name: "TE in two lines", in: head + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked, status: 400},
		{name: "TE in HTTP/1.0", in: "POST /echo HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked, status: 400},
		{name: "TE and CL in HTTP/1.0", in: "POST /echo HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 15\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked, status: 400},

		{name: "two equal CLs", in: head + "Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello", body: "hello"},
		{name: "TE chunked", in: head + "Transfer-Encoding: chunked\r\n\r\n" + chunked, body: "hello"},
		{name: "CL with a request in the body", in: head + "Content-Length: 31\r\n\r\n" + inner, body: inner},
		{name: "CL in HTTP/1.0", in: "POST /echo HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 5\r\n\r\nhello", body: "hello"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(inner) != 31 {
				t.Fatalf("inner request of %d bytes: fix the lengths above", len(inner))
			}
			got := converse(t, addr, tt.in+follow)
			if tt.status != 0 {
				wantRefused(t, got, tt.status)
				return
			}
			if len(got) != 2 || got[0].status != 200 || got[0].body != tt.body || got[0].close ||
				got[1].status != 200 || got[1].body != `{"message":"Hello, World!"}` {
				t.Errorf("got %s, first body %q; want 200 %q, then the request after it", summary(got), firstBody(got), tt.body)
			}
		})
	}
}

func firstBody(rs []reply) string {
	if len(rs) == 0 {
		return ""
	}
	return rs[0].body
}

// startStatus runs a server whose /status?code answers with that status
// and a body, as a handler that forgets a status has no content would.
func startStatus(t *testing.T) string {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.Addr, cfg.Port, cfg.CPUs, cfg.Log = "127.0.0.1", 0, []int{firstCPU(t)}, logWriter{t}
	s := server.New(cfg)
	status := func(c *server.Ctx) {
		code, _ := strconv.Atoi(string(c.Query()))
		c.SetStatus(code)
		c.WriteString("the handler's body")
	}
	s.Handle("GET", "/status", status)
	s.Handle("POST", "/status", status)
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
	return "127.0.0.1:" + strconv.Itoa(s.Port())
}

// rawResponse is one response cut out of the bytes on the wire by the
// framing RFC 9110 6.4.1 gives its status, not by what its headers say.
type rawResponse struct {
	status int
	header string // the header block, status line included
	body   string
}

// cutResponses splits raw into responses: a response of a status that
// has no content (1xx, 204, 304) ends with its header block, any other
// has the Content-Length its header declares. Bytes after the header
// block of a 204 that are not the next response show as garbage in the
// next status line.
func cutResponses(t *testing.T, raw []byte) []rawResponse {
	t.Helper()
	var out []rawResponse
	for len(raw) > 0 {
		end := bytes.Index(raw, []byte("\r\n\r\n"))
		if end < 0 {
			t.Fatalf("unterminated header block %q", raw)
		}
		hdr := string(raw[:end+4])
		raw = raw[end+4:]
		var code int
		if _, err := fmt.Sscanf(hdr, "HTTP/1.1 %3d ", &code); err != nil {
			t.Fatalf("status line of %q: %v", hdr, err)
		}
		r := rawResponse{status: code, header: hdr}
		if code >= 200 && code != 204 && code != 304 {
			resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(hdr)), nil)
			if err != nil || resp.ContentLength < 0 || resp.ContentLength > int64(len(raw)) {
				t.Fatalf("response %q: length %d of %d bytes left, %v", hdr, resp.ContentLength, len(raw), err)
			}
			r.body, raw = string(raw[:resp.ContentLength]), raw[resp.ContentLength:]
		}
		out = append(out, r)
	}
	return out
}

// hasField reports whether the header block carries a field named name.
func hasField(header, name string) bool {
	for _, line := range strings.Split(header, "\r\n")[1:] {
		if k, _, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// TestNoContentNoLength checks RFC 9110 8.6 and 6.4.1 on the wire: a 204
// and a 304 carry neither Content-Length (nor Transfer-Encoding) nor the
// body the handler wrote, so the next response follows the header block
// at once; the 100 Continue the server sends is a bare status line; a
// 1xx a handler sets as its final status (which cannot be final) is
// answered 500 with a length; a 200 keeps its length.
func TestNoContentNoLength(t *testing.T) {
	addr := startStatus(t)
	req := func(code, extra string) string {
		return "GET /status?" + code + " HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n"
	}
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte(req("204", "") + req("304", "") + req("200", "") + req("103", "") + req("204", "Connection: close\r\n")))
	raw, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	got := cutResponses(t, raw)
	want := []int{204, 304, 200, 500, 204}
	if len(got) != len(want) {
		t.Fatalf("%d responses in %q, want %d", len(got), raw, len(want))
	}
	for i, r := range got {
		if r.status != want[i] {
			t.Errorf("response %d: status %d, want %d", i, r.status, want[i])
		}
		noContent := want[i] == 204 || want[i] == 304
		for _, f := range []string{"Content-Length", "Transfer-Encoding"} {
			if hasField(r.header, f) && (noContent || f == "Transfer-Encoding") {
				t.Errorf("response %d (%d) has %s: %q", i, r.status, f, r.header)
			}
		}
		if !noContent && (!hasField(r.header, "Content-Length") || r.body != "the handler's body") {
			t.Errorf("response %d (%d): %q %q; want its Content-Length and body", i, r.status, r.header, r.body)
		}
	}

	// The interim 100 Continue: a status line and an empty line, nothing
	// else; then the final response.
	c2, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.SetDeadline(time.Now().Add(10 * time.Second))
	c2.Write([]byte("POST /status?204 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"))
	const cont = "HTTP/1.1 100 Continue\r\n\r\n"
	interim := make([]byte, len(cont))
	if _, err := io.ReadFull(c2, interim); err != nil || string(interim) != cont {
		t.Fatalf("interim response %q, %v; want %q", interim, err, cont)
	}
	c2.Write([]byte("hi"))
	raw, err = io.ReadAll(c2)
	if err != nil {
		t.Fatal(err)
	}
	if got := cutResponses(t, raw); len(got) != 1 || got[0].status != 204 || hasField(got[0].header, "Content-Length") {
		t.Errorf("after 100 Continue: %q, want one 204 without Content-Length", raw)
	}
}
