package http1

import (
	"bytes"
	"errors"
	"io"
	"net/http/httputil"
	"regexp"
	"testing"
)

// FuzzParse checks that no input panics the parser and that its results are
// self-consistent. The seeds run in every `go test`; `go test -fuzz
// FuzzParse ./server/http1` explores further.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /json?x=1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\n",
		"POST /in HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nbody\r\n0\r\nT: v\r\n\r\n",
		"GET http://h/p HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
		"\r\n\r\nOPTIONS * HTTP/1.1\r\nHost: a\r\n X: folded\r\n\r\n",
		"GET / HTTP/2.0\r\n\r\n",
		"\x00\xff\r\n",
		"GET /a%2Fb?x=%41 HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
		"GET http://[v1.x]:8/p HTTP/1.1\r\nHost: a b\r\n\r\n",
		"GET /\xff HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n000000000000000a\r\n0123456789\r\n0\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	lim := Limits{MaxHeaderBytes: 512, MaxBodyBytes: 64}
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := bytes.Clone(in) // Parse decodes chunked bodies in place
		var r Request
		n, err := Parse(in, &r, lim)
		switch err {
		case nil:
			if n <= 0 || n > len(in) {
				t.Fatalf("consumed %d of %d", n, len(in))
			}
			if (!r.Chunked && n-r.HeaderLen != len(r.Body)) || int64(len(r.Body)) > lim.MaxBodyBytes {
				t.Fatalf("body %d bytes, HeaderLen %d, n %d", len(r.Body), r.HeaderLen, n)
			}
			// The header block, after the empty lines Parse skips, is
			// within MaxHeaderBytes.
			start := 0
			for start+1 < len(orig) && orig[start] == '\r' && orig[start+1] == '\n' {
				start += 2
			}
			if r.HeaderLen <= start || r.HeaderLen-start > lim.MaxHeaderBytes || r.HeaderLen > n {
				t.Fatalf("HeaderLen %d (after %d bytes of empty lines), limit %d, request %d bytes", r.HeaderLen, start, lim.MaxHeaderBytes, n)
			}
			if len(r.Path) == 0 || (r.Path[0] != '/' && !bytes.Equal(r.Path, []byte("*"))) {
				t.Fatalf("path %q", r.Path)
			}
			if r.Minor == 1 && r.Host == nil {
				t.Fatalf("HTTP/1.1 request without Host accepted")
			}
			// Every strict prefix of an accepted request is incomplete:
			// neither an error nor a shorter request. That is what makes
			// any split of the bytes across reads parse the same.
			for i := range n {
				var r2 Request
				if m, err := Parse(bytes.Clone(orig[:i]), &r2, lim); err != ErrIncomplete {
					t.Fatalf("prefix %q of accepted %q: %d, %v", orig[:i], orig[:n], m, err)
				}
			}
		case ErrIncomplete:
			if n != 0 {
				t.Fatalf("incomplete but consumed %d", n)
			}
		default:
			e, ok := err.(*Error)
			if !ok || e.Status < 400 || e.Status > 599 {
				t.Fatalf("unexpected error %v", err)
			}
		}
	})
}

// longHexRun matches 17 or more hex digits at the start of a line: a chunk
// size NewChunkedReader refuses for its length alone (data lines match
// too, which only skips a comparison).
var longHexRun = regexp.MustCompile(`(?m)^[0-9a-fA-F]{17,}`)

// FuzzChunked decodes a chunked body with ChunkedState, all at once and
// resumed after every split point, and compares it with the standard
// library's decoder (httputil.NewChunkedReader). Ours is the stricter one
// (it also reads the trailer section, which NewChunkedReader leaves to its
// caller), so the comparison runs where ours accepts: the other decoder
// must then accept and produce the same bytes. Ours has two leniencies,
// both what RFC 9112 7.1 allows: whitespace before a chunk extension (BWS;
// NewChunkedReader refuses it) and chunk sizes of more than 16 hex digits
// (leading zeros; NewChunkedReader refuses a 17th digit whatever the
// value), so such inputs skip the comparison.
func FuzzChunked(f *testing.F) {
	for _, s := range []string{
		"0\r\n\r\n",
		"4\r\nbody\r\n0\r\n\r\n",
		"3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nT: v\r\n\r\n",
		"A\r\n0123456789\r\n1\r\nx\r\n0\r\n\r\n",
		"4\r\nbodyX\r\n0\r\n\r\n",
		"4\nbody\r\n0\r\n\r\n",
		"4 ;ext\r\nbody\r\n0\r\n\r\n",
		"fffffffffffffff\r\n",
		"1\r\na\r\n0\r\nT: a\rb\r\n\r\n",
		"2\r\n\r\n\r\n0\r\n\r\n",
		"000000000000000a\r\n0123456789\r\n0\r\n\r\n",
		"00000000000000000003\r\nabc\r\n0\r\n\r\n",
		"8000000000000000\r\n",
	} {
		f.Add([]byte(s))
	}
	const maxBody = 1 << 20
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 4096 {
			return
		}
		var whole ChunkedState
		buf := bytes.Clone(in)
		end, err := whole.decode(buf, maxBody, true)
		body := buf[:whole.dec]

		// Resumed after a split at every point, it must decide the same.
		for k := range len(in) {
			var st ChunkedState
			part := bytes.Clone(in[:k])
			pend, perr := st.decode(part, maxBody, true)
			if err == nil && k >= end {
				if perr != nil || pend != end {
					t.Fatalf("prefix %q holds accepted %q: end %d, %v", in[:k], in[:end], pend, perr)
				}
				continue
			}
			if perr != ErrIncomplete {
				if err == nil {
					t.Fatalf("prefix %q of accepted %q: %v, want ErrIncomplete", in[:k], in, perr)
				}
				continue // an error already in the prefix
			}
			part = append(part, in[k:]...)
			rend, rerr := st.decode(part, maxBody, true)
			if rerr != err || rend != end || (err == nil && !bytes.Equal(part[:st.dec], body)) {
				t.Fatalf("split at %d of %q: end %d, %v, body %q; all at once: end %d, %v, body %q",
					k, in, rend, rerr, part[:st.dec], end, err, body)
			}
		}

		if err != nil || bytes.Contains(in[:end], []byte(" ;")) || bytes.Contains(in[:end], []byte("\t;")) || longHexRun.Match(in[:end]) {
			return
		}
		ref, rerr := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(in[:end])))
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			t.Fatalf("%q: we decode %q, NewChunkedReader fails: %v", in[:end], body, rerr)
		}
		if !bytes.Equal(ref, body) {
			t.Fatalf("%q: we decode %q, NewChunkedReader %q", in[:end], body, ref)
		}
	})
}
