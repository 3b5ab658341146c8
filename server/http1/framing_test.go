package http1

import (
	"bytes"
	"testing"
)

// TestFramingPairs sends every pairing of Content-Length and
// Transfer-Encoding that can make two HTTP implementations disagree on
// where a request ends (request smuggling), and checks the status RFC
// 9112 6.1 and 6.3 ask for. Each refused request carries a second
// request where a wrong reading would find one; each accepted request is
// followed by one, which must be where Parse says the first ends.
func TestFramingPairs(t *testing.T) {
	const head = "POST / HTTP/1.1\r\nHost: a\r\n"
	const next = "GET /next HTTP/1.1\r\nHost: a\r\n\r\n"
	chunked := "5\r\nhello\r\n0\r\n\r\n" // 15 bytes, 5 decoded
	tests := []struct {
		name    string
		in      string // the request under test; next is appended
		want    *Error // nil: accepted
		body    string // the body, when accepted
		chunked bool
	}{
		// Content-Length together with Transfer-Encoding: RFC 9112 6.1
		// lets a server refuse it, and we do (400), whatever the values.
		{name: "CL 0 then TE chunked", in: head + "Content-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked, want: ErrCLAndTE},
		{name: "TE chunked then CL 0", in: head + "Transfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n" + chunked, want: ErrCLAndTE},
		{name: "CL equal to the encoding", in: head + "Content-Length: 15\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked, want: ErrCLAndTE},
		{name: "CL equal to the decoded body", in: head + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked, want: ErrCLAndTE},
		{name: "CL shorter than the encoding", in: head + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked, want: ErrCLAndTE},
		{name: "CL longer than the encoding", in: head + "Content-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked, want: ErrCLAndTE},
		{name: "two equal CLs and TE", in: head + "Content-Length: 15\r\nTransfer-Encoding: chunked\r\nContent-Length: 15\r\n\r\n" + chunked, want: ErrCLAndTE},
		{name: "CL and TE chunked, gzip", in: head + "Content-Length: 15\r\nTransfer-Encoding: chunked, gzip\r\n\r\n" + chunked, want: ErrCLAndTE},
		{name: "CL and TE gzip, chunked", in: head + "Content-Length: 15\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" + chunked, want: ErrCLAndTE},
		{name: "CL 0 and TE with tab", in: head + "Content-Length: 0\r\nTransfer-Encoding:\tchunked\r\n\r\n" + chunked, want: ErrCLAndTE},
		{name: "CL 0 and TE upper case", in: head + "content-length: 0\r\nTRANSFER-ENCODING: CHUNKED\r\n\r\n" + chunked, want: ErrCLAndTE},

		// Content-Length alone, duplicated: RFC 9110 8.6 lets a recipient
		// take identical field lines as one; different values are an
		// invalid length (RFC 9112 6.3: 400). A list in one line is
		// refused even when its values agree: we never combine.
		{name: "two equal CLs", in: head + "Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello", body: "hello"},
		{name: "two different CLs", in: head + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", want: ErrContentLength},
		{name: "two CLs, 0 first", in: head + "Content-Length: 0\r\nContent-Length: 5\r\n\r\nhello", want: ErrContentLength},
		{name: "CL list 5, 5", in: head + "Content-Length: 5, 5\r\n\r\nhello", want: ErrContentLength},
		{name: "CL list 5,5", in: head + "Content-Length: 5,5\r\n\r\nhello", want: ErrContentLength},
		{name: "CL list 5, 6", in: head + "Content-Length: 5, 6\r\n\r\nhello!", want: ErrContentLength},
		{name: "CL with a sign", in: head + "Content-Length: +5\r\n\r\nhello", want: ErrContentLength},
		{name: "CL 0", in: head + "Content-Length: 0\r\n\r\n"},
		{name: "CL 5", in: head + "Content-Length: 5\r\n\r\nhello", body: "hello"},

		// Transfer-Encoding alone: chunked must be the final coding and
		// appear once (400); codings under it we do not decode (501).
		{name: "TE chunked", in: head + "Transfer-Encoding: chunked\r\n\r\n" + chunked, body: "hello", chunked: true},
		{name: "TE chunked, gzip", in: head + "Transfer-Encoding: chunked, gzip\r\n\r\n" + chunked, want: ErrTransferEncoding},
		{name: "TE gzip", in: head + "Transfer-Encoding: gzip\r\n\r\n" + chunked, want: ErrTransferEncoding},
		{name: "TE gzip, chunked", in: head + "Transfer-Encoding: gzip, chunked\r\n\r\n" + chunked, want: ErrTransferCoding},
		{name: "TE chunked, chunked", in: head + "Transfer-Encoding: chunked, chunked\r\n\r\n" + chunked, want: ErrTransferEncoding},
		{name: "TE chunked twice in two lines", in: head + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked, want: ErrTransferEncoding},
		{name: "TE gzip then TE chunked", in: head + "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked, want: ErrTransferEncoding},
		{name: "TE chunked with a comma after", in: head + "Transfer-Encoding: chunked,\r\n\r\n" + chunked, want: ErrTransferEncoding},
		{name: "TE empty element first", in: head + "Transfer-Encoding: , chunked\r\n\r\n" + chunked, want: ErrTransferEncoding},
		{name: "TE empty", in: head + "Transfer-Encoding:\r\n\r\n" + chunked, want: ErrTransferEncoding},
		{name: "TE chunked with a parameter", in: head + "Transfer-Encoding: chunked;q=1\r\n\r\n" + chunked, want: ErrTransferEncoding},
		{name: "TE chunk", in: head + "Transfer-Encoding: chunk\r\n\r\n" + chunked, want: ErrTransferEncoding},
		{name: "TE with space before the colon", in: head + "Transfer-Encoding : chunked\r\n\r\n" + chunked, want: ErrHeaderName},
		{name: "TE folded", in: head + "Transfer-Encoding: gzip,\r\n chunked\r\n\r\n" + chunked, want: ErrObsFold},

		// HTTP/1.0 has no Transfer-Encoding: RFC 9112 6.1 has its framing
		// treated as faulty, with or without Content-Length.
		{name: "TE in HTTP/1.0", in: "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked, want: ErrChunkedHTTP10},
		{name: "TE and CL in HTTP/1.0", in: "POST / HTTP/1.0\r\nContent-Length: 15\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked, want: ErrChunkedHTTP10},
		{name: "TE gzip, chunked in HTTP/1.0", in: "POST / HTTP/1.0\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" + chunked, want: ErrChunkedHTTP10},
		{name: "CL in HTTP/1.0", in: "POST / HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello", body: "hello"},
	}
	lim := Limits{MaxHeaderBytes: 1024, MaxBodyBytes: 64}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in + next)
			var r Request
			n, err := Parse(in, &r, lim)
			if tt.want != nil {
				if err != tt.want {
					t.Fatalf("Parse = %d, %v; want %v (%d)", n, err, tt.want, tt.want.Status)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if n != len(tt.in) || string(r.Body) != tt.body || r.Chunked != tt.chunked {
				t.Fatalf("n %d of %d, body %q, chunked %v; want body %q, chunked %v", n, len(tt.in), r.Body, r.Chunked, tt.body, tt.chunked)
			}
			// The request after it starts where this one ends.
			if _, err := Parse(in[n:], &r, lim); err != nil || string(r.Path) != "/next" {
				t.Fatalf("next request: %q, %v", r.Path, err)
			}
		})
	}
	// The statuses themselves are what RFC 9112 6.1 and 6.3 name.
	for e, status := range map[*Error]int{ErrCLAndTE: 400, ErrContentLength: 400, ErrTransferEncoding: 400, ErrChunkedHTTP10: 400, ErrTransferCoding: 501} {
		if e.Status != status {
			t.Errorf("%q has status %d, want %d", e.Reason, e.Status, status)
		}
	}
}

// TestParseChunkedAllocs checks that deciding the framing of a chunked
// request and decoding it allocate nothing either.
func TestParseChunkedAllocs(t *testing.T) {
	in := []byte("POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n")
	ok := []byte("POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
	buf := make([]byte, len(ok))
	var r Request
	lim := Limits{MaxHeaderBytes: 8192, MaxBodyBytes: 1 << 20}
	if a := testing.AllocsPerRun(1000, func() {
		if _, err := Parse(in, &r, lim); err != ErrTransferCoding {
			t.Fatal(err)
		}
		copy(buf, ok) // Parse decodes in place
		if _, err := Parse(buf, &r, lim); err != nil || !bytes.Equal(r.Body, []byte("hello")) {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("chunked framing allocates %v times per request, want 0", a)
	}
}
