package http1

import (
	"strings"
	"testing"
)

// The framing at its edges: each limit at the last value it accepts and
// the first it refuses, a bare LF wherever a line can end, and an
// incomplete input told from a refused one. Each case names the rule;
// most of them were found by mutation testing (tests/mutation), as a
// changed comparison that every other test let pass.

const chunkedHead = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"

// edgeLimits: a 16-byte body bound, so the encoded bound of a chunked
// body is 2*16 + maxLine.
var edgeLimits = Limits{MaxHeaderBytes: 512, MaxBodyBytes: 16}

// sizeLine is a chunk-size line of exactly n bytes (CRLF included) for
// size hex, padded with a chunk extension.
func sizeLine(t *testing.T, hex string, n int) string {
	t.Helper()
	pad := n - len(hex) - len(";x=") - 2
	if pad < 1 {
		t.Fatalf("sizeLine(%q, %d): too short", hex, n)
	}
	return hex + ";x=" + strings.Repeat("v", pad) + "\r\n"
}

func TestFramingEdges(t *testing.T) {
	maxEnc := int(maxChunkedEncoding(edgeLimits.MaxBodyBytes)) // 4128
	// first is one data byte framed by a size line long enough that the
	// encoded bound comes before the body bound.
	first := sizeLine(t, "1", 4000) + "x\r\n"
	tests := []struct {
		name string
		in   string
		want error // nil: a complete request
		body string
	}{
		// Content-Length.
		{"CL at MaxBodyBytes", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 16\r\n\r\n0123456789abcdef", nil, "0123456789abcdef"},
		{"CL over MaxBodyBytes", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 17\r\n\r\n0123456789abcdefg", ErrBodyTooLarge, ""},
		{"CL of 18 digits", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 000000000000000003\r\n\r\nabc", nil, "abc"},
		{"CL of 19 digits", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0000000000000000003\r\n\r\nabc", ErrContentLength, ""},
		// Chunk sizes against the body bound, data not yet arrived.
		{"chunk reaching MaxBodyBytes", chunkedHead + "10\r\n01234", ErrIncomplete, ""},
		{"chunk passing MaxBodyBytes", chunkedHead + "11\r\n01234", ErrBodyTooLarge, ""},
		{"chunks summing to MaxBodyBytes", chunkedHead + "8\r\n01234567\r\n8\r\n01234567\r\n0\r\n\r\n", nil, "0123456701234567"},
		{"chunks passing MaxBodyBytes", chunkedHead + "8\r\n01234567\r\n9\r\n", ErrBodyTooLarge, ""},
		// Against the encoded bound: a chunk whose size line, data and
		// CRLF end exactly at it may start; one byte more may not.
		{"chunk ending at the encoded bound", chunkedHead + first + sizeLine(t, "1", maxEnc-len(first)-3), ErrIncomplete, ""},
		{"chunk ending past the encoded bound", chunkedHead + first + sizeLine(t, "1", maxEnc-len(first)-2), ErrBodyTooLarge, ""},
		{"encoding at the encoded bound so far", chunkedHead + first + sizeLine(t, "1", maxEnc-len(first)-3) + "y\r\n", ErrIncomplete, ""},
		// Line lengths while waiting for an LF.
		{"size line of maxLine bytes, no LF yet", chunkedHead + "1;x=" + strings.Repeat("v", maxLine-4), ErrIncomplete, ""},
		{"size line over maxLine, no LF yet", chunkedHead + "1;x=" + strings.Repeat("v", maxLine-3), ErrChunkSize, ""},
		{"trailer line of maxLine bytes, no LF yet", chunkedHead + "0\r\nX: " + strings.Repeat("v", maxLine-3), ErrIncomplete, ""},
		{"trailer line over maxLine, no LF yet", chunkedHead + "0\r\nX: " + strings.Repeat("v", maxLine-2), ErrTrailer, ""},
		{"short trailer line after a long body", chunkedHead + first + "0\r\nX-T: v", ErrIncomplete, ""},
		// Bare LF and CR where a CRLF must be.
		{"bare LF as a size line", chunkedHead + "\nrest", ErrLineEnding, ""},
		{"bare LF after a trailer", chunkedHead + "0\r\nX-T: v\n\r\n", ErrLineEnding, ""},
		{"bare LF as the last line", chunkedHead + "0\r\n\n", ErrLineEnding, ""},
		{"CR then junk after data", chunkedHead + "3\r\nabc\rX0\r\n\r\n", ErrChunkData, ""},
		{"junk then LF after data", chunkedHead + "3\r\nabcX\n0\r\n\r\n", ErrChunkData, ""},
		{"data then CRLF only, so far", chunkedHead + "3\r\nabc\r\n", ErrIncomplete, ""},
		{"bare LF as the request line", "\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", ErrLineEnding, ""},
		{"bare LF ending the header block", "GET / HTTP/1.1\r\nHost: a\r\n\n", ErrLineEnding, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Request
			n, err := Parse([]byte(tt.in), &r, edgeLimits)
			if err != tt.want {
				t.Fatalf("Parse = %d, %v; want %v", n, err, tt.want)
			}
			if err == nil {
				if n != len(tt.in) || string(r.Body) != tt.body {
					t.Errorf("Parse = %d bytes of %d, body %q; want all, body %q", n, len(tt.in), r.Body, tt.body)
				}
			}
		})
	}
}

// TestHeaderLimitEdges: a request line or a header block of exactly
// MaxHeaderBytes with its LF still to come is incomplete; one byte more
// is refused without waiting.
func TestHeaderLimitEdges(t *testing.T) {
	lim := Limits{MaxHeaderBytes: 64, MaxBodyBytes: 16}
	line := "GET /" + strings.Repeat("a", 64-len("GET /")) // 64 bytes, no LF
	head := "GET / HTTP/1.1\r\nHost: a\r\nX: " + strings.Repeat("v", 64-len("GET / HTTP/1.1\r\nHost: a\r\nX: "))
	for _, tt := range []struct {
		name string
		in   string
		want error
	}{
		{"request line one short of the limit", line[:63], ErrIncomplete},
		{"request line at the limit", line, ErrURITooLong},
		{"header block one short of the limit", head[:63], ErrIncomplete},
		{"header block at the limit", head, ErrHeaderTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var r Request
			if _, err := Parse([]byte(tt.in), &r, lim); err != tt.want {
				t.Errorf("Parse(%d bytes) = %v, want %v", len(tt.in), err, tt.want)
			}
		})
	}
}

// TestConnectionEmptyElement: ",close" closes, as "close" does.
func TestConnectionEmptyElement(t *testing.T) {
	var r Request
	if _, err := Parse([]byte("GET / HTTP/1.1\r\nHost: a\r\nConnection: ,close\r\n\r\n"), &r, edgeLimits); err != nil {
		t.Fatal(err)
	}
	if r.KeepAlive {
		t.Error("Connection: ,close kept the connection alive")
	}
}

// TestHeaderLookupStopsAtNumHeaders: a Request reused for a shorter
// request does not find the longer one's fields.
func TestHeaderLookupStopsAtNumHeaders(t *testing.T) {
	var r Request
	if _, err := Parse([]byte("GET / HTTP/1.1\r\nHost: a\r\nX-Old: 1\r\n\r\n"), &r, edgeLimits); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), &r, edgeLimits); err != nil {
		t.Fatal(err)
	}
	if v := r.Header("X-Old"); v != nil {
		t.Errorf("Header(X-Old) = %q after a request without it", v)
	}
}

func TestExpect100(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n", true},
		{"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\n\r\n", true},
		{"POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n", false}, // RFC 9110 10.1.1
		{"POST / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n", false},
		{"POST / HTTP/1.1\r\nHost: a\r\nAccept: 100-continue\r\n\r\n", false}, // another 6-byte name
	} {
		var r Request
		if _, err := Parse([]byte(tt.in), &r, edgeLimits); err != nil {
			t.Fatalf("%q: %v", tt.in, err)
		}
		if r.Expect100 != tt.want {
			t.Errorf("%q: Expect100 = %v, want %v", tt.in, r.Expect100, tt.want)
		}
	}
}

func TestAbsoluteFormQueryOnly(t *testing.T) {
	var r Request
	if _, err := Parse([]byte("GET http://a?x=1 HTTP/1.1\r\nHost: a\r\n\r\n"), &r, edgeLimits); err != nil {
		t.Fatal(err)
	}
	if string(r.Path) != "/" || string(r.Query) != "x=1" {
		t.Errorf("path %q query %q, want / and x=1", r.Path, r.Query)
	}
}

// TestAlphabets checks the lookup tables byte by byte against the
// grammars written out here from the RFCs: tchar (RFC 9110 5.6.2) for
// tokens, pchar / "/" / "?" (RFC 3986 3.3, 3.4) for targets.
func TestAlphabets(t *testing.T) {
	const alnum = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	tchars := alnum + "!#$%&'*+-.^_`|~"
	pathChars := alnum + "-._~" + "!$&'()*+,;=" + ":@" + "/?"
	for c := 0; c < 256; c++ {
		s := string([]byte{byte(c)})
		if got, want := isToken(s), strings.Contains(tchars, s); got != want {
			t.Errorf("isToken(%q) = %v, want %v", s, got, want)
		}
		if got, want := validPath([]byte("/"+s)), strings.Contains(pathChars, s); got != want {
			t.Errorf("validPath(%q) = %v, want %v", "/"+s, got, want)
		}
	}
	for _, p := range []string{"/ %41", "/a%4", "/%g1", "/\x7f%41"} {
		if validPath([]byte(p)) {
			t.Errorf("validPath(%q) = true", p)
		}
	}
	if !validPath([]byte("/a%41b%2f")) {
		t.Error("validPath(/a%41b%2f) = false")
	}
}

func TestTrailerFieldName(t *testing.T) {
	for _, tr := range []string{":v", " X: v", "X : v", "X\x01: v"} {
		in := chunkedHead + "0\r\n" + tr + "\r\n\r\n"
		var r Request
		if _, err := Parse([]byte(in), &r, edgeLimits); err != ErrTrailer {
			t.Errorf("trailer %q: %v, want %v", tr, err, ErrTrailer)
		}
	}
}

func TestHostLiteralEdges(t *testing.T) {
	for _, tt := range []struct {
		host string
		ok   bool
	}{
		{"[::ffff:1.2.3.255]", true},
		{"[::ffff:1.2.3.256]", false},
		{"[::ffff:1.2.03.4]", false},
		{"[v1.x:y]", true},
		{"[v1.]", false},
		{"[::1", false},
		{"a%41b:80", true},
	} {
		if got := validHost([]byte(tt.host)); got != tt.ok {
			t.Errorf("validHost(%q) = %v, want %v", tt.host, got, tt.ok)
		}
	}
}

// TestFieldValueEveryPosition puts each refused byte at each position of
// a 16-byte value, so that the 8-bytes-at-a-time check and the tail
// loop both meet every one.
func TestFieldValueEveryPosition(t *testing.T) {
	for _, c := range []byte{0x00, 0x01, '\n', '\r', 0x1f, 0x7f} {
		for i := 0; i < 16; i++ {
			v := []byte(strings.Repeat("a", 16))
			v[i] = c
			if fieldValue(v) {
				t.Errorf("fieldValue accepts %q (byte %#x at %d)", v, c, i)
			}
		}
	}
	if !fieldValue([]byte("abcdefgh\tijklmn\x80\xff")) {
		t.Error("fieldValue refuses HTAB and obs-text")
	}
}

func TestFold(t *testing.T) {
	for _, tt := range []struct {
		b, s string
		eq   bool
	}{
		{"CLOSEZ", "closez", true},
		{"AZaz", "azaz", true},
		{"[", "{", false}, // '[' is 'Z'+1: not a letter
		{"@", "`", false}, // '@' is 'A'-1
	} {
		if got := equalFold([]byte(tt.b), tt.s); got != tt.eq {
			t.Errorf("equalFold(%q, %q) = %v", tt.b, tt.s, got)
		}
	}
	for _, tt := range []struct {
		b, s string
		ok   bool
	}{
		{"http://", "http://", true},
		{"HTTP://x", "http://", true},
		{"http:/", "http://", false},
		{"ftp://x", "http://", false},
	} {
		if got := hasPrefixFold([]byte(tt.b), tt.s); got != tt.ok {
			t.Errorf("hasPrefixFold(%q, %q) = %v", tt.b, tt.s, got)
		}
	}
}
