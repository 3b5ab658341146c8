package http1

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var testLimits = Limits{MaxHeaderBytes: 512, MaxBodyBytes: 16}

func TestParseGood(t *testing.T) {
	tests := []struct {
		name, in        string
		n               int // 0 means len(in)
		method, path, q string
		minor           int
		keepAlive       bool
		body            string
		host            string
	}{
		{name: "minimal", in: "GET / HTTP/1.1\r\nHost: a\r\n\r\n", method: "GET", path: "/", minor: 1, keepAlive: true, host: "a"},
		{name: "query", in: "GET /json?x=1&y HTTP/1.1\r\nHost: a\r\n\r\n", method: "GET", path: "/json", q: "x=1&y", minor: 1, keepAlive: true, host: "a"},
		{name: "empty query", in: "GET /p? HTTP/1.1\r\nHost: a\r\n\r\n", method: "GET", path: "/p", q: "", minor: 1, keepAlive: true, host: "a"},
		{name: "http10 default close", in: "GET / HTTP/1.0\r\n\r\n", method: "GET", path: "/", minor: 0, keepAlive: false},
		{name: "http10 keep-alive", in: "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", method: "GET", path: "/", minor: 0, keepAlive: true},
		{name: "connection close", in: "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", method: "GET", path: "/", minor: 1, keepAlive: false, host: "a"},
		{name: "connection list", in: "GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade, CLOSE\r\n\r\n", method: "GET", path: "/", minor: 1, keepAlive: false, host: "a"},
		{name: "http12 served as 11", in: "GET / HTTP/1.2\r\nHost: a\r\n\r\n", method: "GET", path: "/", minor: 1, keepAlive: true, host: "a"},
		{name: "body", in: "POST /in HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhelloGET", n: 54, method: "POST", path: "/in", minor: 1, keepAlive: true, body: "hello", host: "a"},
		{name: "duplicate equal CL", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\ncontent-length: 1\r\n\r\nx", method: "POST", path: "/", minor: 1, keepAlive: true, body: "x", host: "a"},
		{name: "zero CL", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", method: "POST", path: "/", minor: 1, keepAlive: true, host: "a"},
		{name: "leading CRLF", in: "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", method: "GET", path: "/", minor: 1, keepAlive: true, host: "a"},
		{name: "OWS trimmed", in: "GET / HTTP/1.1\r\nHost: \t a \t\r\n\r\n", method: "GET", path: "/", minor: 1, keepAlive: true, host: "a"},
		{name: "empty value", in: "GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\n\r\n", method: "GET", path: "/", minor: 1, keepAlive: true, host: "a"},
		{name: "obs-text value", in: "GET / HTTP/1.1\r\nHost: a\r\nX: caf\xc3\xa9\r\n\r\n", method: "GET", path: "/", minor: 1, keepAlive: true, host: "a"},
		{name: "absolute form", in: "GET http://example.com/x?y HTTP/1.1\r\nHost: a\r\n\r\n", method: "GET", path: "/x", q: "y", minor: 1, keepAlive: true, host: "a"},
		{name: "absolute form no path", in: "GET http://example.com HTTP/1.1\r\nHost: a\r\n\r\n", method: "GET", path: "/", minor: 1, keepAlive: true, host: "a"},
		{name: "asterisk", in: "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", method: "OPTIONS", path: "*", minor: 1, keepAlive: true, host: "a"},
		{name: "chunked", in: "POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\nA\r\n, world!!!\r\n0\r\nX-Trailer: t\r\n\r\n", method: "POST", path: "/up", minor: 1, keepAlive: true, body: "hello, world!!!", host: "a"},
		{name: "chunked empty then next", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n0\r\n\r\nGET", n: 61, method: "POST", path: "/", minor: 1, keepAlive: true, host: "a"},
		{name: "target with every allowed byte", in: "GET /a-._~%2F!$&'()*+,;=:@/?q=%41/?:@!$&'()*+,;= HTTP/1.1\r\nHost: a\r\n\r\n", method: "GET", path: "/a-._~%2F!$&'()*+,;=:@/", q: "q=%41/?:@!$&'()*+,;=", minor: 1, keepAlive: true, host: "a"},
		{name: "absolute form IPv6 authority", in: "GET http://[::1]:8080/x HTTP/1.1\r\nHost: a\r\n\r\n", method: "GET", path: "/x", minor: 1, keepAlive: true, host: "a"},
		{name: "absolute form empty port", in: "GET https://a:/x HTTP/1.1\r\nHost: a\r\n\r\n", method: "GET", path: "/x", minor: 1, keepAlive: true, host: "a"},
		{name: "empty Host", in: "GET / HTTP/1.1\r\nHost:\r\n\r\n", method: "GET", path: "/", minor: 1, keepAlive: true, host: ""},
		{name: "Host with port", in: "GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n", method: "GET", path: "/", minor: 1, keepAlive: true, host: "127.0.0.1:8080"},
		{name: "Host IPv6", in: "GET / HTTP/1.1\r\nHost: [2001:db8::1]:80\r\n\r\n", method: "GET", path: "/", minor: 1, keepAlive: true, host: "[2001:db8::1]:80"},
		{name: "http10 Host", in: "GET / HTTP/1.0\r\nHost: a.example\r\n\r\n", method: "GET", path: "/", minor: 0, host: "a.example"},
		{name: "zero-padded 16-digit chunk size", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n000000000000000a\r\n0123456789\r\n0\r\n\r\n", method: "POST", path: "/", minor: 1, keepAlive: true, body: "0123456789", host: "a"},
		{name: "zero-padded 40-digit chunk size", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + strings.Repeat("0", 39) + "3\r\nabc\r\n00000000000000000000\r\n\r\n", method: "POST", path: "/", minor: 1, keepAlive: true, body: "abc", host: "a"},
		{name: "pipelined first only", in: "GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n", n: 28, method: "GET", path: "/a", minor: 1, keepAlive: true, host: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Request
			n, err := Parse([]byte(tt.in), &r, testLimits)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := tt.n
			if want == 0 {
				want = len(tt.in)
			}
			if n != want {
				t.Errorf("n = %d, want %d", n, want)
			}
			if string(r.Method) != tt.method || string(r.Path) != tt.path || string(r.Query) != tt.q {
				t.Errorf("method/path/query = %q %q %q, want %q %q %q", r.Method, r.Path, r.Query, tt.method, tt.path, tt.q)
			}
			if r.Minor != tt.minor || r.KeepAlive != tt.keepAlive {
				t.Errorf("minor/keepalive = %d/%v, want %d/%v", r.Minor, r.KeepAlive, tt.minor, tt.keepAlive)
			}
			if string(r.Body) != tt.body || string(r.Host) != tt.host {
				t.Errorf("body/host = %q/%q, want %q/%q", r.Body, r.Host, tt.body, tt.host)
			}
		})
	}
}

func TestParseHeaderLookup(t *testing.T) {
	var r Request
	in := "GET / HTTP/1.1\r\nHost: a\r\nX-Trace-Id: 42\r\n\r\n"
	if _, err := Parse([]byte(in), &r, testLimits); err != nil {
		t.Fatal(err)
	}
	if got := r.Header("x-trace-ID"); string(got) != "42" {
		t.Errorf("Header = %q, want 42", got)
	}
	if got := r.Header("missing"); got != nil {
		t.Errorf("Header(missing) = %q, want nil", got)
	}
}

// TestParseBad covers every class of bad input and the status it maps to.
func TestParseBad(t *testing.T) {
	long := strings.Repeat("a", 600)
	many := strings.Repeat("X:\r\n", MaxHeaders+1)
	tests := []struct {
		name, in string
		want     *Error
	}{
		{"garbage", "\x00\x01\x02 / HTTP/1.1\r\n\r\n", ErrMethod},
		{"garbage partial", "\x16\x03\x01", ErrMethod},
		{"leading space", " GET / HTTP/1.1\r\n\r\n", ErrMethod},
		{"no target", "GET\r\n\r\n", ErrRequestLine},
		{"double space", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", ErrRequestLine},
		{"no version", "GET /\r\n\r\n", ErrRequestLine},
		{"bare LF request line", "GET / HTTP/1.1\nHost: a\r\n\r\n", ErrLineEnding},
		{"bad target", "GET x HTTP/1.1\r\nHost: a\r\n\r\n", ErrTarget},
		{"ctl in target", "GET /\x01 HTTP/1.1\r\nHost: a\r\n\r\n", ErrTarget},
		{"lower http", "GET / http/1.1\r\nHost: a\r\n\r\n", ErrVersion},
		{"version trailing", "GET / HTTP/1.1 x\r\nHost: a\r\n\r\n", ErrVersion},
		{"version junk", "GET / HTTP/1.x\r\nHost: a\r\n\r\n", ErrVersion},
		{"http2", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", ErrVersionSupported},
		{"http09", "GET / HTTP/0.9\r\n\r\n", ErrVersionSupported},
		{"bare LF header", "GET / HTTP/1.1\r\nHost: a\n\r\n", ErrLineEnding},
		{"obs fold", "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", ErrObsFold},
		{"space before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", ErrHeaderName},
		{"no colon", "GET / HTTP/1.1\r\nHost a\r\n\r\n", ErrHeaderName},
		{"empty name", "GET / HTTP/1.1\r\n: a\r\n\r\n", ErrHeaderName},
		{"ctl in value", "GET / HTTP/1.1\r\nHost: a\x01b\r\n\r\n", ErrHeaderValue},
		{"nul in value", "GET / HTTP/1.1\r\nHost: a\x00\r\n\r\n", ErrHeaderValue},
		{"request target too long", "GET /" + long + " HTTP/1.1\r\n\r\n", ErrURITooLong},
		{"request target too long partial", "GET /" + long, ErrURITooLong},
		{"request target too long, query", "GET /json?" + long + " HTTP/1.1\r\nHost: a\r\n\r\n", ErrURITooLong},
		{"request target too long, version cut", "GET /" + long[:497] + " HTTP/1.1\r\n\r\n", ErrURITooLong},
		{"request target too long, absolute", "GET http://a/" + long + " HTTP/1.1\r\n\r\n", ErrURITooLong},
		{"bad byte in too long target", "GET /\xff" + long, ErrTarget},
		{"junk after target too long", "GET / " + long + "\r\n\r\n", ErrVersion},
		{"method too long", strings.ToUpper(long) + " / HTTP/1.1\r\n\r\n", ErrMethodTooLong},
		{"method too long partial", strings.ToUpper(long), ErrMethodTooLong},
		{"0xff in target", "GET /\xff HTTP/1.1\r\nHost: a\r\n\r\n", ErrTarget},
		{"0xff in target partial", "GET /js\xff", ErrTarget},
		{"0x80 in query", "GET /?\x80 HTTP/1.1\r\nHost: a\r\n\r\n", ErrTarget},
		{"fragment", "GET /#x HTTP/1.1\r\nHost: a\r\n\r\n", ErrTarget},
		{"quote in target", "GET /\"x HTTP/1.1\r\nHost: a\r\n\r\n", ErrTarget},
		{"angle in target", "GET /<x> HTTP/1.1\r\nHost: a\r\n\r\n", ErrTarget},
		{"brace in query", "GET /?{} HTTP/1.1\r\nHost: a\r\n\r\n", ErrTarget},
		{"backslash in target", "GET /a\\b HTTP/1.1\r\nHost: a\r\n\r\n", ErrTarget},
		{"caret, backtick and bar", "GET /^`| HTTP/1.1\r\nHost: a\r\n\r\n", ErrTarget},
		{"bracket in path", "GET /[x] HTTP/1.1\r\nHost: a\r\n\r\n", ErrTarget},
		{"bad percent", "GET /%zz HTTP/1.1\r\nHost: a\r\n\r\n", ErrTarget},
		{"percent one digit", "GET /%4 HTTP/1.1\r\nHost: a\r\n\r\n", ErrTarget},
		{"percent at end of query", "GET /?a% HTTP/1.1\r\nHost: a\r\n\r\n", ErrTarget},
		{"absolute form empty host", "GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n", ErrTarget},
		{"absolute form only port", "GET http://:80/x HTTP/1.1\r\nHost: a\r\n\r\n", ErrTarget},
		{"absolute form userinfo", "GET http://u@a/x HTTP/1.1\r\nHost: a\r\n\r\n", ErrTarget},
		{"absolute form bad port", "GET http://a:xy/x HTTP/1.1\r\nHost: a\r\n\r\n", ErrTarget},
		{"absolute form open bracket", "GET http://[::1/x HTTP/1.1\r\nHost: a\r\n\r\n", ErrTarget},
		{"absolute form bad query", "GET http://a?\xff HTTP/1.1\r\nHost: a\r\n\r\n", ErrTarget},
		{"Host with space", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", ErrHost},
		{"Host with slash", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", ErrHost},
		{"Host bad port", "GET / HTTP/1.1\r\nHost: a:xy\r\n\r\n", ErrHost},
		{"Host list", "GET / HTTP/1.1\r\nHost: a, b\r\n\r\n", ErrHost},
		{"Host two ports", "GET / HTTP/1.1\r\nHost: a:1:2\r\n\r\n", ErrHost},
		{"Host userinfo", "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", ErrHost},
		{"Host obs-text", "GET / HTTP/1.1\r\nHost: caf\xc3\xa9\r\n\r\n", ErrHost},
		{"Host bad percent", "GET / HTTP/1.1\r\nHost: a%g0\r\n\r\n", ErrHost},
		{"Host unclosed IPv6", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", ErrHost},
		{"Host junk after IPv6", "GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n", ErrHost},
		{"Host short IPv6", "GET / HTTP/1.1\r\nHost: [1:2]\r\n\r\n", ErrHost},
		{"Host IPv6 zone", "GET / HTTP/1.1\r\nHost: [fe80::1%25eth0]\r\n\r\n", ErrHost},
		{"Host in HTTP/1.0", "GET / HTTP/1.0\r\nHost: a b\r\n\r\n", ErrHost},
		{"headers too large", "GET / HTTP/1.1\r\nHost: a\r\nX: " + long + "\r\n\r\n", ErrHeaderTooLarge},
		{"headers too large partial", "GET / HTTP/1.1\r\nHost: a\r\nX: " + long, ErrHeaderTooLarge},
		{"too many headers", "GET / HTTP/1.1\r\nHost: a\r\n" + many + "\r\n", ErrTooManyHeaders},
		{"CL not a number", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n", ErrContentLength},
		{"CL negative", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", ErrContentLength},
		{"CL plus", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\n", ErrContentLength},
		{"CL list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 1\r\n\r\n", ErrContentLength},
		{"CL empty", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", ErrContentLength},
		{"CL overflow", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n", ErrContentLength},
		{"CL conflicting", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", ErrContentLength},
		{"CL and TE", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", ErrCLAndTE},
		{"TE and CL", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", ErrCLAndTE},
		{"gzip, chunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", ErrTransferCoding},
		{"chunked in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", ErrChunkedHTTP10},
		{"chunk size not hex", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", ErrChunkSize},
		{"chunk size empty", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\r\n", ErrChunkSize},
		{"chunk size 2^60", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n", ErrBodyTooLarge},
		{"chunk size max int64", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n7fffffffffffffff\r\n", ErrBodyTooLarge},
		{"chunk size 2^63 overflows", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n8000000000000000\r\n", ErrChunkSize},
		{"chunk size 2^64 overflows", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n", ErrChunkSize},
		{"chunk size overflow after zeros", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0000fffffffffffffffff\r\n", ErrChunkSize},
		{"zero-padded chunk size over the limit", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0000000000000011\r\n", ErrBodyTooLarge},
		{"chunk size junk", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1 x\r\n", ErrChunkSize},
		{"chunk ext ctl", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1;a\x01\r\n", ErrChunkSize},
		{"chunk size bare LF", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\nx\r\n", ErrLineEnding},
		{"chunk data unterminated", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy\r\n", ErrChunkData},
		{"chunked too large", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n0123456789abcdef\r\n1\r\n", ErrBodyTooLarge},
		{"chunked framing too large", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + strings.Repeat("1;"+strings.Repeat("e", 1000)+"\r\nx\r\n", 6), ErrBodyTooLarge},
		{"bad trailer", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nno colon\r\n\r\n", ErrTrailer},
		{"TE not chunked last", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", ErrTransferEncoding},
		{"TE empty", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n\r\n", ErrTransferEncoding},
		{"body too large", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 17\r\n\r\n", ErrBodyTooLarge},
		{"missing host", "GET / HTTP/1.1\r\n\r\n", ErrMissingHost},
		{"duplicate host", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", ErrDuplicateHost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Request
			_, err := Parse([]byte(tt.in), &r, testLimits)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse(%q) = %v, want %v", tt.in, err, tt.want)
			}
			if e != tt.want {
				t.Errorf("Parse(%q) = %v (%d), want %v (%d)", tt.in, e, e.Status, tt.want, tt.want.Status)
			}
		})
	}
}

// TestParseIncomplete checks that every strict prefix of a valid request is
// incomplete, never an error: that is what makes byte-at-a-time input work.
func TestParseIncomplete(t *testing.T) {
	in := "\r\nPOST /p?q HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nbody"
	for i := range len(in) {
		var r Request
		n, err := Parse([]byte(in[:i]), &r, testLimits)
		if err != ErrIncomplete || n != 0 {
			t.Fatalf("Parse(%q) = %d, %v; want 0, ErrIncomplete", in[:i], n, err)
		}
	}
	var r Request
	if n, err := Parse([]byte(in), &r, testLimits); err != nil || n != len(in) {
		t.Fatalf("Parse(full) = %d, %v", n, err)
	}
	ch := "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nT: 1\r\n\r\n"
	for i := range len(ch) {
		buf := []byte(ch[:i])
		if n, err := Parse(buf, &r, testLimits); err != ErrIncomplete || n != 0 || string(buf) != ch[:i] {
			t.Fatalf("chunked prefix %q = %d, %v (buffer now %q)", ch[:i], n, err, buf)
		}
	}
	// HeaderLen is known while the body is still missing.
	hdr := strings.Index(in, "\r\n\r\n") + 4
	if _, err := Parse([]byte(in[:hdr]), &r, testLimits); err != ErrIncomplete || r.HeaderLen != hdr || r.ContentLength != 4 {
		t.Fatalf("header-only: err=%v HeaderLen=%d CL=%d, want %d, 4", err, r.HeaderLen, r.ContentLength, hdr)
	}
}

func TestParseAllocs(t *testing.T) {
	in := []byte("GET /json HTTP/1.1\r\nHost: localhost:8080\r\nUser-Agent: wrk\r\nAccept: */*\r\nConnection: keep-alive\r\n\r\n")
	var r Request
	lim := Limits{MaxHeaderBytes: 8192, MaxBodyBytes: 1 << 20}
	if a := testing.AllocsPerRun(1000, func() {
		if _, err := Parse(in, &r, lim); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("Parse allocates %v times per request, want 0", a)
	}
}

// threadTime is the CPU time the calling thread has used.
func threadTime(t *testing.T) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

func BenchmarkParse(b *testing.B) {
	in := []byte("GET /json HTTP/1.1\r\nHost: localhost:8080\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n")
	var r Request
	lim := Limits{MaxHeaderBytes: 8192, MaxBodyBytes: 1 << 20}
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := Parse(in, &r, lim); err != nil {
			b.Fatal(err)
		}
	}
}

// TestParseResumeLinear feeds chunked bodies of two sizes, 16x apart, to
// ParseResume 1 KiB at a time the way the server does (each piece
// appended to the same buffer, the request parsed again from its start
// with the state kept), and compares the CPU time. Re-decoding the body
// from its first chunk at every piece makes the cost quadratic (a ratio
// near 256); resuming keeps it linear (near 16). No system call runs
// here, so the ratio is the decoder's own. The time is the thread's CPU
// time, not the wall clock: on a loaded machine a run preempted midway
// showed ratios of 70 in wall time while the decoder was linear.
func TestParseResumeLinear(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const chunkData = 64
	head := []byte("POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
	piece := []byte(strings.Repeat(fmt.Sprintf("%x\r\n%s\r\n", chunkData, strings.Repeat("c", chunkData)), 1024/chunkData))
	lim := Limits{MaxHeaderBytes: 8192, MaxBodyBytes: 8 << 20}
	feed := func(pieces int) time.Duration {
		buf := make([]byte, 0, len(head)+pieces*len(piece)+8)
		buf = append(buf, head...)
		var r Request
		var st ChunkedState
		start := threadTime(t)
		for range pieces {
			buf = append(buf, piece...)
			if _, err := ParseResume(buf, &r, lim, &st); err != ErrIncomplete {
				t.Fatalf("after a piece: %v", err)
			}
		}
		buf = append(buf, "0\r\n\r\n"...)
		n, err := ParseResume(buf, &r, lim, &st)
		d := threadTime(t) - start
		if err != nil || n != len(buf) || len(r.Body) != pieces*1024 {
			t.Fatalf("end: n %d of %d, body %d bytes, %v", n, len(buf), len(r.Body), err)
		}
		return d
	}
	const small, large = 64, 1024
	a, b := time.Duration(1<<62), time.Duration(1<<62)
	for range 7 {
		a = min(a, feed(small))
		b = min(b, feed(large))
	}
	ratio := float64(b) / float64(a)
	t.Logf("%v for %d KiB, %v for %d KiB: ratio %.1f for %dx the bytes", a, small, b, large, ratio, large/small)
	if ratio > 3*large/small {
		t.Errorf("%dx the body cost %.1fx the time: the decoder is not linear", large/small, ratio)
	}
}

// TestRequestLineLimit checks the edge between 414 and 431 (RFC 9112 3):
// a request line that fits within MaxHeaderBytes is parsed, and a header
// block that then runs past the limit is 431; a request line that does
// not fit is 414, one byte further.
func TestRequestLineLimit(t *testing.T) {
	lim := Limits{MaxHeaderBytes: 512, MaxBodyBytes: 16}
	for _, tt := range []struct {
		line int // bytes of the request line, CRLF included
		want error
	}{
		{510, nil}, // with the empty line: 512 bytes, exactly the limit
		{511, ErrHeaderTooLarge},
		{512, ErrHeaderTooLarge},
		{513, ErrURITooLong},
	} {
		in := "GET /" + strings.Repeat("a", tt.line-len("GET / HTTP/1.0\r\n")) + " HTTP/1.0\r\n\r\n"
		var r Request
		n, err := Parse([]byte(in), &r, lim)
		if err != tt.want || (err == nil && n != len(in)) {
			t.Errorf("request line of %d bytes: %d, %v; want %v", tt.line, n, err, tt.want)
		}
	}
}

// TestValidHost checks the host syntax of RFC 3986 3.2.2 (uri-host, then
// an optional port) that Host values and absolute-form authorities are
// held to, IPv6 and IPvFuture literals included.
func TestValidHost(t *testing.T) {
	for _, tt := range []struct {
		host string
		ok   bool
	}{
		{"", true},
		{"a", true},
		{"example.com", true},
		{"example.com:", true}, // port = *DIGIT
		{"example.com:8080", true},
		{"xn--caf-dma.example", true},
		{"a%41b", true},
		{"!$&'()*+,;=-._~", true},
		{"999.1.1.1", true}, // not an IPv4address, but a valid reg-name
		{"127.0.0.1:80", true},
		{"[::]", true},
		{"[::1]", true},
		{"[::1]:443", true},
		{"[1::]", true},
		{"[1:2:3:4:5:6:7:8]", true},
		{"[1:2:3:4:5:6:7::]", true},
		{"[::2:3:4:5:6:7:8]", true},
		{"[2001:DB8::a:B]", true},
		{"[::ffff:192.0.2.1]", true},
		{"[1:2:3:4:5:6:192.0.2.1]", true},
		{"[::0.0.0.0]", true},
		{"[v1.a:b!]", true},
		{"[VF.x]", true},
		{"a b", false},
		{"a/b", false},
		{"a?b", false},
		{"a#b", false},
		{"a:xy", false},
		{"a, b", false},
		{"a:1:2", false},
		{"u@a", false},
		{"a%4", false},
		{"a%zz", false},
		{"caf\xc3\xa9", false},
		{"a\x00", false},
		{"[", false},
		{"[]", false},
		{"[::1", false},
		{"::1", false},
		{"[::1]x", false},
		{"[::1]:x", false},
		{"[1:2]", false},
		{"[:1]", false},
		{"[1:]", false},
		{"[1::2::3]", false},
		{"[1:::2]", false},
		{"[12345::]", false},
		{"[g::]", false},
		{"[1:2:3:4:5:6:7:8:9]", false},
		{"[1:2:3:4:5:6:7:8::]", false},
		{"[::1:2:3:4:5:6:7:8]", false},
		{"[1:2:3:4:5:6:7:192.0.2.1]", false},
		{"[1:2:3:4:5:6::192.0.2.1]", false},
		{"[::256.0.0.1]", false},
		{"[::01.0.0.1]", false},
		{"[::1.2.3]", false},
		{"[::1.2.3.4.5]", false},
		{"[::1.2.3.4:5]", false},
		{"[::1.2.3.4]:5", true},
		{"[fe80::1%25eth0]", false},
		{"[v1.]", false},
		{"[v.x]", false},
		{"[vg.x]", false},
		{"[v1.x/]", false},
	} {
		if got := validHost([]byte(tt.host)); got != tt.ok {
			t.Errorf("validHost(%q) = %v, want %v", tt.host, got, tt.ok)
		}
	}
}

// BenchmarkParseAPI is a request of a typical JSON API: a longer path and
// query, where the per-byte check of the target shows if it costs.
func BenchmarkParseAPI(b *testing.B) {
	in := []byte("GET /api/v1/users/12345/orders?fields=id,total,created_at&limit=50&cursor=eyJpZCI6MTIzfQ%3D%3D HTTP/1.1\r\nHost: api.example.com:8443\r\nUser-Agent: wrk\r\nAccept: application/json\r\nAuthorization: Bearer abcdefghijklmnopqrstuvwxyz0123456789\r\n\r\n")
	var r Request
	lim := Limits{MaxHeaderBytes: 8192, MaxBodyBytes: 1 << 20}
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := Parse(in, &r, lim); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseChunked is a small chunked upload: the framing decision
// and the in-place decoding.
func BenchmarkParseChunked(b *testing.B) {
	src := []byte("POST /up HTTP/1.1\r\nHost: localhost:8080\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n0123456789abcdef\r\n000a\r\n0123456789\r\n0\r\n\r\n")
	in := make([]byte, len(src))
	var r Request
	lim := Limits{MaxHeaderBytes: 8192, MaxBodyBytes: 1 << 20}
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		copy(in, src) // Parse decodes in place
		if _, err := Parse(in, &r, lim); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFieldValueWords checks the word-at-a-time check against the byte
// table for every byte value at every position of values of 1 to 17
// bytes (two words and a tail), among bytes of either kind of word.
func TestFieldValueWords(t *testing.T) {
	for n := 1; n <= 17; n++ {
		for pos := range n {
			for c := range 256 {
				for _, fill := range []byte{'a', 0x80, 0xff, '\t'} {
					b := make([]byte, 0, n)
					for i := range n {
						b = append(b, fill)
						if i == pos {
							b[i] = byte(c)
						}
					}
					if got, want := fieldValue(b), isFieldValue(b); got != want {
						t.Fatalf("fieldValue(%q) = %v, byte table says %v", b, got, want)
					}
				}
			}
		}
	}
}
