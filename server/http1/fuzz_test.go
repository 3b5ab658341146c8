package http1

import (
	"bytes"
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
			if r.HeaderLen > lim.MaxHeaderBytes+n-r.HeaderLen+len(in) {
				t.Fatalf("HeaderLen %d beyond limit", r.HeaderLen)
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
