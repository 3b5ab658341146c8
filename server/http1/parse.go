// Package http1 parses HTTP/1.x requests in place, without allocating.
//
// The parser is deliberately strict: every line must end in CRLF, header
// names must be tokens, obsolete line folding and whitespace before the colon
// are rejected, the request target and the Host field must hold only what
// RFC 3986 allows there, and a request that carries both Content-Length and
// Transfer-Encoding is refused. Strictness is what keeps a front proxy and
// this server from disagreeing about where a request ends (request
// smuggling), and it costs nothing on well-formed input.
//
// All slices in a parsed Request point into the caller's buffer and are valid
// only until that buffer is reused.
package http1

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
)

// MaxHeaders is the number of header fields a request may carry; more is
// answered with 431. It is a constant so that Request can hold the fields in
// a fixed array and parsing never allocates.
const MaxHeaders = 64

// Header is one header field; both slices point into the parsed buffer.
type Header struct {
	Name, Value []byte
}

// Request is a parsed request. It is meant to be reused: Parse resets it.
type Request struct {
	Method []byte
	Target []byte // the raw request-target
	Path   []byte // Target up to '?' (the path of an absolute-form target)
	Query  []byte // after '?', without it; nil when absent

	Minor int // HTTP/1.Minor; 0 or 1 (HTTP/1.2+ is served as 1.1)

	Headers    [MaxHeaders]Header
	NumHeaders int

	Host []byte

	// ContentLength is the declared body length, -1 when the request had no
	// Content-Length header.
	ContentLength int64
	// Chunked is true for a "Transfer-Encoding: chunked" body; Body then
	// holds the decoded data (decoded in place in the parsed buffer).
	Chunked bool
	Body    []byte

	// HeaderLen is the length of the request line and header block,
	// including the empty line. It is set once the header block is complete,
	// also when Parse returns ErrIncomplete while waiting for the body, so
	// that the caller can size its buffer to HeaderLen+ContentLength.
	HeaderLen int

	// KeepAlive reports whether the connection may carry another request
	// after this one: HTTP/1.1 without "Connection: close", or HTTP/1.0 with
	// "Connection: keep-alive".
	KeepAlive bool
	// KeepAliveToken is true when the client sent "Connection: keep-alive";
	// an HTTP/1.0 client then expects the same header in the response.
	KeepAliveToken bool
	// Expect100 is true for "Expect: 100-continue".
	Expect100 bool

	// validHost is a copy of the last Host value found valid with this
	// Request (validHostLen bytes of it): a client sends the same Host
	// with every request, and comparing it costs a fifth of checking it
	// again (cachegrind: 155 instructions for "127.0.0.1:8080"). Parse
	// leaves it alone in reset: it says nothing about the request.
	validHost    [64]byte
	validHostLen int
}

// Header returns the value of the first header named name (ASCII
// case-insensitive), or nil.
func (r *Request) Header(name string) []byte {
	for i := 0; i < r.NumHeaders; i++ {
		if equalFoldAny(r.Headers[i].Name, name) {
			return r.Headers[i].Value
		}
	}
	return nil
}

// host4 is "host" read as a little-endian word.
const host4 = uint32('h') | uint32('o')<<8 | uint32('s')<<16 | uint32('t')<<24

// knownHost reports whether v is the last Host value found valid with r
// (validHost). A value of 8 to 16 bytes, as most are ("127.0.0.1:8080",
// "api.example.com"), is compared as two overlapping words: a call to
// the runtime's memequal cost 74 instructions for 15 bytes (cachegrind).
func (r *Request) knownHost(v []byte) bool {
	n := len(v)
	if n != r.validHostLen {
		return false
	}
	if n >= 8 && n <= 16 {
		return load64(v, 0) == load64(r.validHost[:], 0) && load64(v, n-8) == load64(r.validHost[:], n-8)
	}
	return string(v) == string(r.validHost[:n])
}

// Limits bounds what a request may occupy.
type Limits struct {
	// MaxHeaderBytes bounds the request line plus header block: a request
	// line that does not fit is 414 (501 when it is the method that does
	// not fit), header fields that do not fit 431.
	MaxHeaderBytes int
	// MaxBodyBytes bounds Content-Length (413).
	MaxBodyBytes int64
}

// MaxRequestBytes is the most bytes one acceptable request can occupy:
// the header block, and a body within MaxBodyBytes in chunked encoding
// (whose framing may add up to MaxBodyBytes+4096 bytes) or Content-Length.
// A buffer of this size never stalls a request Parse would accept.
func (l Limits) MaxRequestBytes() int {
	return l.MaxHeaderBytes + int(maxChunkedEncoding(l.MaxBodyBytes)) + maxLine + 2
}

// maxLine bounds a chunk-size or trailer line.
const maxLine = 4096

func maxChunkedEncoding(maxBody int64) int64 { return 2*maxBody + maxLine }

// Error is a request the server must refuse; Status is the response status.
// After any Error the connection must be closed: the server cannot know
// where the next request would begin.
type Error struct {
	Status int
	Reason string
}

func (e *Error) Error() string { return e.Reason }

// ErrIncomplete means the buffer does not yet hold a whole request.
var ErrIncomplete = errors.New("http1: incomplete request")

// The errors Parse returns. They are preallocated so that rejecting a
// request does not allocate either.
var (
	ErrRequestLine      = &Error{400, "malformed request line"}
	ErrMethod           = &Error{400, "malformed method"}
	ErrTarget           = &Error{400, "malformed request target"}
	ErrVersion          = &Error{400, "malformed HTTP version"}
	ErrVersionSupported = &Error{505, "HTTP version not supported"}
	ErrLineEnding       = &Error{400, "line not terminated by CRLF"}
	ErrHeaderName       = &Error{400, "malformed header name"}
	ErrHeaderValue      = &Error{400, "malformed header value"}
	ErrObsFold          = &Error{400, "obsolete header line folding"}
	ErrURITooLong       = &Error{414, "request target too long"}
	ErrMethodTooLong    = &Error{501, "method too long"}
	ErrHeaderTooLarge   = &Error{431, "header fields too large"}
	ErrTooManyHeaders   = &Error{431, "too many header fields"}
	ErrContentLength    = &Error{400, "malformed Content-Length"}
	ErrCLAndTE          = &Error{400, "both Content-Length and Transfer-Encoding"}
	ErrTransferEncoding = &Error{400, "malformed Transfer-Encoding"}
	ErrTransferCoding   = &Error{501, "transfer coding not supported (only chunked)"}
	ErrChunkSize        = &Error{400, "malformed chunk size"}
	ErrChunkData        = &Error{400, "chunk data not terminated by CRLF"}
	ErrTrailer          = &Error{400, "malformed trailer field"}
	ErrChunkedHTTP10    = &Error{400, "Transfer-Encoding in an HTTP/1.0 request"}
	ErrBodyTooLarge     = &Error{413, "request body too large"}
	ErrMissingHost      = &Error{400, "missing Host header"}
	ErrDuplicateHost    = &Error{400, "duplicate Host header"}
	ErrHost             = &Error{400, "malformed Host header"}
)

// Parse parses one request at the start of b into r and returns the number
// of bytes it occupies (header block plus body). It returns ErrIncomplete
// when b holds only a prefix of a valid request, and an *Error when b cannot
// start a valid request within lim.
func Parse(b []byte, r *Request, lim Limits) (int, error) {
	return parse(b, r, lim, nil, true)
}

// ParseResume is Parse for a caller that keeps an incomplete request in its
// buffer and calls again when more bytes have arrived: a chunked body is
// decoded in place as it arrives and st records how far, so that every call
// costs time in proportion to the new bytes (plus the header block), not to
// the whole body so far. After ErrIncomplete the body part of b no longer
// holds the bytes as received: call again with the same request at the
// start of b (moved or copied as a whole, with more bytes appended) and the
// same st. Reset st after any other result, before the next request.
func ParseResume(b []byte, r *Request, lim Limits, st *ChunkedState) (int, error) {
	return parse(b, r, lim, st, true)
}

// parse is Parse and ParseResume; fast is false only in the test that
// compares the fast paths (fast.go) with the general parser.
func parse(b []byte, r *Request, lim Limits, st *ChunkedState, fast bool) (int, error) {
	r.reset()
	// RFC 9112 2.2: a server SHOULD ignore empty lines before the request
	// line (some clients send CRLF after a POST body).
	start := 0
	for start+1 < len(b) && b[start] == '\r' && b[start+1] == '\n' {
		start += 2
	}
	maxEnd := start + lim.MaxHeaderBytes
	p, ok := 0, false
	if fast {
		p, ok = r.fastRequestLine(b, start, maxEnd)
	}
	if !ok {
		var err error
		if p, err = r.readRequestLine(b, start, maxEnd); err != nil {
			return 0, err
		}
	}
	var f fieldState
	done := false
	if fast {
		p, done = r.fastFields(b, p, maxEnd, &f)
	}
	if !done {
		var err error
		if p, err = r.readFields(b, p, maxEnd, &f); err != nil {
			return 0, err
		}
	}
	r.HeaderLen = p
	if r.Minor == 1 && r.Host == nil {
		return 0, ErrMissingHost
	}
	r.KeepAlive = !f.closeToken && (r.Minor == 1 || r.KeepAliveToken)
	if f.te == nil && r.ContentLength <= 0 {
		return p, nil // no body: what framing and readBody would decide
	}
	if err := r.framing(f.te); err != nil {
		return 0, err
	}
	return r.readBody(b, p, lim, st)
}

// reset clears what a previous parse left in r.
func (r *Request) reset() {
	r.Method = nil
	r.Minor = 0
	r.KeepAlive = false
	r.NumHeaders = 0
	r.Host = nil
	r.ContentLength = -1
	r.Chunked = false
	r.Body = nil
	r.HeaderLen = 0
	r.KeepAliveToken = false
	r.Expect100 = false
}

// readRequestLine parses the request line that starts at b[start] and
// must end before maxEnd, and returns where the header fields begin.
func (r *Request) readRequestLine(b []byte, start, maxEnd int) (int, error) {
	le := bytes.IndexByte(b[start:], '\n')
	if le < 0 {
		if len(b) >= maxEnd {
			return 0, requestLineTooLong(b[start:maxEnd])
		}
		if err := validPrefix(b[start:]); err != nil {
			return 0, err
		}
		return 0, ErrIncomplete
	}
	le += start
	if le+1 > maxEnd {
		return 0, requestLineTooLong(b[start:maxEnd])
	}
	if err := r.parseRequestLine(b[start:le]); err != nil {
		return 0, err
	}
	return le + 1, nil
}

// fieldState is what the header fields say that Request does not keep.
type fieldState struct {
	te         []byte // the Transfer-Encoding value; nil when absent
	closeToken bool   // a "close" connection option
}

// readFields parses the header fields from b[p] up to and including the
// empty line, which must end before maxEnd, and returns where the body
// begins. parse has fastFields take the lines first; from the first one
// it does not take (a tab in a value, a line not there in full, every
// error), readFields decides them.
func (r *Request) readFields(b []byte, p, maxEnd int, f *fieldState) (int, error) {
	for {
		next, done, err := r.readField(b, p, maxEnd)
		if err != nil {
			return 0, err
		}
		if done {
			return next, nil
		}
		h := &r.Headers[r.NumHeaders-1]
		if err := r.field(h.Name, h.Value, f); err != nil {
			return 0, err
		}
		p = next
	}
}

// readField parses the header line at b[p] (or the empty line that ends
// the block: done), appends it to r.Headers and returns where the next
// line begins.
func (r *Request) readField(b []byte, p, maxEnd int) (next int, done bool, err error) {
	le := bytes.IndexByte(b[p:], '\n')
	if le < 0 {
		if len(b) >= maxEnd {
			return 0, false, ErrHeaderTooLarge
		}
		return 0, false, ErrIncomplete
	}
	le += p
	if le+1 > maxEnd {
		return 0, false, ErrHeaderTooLarge
	}
	line := b[p:le]
	if len(line) == 0 || line[len(line)-1] != '\r' {
		return 0, false, ErrLineEnding
	}
	line = line[:len(line)-1]
	if len(line) == 0 {
		return le + 1, true, nil // end of header block
	}
	if line[0] == ' ' || line[0] == '\t' {
		return 0, false, ErrObsFold
	}
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 {
		return 0, false, ErrHeaderName
	}
	name := line[:colon]
	if !isToken(name) {
		return 0, false, ErrHeaderName
	}
	value := trimOWS(line[colon+1:])
	if !fieldValue(value) {
		return 0, false, ErrHeaderValue
	}
	if r.NumHeaders == MaxHeaders {
		return 0, false, ErrTooManyHeaders
	}
	r.Headers[r.NumHeaders] = Header{Name: name, Value: value}
	r.NumHeaders++
	return le + 1, false, nil
}

// field takes in the header fields the parser itself acts on: Host,
// Expect, Connection and the two that frame the body. A field it refuses
// changes nothing in r or f: fastFields relies on that to hand the line
// to readFields, which refuses it again from the same state.
func (r *Request) field(name, value []byte, f *fieldState) error {
	switch len(name) {
	case 4:
		// "host" ignoring case in one compare: or-ing 0x20 into a byte
		// gives a lower-case letter only from that letter in either case.
		if load32(name, 0)|0x20202020 == host4 {
			if r.Host != nil {
				return ErrDuplicateHost
			}
			// RFC 9112 3.2: a Host that is not uri-host [":" port] is a
			// 400, in HTTP/1.0 too.
			if !r.knownHost(value) {
				if !validHost(value) {
					return ErrHost
				}
				if len(value) <= len(r.validHost) {
					r.validHostLen = copy(r.validHost[:], value)
				}
			}
			r.Host = value
		}
	case 6:
		// RFC 9110 10.1.1: an HTTP/1.0 expectation is ignored.
		if equalFold(name, "expect") && equalFold(value, "100-continue") && r.Minor == 1 {
			r.Expect100 = true
		}
	case 10:
		if equalFold(name, "connection") {
			c, k := connectionTokens(value)
			f.closeToken = f.closeToken || c
			r.KeepAliveToken = r.KeepAliveToken || k
		}
	case 14:
		if equalFold(name, "content-length") {
			n, ok := parseContentLength(value)
			if !ok || (r.ContentLength >= 0 && r.ContentLength != n) {
				return ErrContentLength
			}
			r.ContentLength = n
		}
	case 17:
		if equalFold(name, "transfer-encoding") {
			// Two fields could be combined into one list, but a proxy in
			// front may read only one of them: refuse.
			if len(value) == 0 || f.te != nil {
				return ErrTransferEncoding
			}
			f.te = value
		}
	}
	return nil
}

// readBody takes the body that starts at b[p], as framing decided, and
// returns where the request ends.
func (r *Request) readBody(b []byte, p int, lim Limits, st *ChunkedState) (int, error) {
	if r.Chunked {
		if st == nil {
			// Validate and measure first, decode only once the whole body
			// is there: an incomplete body leaves b untouched for the next
			// attempt.
			var v, d ChunkedState
			if _, err := v.decode(b[p:], lim.MaxBodyBytes, false); err != nil {
				return 0, err
			}
			end, _ := d.decode(b[p:], lim.MaxBodyBytes, true)
			r.Body = b[p : p+d.dec]
			return p + end, nil
		}
		end, err := st.decode(b[p:], lim.MaxBodyBytes, true)
		if err != nil {
			return 0, err
		}
		r.Body = b[p : p+st.dec]
		return p + end, nil
	}
	n := p
	if r.ContentLength > 0 {
		if r.ContentLength > lim.MaxBodyBytes {
			return 0, ErrBodyTooLarge
		}
		if int64(len(b)-p) < r.ContentLength {
			return 0, ErrIncomplete
		}
		n = p + int(r.ContentLength)
		r.Body = b[p:n]
	}
	return n, nil
}

func (r *Request) parseRequestLine(line []byte) error {
	if len(line) == 0 || line[len(line)-1] != '\r' {
		return ErrLineEnding
	}
	line = line[:len(line)-1]
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 {
		if sp == 0 {
			return ErrMethod
		}
		return ErrRequestLine
	}
	r.Method = line[:sp]
	if !isToken(r.Method) {
		return ErrMethod
	}
	rest := line[sp+1:]
	sp = bytes.IndexByte(rest, ' ')
	if sp <= 0 {
		return ErrRequestLine
	}
	r.Target = rest[:sp]
	if err := r.splitTarget(); err != nil {
		return err
	}
	v := rest[sp+1:]
	if len(v) != 8 || string(v[:5]) != "HTTP/" || v[6] != '.' || !isDigit(v[5]) || !isDigit(v[7]) {
		return ErrVersion
	}
	if v[5] != '1' {
		return ErrVersionSupported
	}
	if v[7] == '0' {
		r.Minor = 0
	} else {
		r.Minor = 1 // RFC 9110 6.2: answer 1.x (x>1) as the highest we speak
	}
	return nil
}

// splitTarget checks and splits the request target. It accepts
// origin-form (/path?query), asterisk-form (*) and absolute-form
// (http://host/path?query), the forms a server must accept (RFC 9112 3.2);
// authority-form is only for CONNECT, which we do not proxy. Every byte of
// the path and query must be one RFC 3986 allows there (validPath), and the
// authority of an absolute-form target must be a non-empty host with an
// optional port (RFC 9110 4.2.1: an http URI with an empty host is
// invalid; 4.2.4: userinfo is refused).
func (r *Request) splitTarget() error {
	t := r.Target
	switch {
	case t[0] == '/':
	case len(t) == 1 && t[0] == '*':
		r.Path, r.Query = t, nil
		return nil
	case hasPrefixFold(t, "http://") || hasPrefixFold(t, "https://"):
		// The authority ends at the first '/' or '?' (RFC 3986 3.2): in
		// http://a?x/json the path is empty ("/") and x/json the query.
		rest := t[bytes.IndexByte(t, ':')+3:]
		end := bytes.IndexAny(rest, "/?")
		auth := rest
		if end >= 0 {
			auth = rest[:end]
		}
		if len(auth) == 0 || auth[0] == ':' || !validHost(auth) {
			return ErrTarget
		}
		if end < 0 || rest[end] == '?' {
			r.Path, r.Query = rootPath, nil
			if end >= 0 {
				r.Query = rest[end+1:]
				if !validPath(r.Query) {
					return ErrTarget
				}
			}
			return nil
		}
		t = rest[end:]
	default:
		return ErrTarget
	}
	if !validPath(t) {
		return ErrTarget
	}
	if q := bytes.IndexByte(t, '?'); q >= 0 {
		r.Path, r.Query = t[:q], t[q+1:]
	} else {
		r.Path, r.Query = t, nil
	}
	return nil
}

var rootPath = []byte("/")

// validPrefix rejects a partial request line early when what has arrived can
// already never become valid, so a garbage stream is refused at once instead
// of after MaxHeaderBytes: a method byte that is not a tchar, or a target
// byte no request target may hold.
func validPrefix(b []byte) error {
	if len(b) == 1 && b[0] == '\r' {
		return nil // perhaps the first half of an empty line
	}
	for i, c := range b {
		if c == ' ' {
			if i == 0 {
				return ErrMethod
			}
			return validTargetPrefix(b[i+1:])
		}
		if !isTchar(c) {
			return ErrMethod
		}
	}
	return nil
}

// validTargetPrefix checks the bytes of a request target that has not
// ended yet (up to the space before the version, if that has arrived):
// each must be one that some valid target can hold.
func validTargetPrefix(t []byte) error {
	if sp := bytes.IndexByte(t, ' '); sp >= 0 {
		t = t[:sp]
	}
	for _, c := range t {
		if !pathByte[c] && c != '%' && c != '[' && c != ']' {
			return ErrTarget
		}
	}
	return nil
}

// requestLineTooLong decides the status of a request line that does not
// end within MaxHeaderBytes; line is what of it lies within the limit.
// RFC 9112 3 asks for 414 when the request target is longer than the
// server parses and 501 for a method longer than any it implements; a
// part that can already never be valid stays the 400 it would be anyway,
// so the status never depends on where the limit happens to cut. 431 is
// for header fields only.
func requestLineTooLong(line []byte) error {
	sp := bytes.IndexByte(line, ' ')
	if sp < 0 {
		if !isToken(line) {
			return ErrMethod
		}
		return ErrMethodTooLong
	}
	if err := validPrefix(line); err != nil {
		return err
	}
	// If the target ended within the limit, what follows is the version,
	// cut short by the limit, or junk.
	rest := line[sp+1:]
	if sp := bytes.IndexByte(rest, ' '); sp >= 0 && !versionPrefix(rest[sp+1:]) {
		return ErrVersion
	}
	return ErrURITooLong
}

// versionPrefix reports whether v can begin "HTTP/d.d\r".
func versionPrefix(v []byte) bool {
	const form = "HTTP/d.d\r"
	if len(v) > len(form) {
		return false
	}
	for i, c := range v {
		switch form[i] {
		case 'd':
			if !isDigit(c) {
				return false
			}
		default:
			if c != form[i] {
				return false
			}
		}
	}
	return true
}

// ChunkedState is how far the decoding of an incomplete chunked body has
// come: ParseResume decodes the body in place as it arrives and records
// here where it stopped, so that the next attempt resumes there instead of
// reading the whole body again. Re-parsing from the first byte on every
// read made a trickled body cost time quadratic in its size. The zero
// value is a body not yet started.
type ChunkedState struct {
	enc   int   // bytes of the encoding consumed, from the start of the body
	dec   int   // decoded bytes, at the start of the body
	left  int64 // data bytes of the current chunk not yet arrived
	phase uint8
}

// The phases of ChunkedState: where in the encoding enc stands.
const (
	phaseSize    = iota // at a chunk-size line
	phaseData           // inside chunk data (left bytes to come)
	phaseDataEnd        // at the CRLF after chunk data
	phaseTrailer        // in the trailer section
)

// Reset forgets a body's progress; call it when a request is done.
func (s *ChunkedState) Reset() { *s = ChunkedState{} }

// decode parses a chunked body at the start of b (RFC 9112 7.1) from where
// s stopped, and returns the bytes the encoding occupies, trailer section
// included, once it is complete. With move it also moves the chunk data to
// the start of b, over the framing already read (the data never overtakes
// the read position, so the copy is safe in place). Extensions are checked
// for syntax and ignored; trailer fields are checked like header fields
// and ignored.
func (s *ChunkedState) decode(b []byte, maxBody int64, move bool) (end int, err error) {
	// The framing of tiny chunks can outweigh the data; bound the encoded
	// size too, so that a client cannot make the buffer grow without end.
	maxEncoded := maxChunkedEncoding(maxBody)
	for {
		if int64(s.enc) > maxEncoded {
			return 0, ErrBodyTooLarge
		}
		switch s.phase {
		case phaseSize:
			le := bytes.IndexByte(b[s.enc:], '\n')
			if le < 0 {
				if len(b)-s.enc > maxLine {
					return 0, ErrChunkSize // no chunk-size line is that long
				}
				return 0, ErrIncomplete
			}
			size, err := chunkSize(b[s.enc : s.enc+le])
			if err != nil {
				return 0, err
			}
			s.enc += le + 1
			if size == 0 {
				s.phase = phaseTrailer
				continue
			}
			if int64(s.dec)+size > maxBody || int64(s.enc)+size+2 > maxEncoded {
				return 0, ErrBodyTooLarge
			}
			s.left = size
			s.phase = phaseData
		case phaseData:
			n := int(min(s.left, int64(len(b)-s.enc)))
			if move && s.dec != s.enc {
				copy(b[s.dec:], b[s.enc:s.enc+n])
			}
			s.dec += n
			s.enc += n
			s.left -= int64(n)
			if s.left > 0 {
				return 0, ErrIncomplete
			}
			s.phase = phaseDataEnd
		case phaseDataEnd:
			rest := b[s.enc:]
			if len(rest) > 0 && rest[0] != '\r' || len(rest) > 1 && rest[1] != '\n' {
				return 0, ErrChunkData
			}
			if len(rest) < 2 {
				return 0, ErrIncomplete
			}
			s.enc += 2
			s.phase = phaseSize
		default: // phaseTrailer: field lines up to an empty line
			le := bytes.IndexByte(b[s.enc:], '\n')
			if le < 0 {
				if len(b)-s.enc > maxLine {
					return 0, ErrTrailer
				}
				return 0, ErrIncomplete
			}
			line := b[s.enc : s.enc+le]
			s.enc += le + 1
			if len(line) == 0 || line[len(line)-1] != '\r' {
				return 0, ErrLineEnding
			}
			line = line[:len(line)-1]
			if len(line) == 0 {
				return s.enc, nil
			}
			if err := trailerField(line); err != nil {
				return 0, err
			}
		}
	}
}

// chunkSize parses a chunk-size line (without its LF): hex digits, then
// optional extensions.
func chunkSize(line []byte) (int64, error) {
	if len(line) == 0 || line[len(line)-1] != '\r' {
		return 0, ErrLineEnding
	}
	line = line[:len(line)-1]
	// The limit is on the value, not on the digits: 000000000000000a is
	// valid syntax (RFC 9112 7.1, chunk-size = 1*HEXDIG), and the line
	// limit bounds how many zeros a client can send. A value that does
	// not fit an int64 is refused before it can wrap (RFC 9112 7.1:
	// recipients must prevent integer overflow); anything that fits but
	// exceeds MaxBodyBytes is the caller's 413.
	var size int64
	i := 0
	for ; i < len(line); i++ {
		v := unhex(line[i])
		if v < 0 {
			break
		}
		if size > math.MaxInt64>>4 {
			return 0, ErrChunkSize
		}
		size = size<<4 | int64(v)
	}
	if i == 0 {
		return 0, ErrChunkSize
	}
	if ext := trimOWS(line[i:]); len(ext) > 0 {
		if ext[0] != ';' || !isFieldValue(ext) {
			return 0, ErrChunkSize
		}
	}
	return size, nil
}

// trailerField checks a trailer field line with the rules of a header
// field: a token name, no whitespace before the colon, no obsolete line
// folding, no control characters in the value. A trailer is ignored, but
// a proxy in front may not ignore it, so what it cannot parse is refused.
func trailerField(line []byte) error {
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 || !isToken(line[:colon]) || !isFieldValue(line[colon+1:]) {
		return ErrTrailer
	}
	return nil
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}

func parseContentLength(v []byte) (int64, bool) {
	// 18 digits cannot overflow int64.
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// connectionTokens scans a Connection header's comma-separated tokens.
func connectionTokens(v []byte) (closeTok, keepAlive bool) {
	for len(v) > 0 {
		var tok []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			tok, v = v[:i], v[i+1:]
		} else {
			tok, v = v, nil
		}
		tok = trimOWS(tok)
		switch {
		case equalFold(tok, "close"):
			closeTok = true
		case equalFold(tok, "keep-alive"):
			keepAlive = true
		}
	}
	return closeTok, keepAlive
}

// framing decides how the body of a request is delimited, once its
// header block is read (RFC 9112 6.1, 6.3); te is the Transfer-Encoding
// value, nil when there was none, and r.ContentLength is already parsed.
// Each refusal is of a request that a proxy in front could delimit
// differently: the caller closes the connection after answering it.
func (r *Request) framing(te []byte) error {
	if te == nil {
		return nil
	}
	// RFC 9112 6.1: an HTTP/1.0 message with Transfer-Encoding has
	// faulty framing, Content-Length or not.
	if r.Minor == 0 {
		return ErrChunkedHTTP10
	}
	// RFC 9112 6.1: a server may refuse both, and must close either way.
	if r.ContentLength >= 0 {
		return ErrCLAndTE
	}
	if err := transferCodings(te); err != nil {
		return err
	}
	r.Chunked = true
	return nil
}

// transferCodings checks a Transfer-Encoding list. Chunked must be the
// final coding (RFC 9112 6.3, else the length cannot be determined) and
// be applied once (RFC 9112 7): otherwise 400. An empty element is 400
// too: RFC 9110 5.6.1 has a recipient ignore it, but a proxy may not, and
// no sender may write one. Any other coding under chunked (gzip, ...) is
// one we do not decode: 501 (RFC 9112 6.1).
func transferCodings(v []byte) error {
	other := false
	for {
		elem, rest, more := bytes.Cut(v, []byte{','})
		elem = trimOWS(elem)
		switch {
		case equalFold(elem, "chunked"):
			if more {
				return ErrTransferEncoding
			}
		case !more || len(elem) == 0:
			return ErrTransferEncoding
		default:
			other = true
		}
		if !more {
			break
		}
		v = rest
	}
	if other {
		return ErrTransferCoding
	}
	return nil
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isHex(c byte) bool { return unhex(c) >= 0 }

// byteSet builds a 256-entry membership table of the bytes in s and of
// ALPHA and DIGIT: one lookup per byte on paths that run for every
// request.
func byteSet(s string) (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for i := range len(s) {
		t[s[i]] = true
	}
	return t
}

// The RFC 3986 alphabets (section 2 and appendix A) the request target
// and Host are checked against. Percent signs are handled by the callers,
// which also check the two hex digits that must follow.
var (
	// regNameByte: unreserved / sub-delims, the bytes of a reg-name
	// (3.2.2) apart from pct-encoded.
	regNameByte = byteSet("-._~" + "!$&'()*+,;=")
	// pathByte: pchar / "/" / "?" (3.3, 3.4), the bytes of an
	// absolute-path and a query apart from pct-encoded. Not '#': a
	// request target has no fragment (RFC 9112 3.2); not '[' or ']',
	// which belong to an IP-literal host only.
	pathByte = byteSet("-._~" + "!$&'()*+,;=" + ":@" + "/?")
	// ipvFutureByte: unreserved / sub-delims / ":" (3.2.2).
	ipvFutureByte = byteSet("-._~" + "!$&'()*+,;=" + ":")
)

// validPath reports whether p is a valid absolute-path [ "?" query ], or
// a query: pathByte bytes and pct-encoded triplets only. The bytes
// between triplets are checked in a range loop: it runs over every
// target, and costs a third of the instructions of an indexed loop that
// also looks for '%' (cachegrind).
func validPath(p []byte) bool {
	for {
		n := len(p)
		for i, c := range p {
			if !pathByte[c] {
				n = i
				break
			}
		}
		if n == len(p) {
			return true
		}
		if p[n] != '%' || n+2 >= len(p) || !isHex(p[n+1]) || !isHex(p[n+2]) {
			return false
		}
		p = p[n+3:]
	}
}

// validHost reports whether h is uri-host [ ":" port ], the value of a
// Host field (RFC 9110 7.2) and the authority of an absolute-form target:
// an IP-literal in brackets, or a reg-name (which also covers every
// IPv4address), then optionally a colon and decimal digits (port =
// *DIGIT). The empty value is valid: RFC 9110 7.2 has a client send an
// empty Host when the target URI has no authority.
func validHost(h []byte) bool {
	// The common forms, name and name:port, in one run (it runs for
	// every request); brackets and '%' take the long way.
	i := run(h, clRegName)
	switch {
	case i == len(h):
		return true
	case h[i] == ':':
		return allDigits(h[i+1:])
	}
	return validHostLiteral(h)
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if !isDigit(c) {
			return false
		}
	}
	return true
}

// validHostLiteral is validHost for every form, IP-literals and
// pct-encoded reg-names included.
func validHostLiteral(h []byte) bool {
	i := 0
	if len(h) > 0 && h[0] == '[' {
		end := bytes.IndexByte(h, ']')
		if end < 0 || !validIPLiteral(h[1:end]) {
			return false
		}
		i = end + 1
	} else {
		for ; i < len(h) && h[i] != ':'; i++ {
			if regNameByte[h[i]] {
				continue
			}
			if h[i] != '%' || i+2 >= len(h) || !isHex(h[i+1]) || !isHex(h[i+2]) {
				return false
			}
			i += 2
		}
	}
	if i == len(h) {
		return true
	}
	return h[i] == ':' && allDigits(h[i+1:])
}

// validIPLiteral reports whether s, the inside of the brackets of an
// IP-literal, is an IPv6address or an IPvFuture (RFC 3986 3.2.2). Zone
// identifiers (RFC 6874) are not part of the http URI syntax.
func validIPLiteral(s []byte) bool {
	if len(s) > 0 && (s[0] == 'v' || s[0] == 'V') {
		dot := bytes.IndexByte(s, '.')
		if dot < 2 || dot == len(s)-1 {
			return false
		}
		for _, c := range s[1:dot] {
			if !isHex(c) {
				return false
			}
		}
		for _, c := range s[dot+1:] {
			if !ipvFutureByte[c] {
				return false
			}
		}
		return true
	}
	return validIPv6(s)
}

// validIPv6 reports whether s is an IPv6address of RFC 3986 3.2.2: eight
// pieces of 1-4 hex digits separated by colons, the last two of which may
// be written as an IPv4address, with at most one "::" standing for one or
// more zero pieces.
func validIPv6(s []byte) bool {
	pieces := 0
	ellipsis := false
	i := 0
	if len(s) >= 2 && s[0] == ':' && s[1] == ':' {
		ellipsis, i = true, 2
	}
	for i < len(s) {
		j := i
		for j < len(s) && j-i < 4 && isHex(s[j]) {
			j++
		}
		if j < len(s) && s[j] == '.' {
			// An IPv4address is the last thing and counts as two pieces.
			if pieces > 6 || !validIPv4(s[i:]) {
				return false
			}
			pieces += 2
			break
		}
		if j == i {
			return false
		}
		pieces++
		if j == len(s) {
			break
		}
		if s[j] != ':' || j+1 == len(s) {
			return false // a fifth hex digit, another byte, or a colon at the end
		}
		i = j + 1
		if s[i] == ':' {
			if ellipsis {
				return false
			}
			ellipsis = true
			i++
		}
	}
	if ellipsis {
		return pieces <= 7
	}
	return pieces == 8
}

// validIPv4 reports whether s is an IPv4address: four dec-octets (0-255,
// no leading zeros) separated by dots (RFC 3986 3.2.2).
func validIPv4(s []byte) bool {
	for octet := range 4 {
		if octet > 0 {
			if len(s) == 0 || s[0] != '.' {
				return false
			}
			s = s[1:]
		}
		n, v := 0, 0
		for n < len(s) && n < 3 && isDigit(s[n]) {
			v = v*10 + int(s[n]-'0')
			n++
		}
		if n == 0 || v > 255 || (n > 1 && s[0] == '0') {
			return false
		}
		s = s[n:]
	}
	return len(s) == 0
}

// tchar is the token alphabet of RFC 9110 5.6.2.
var tchar = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

func isTchar(c byte) bool { return tchar[c] }

// isToken reports whether every byte of s is a tchar: the check of a
// method, a field name, a trailer name, in the parser and for what a
// handler adds to a response alike.
func isToken[T ~string | ~[]byte](s T) bool {
	for i := range len(s) {
		if !tchar[s[i]] {
			return false
		}
	}
	return true
}

// isFieldValue reports whether every byte of s may be in a field value
// (fieldByte).
func isFieldValue[T ~string | ~[]byte](s T) bool {
	for i := range len(s) {
		if !fieldByte[s[i]] {
			return false
		}
	}
	return true
}

// fieldValue is isFieldValue for the parser's header values, eight bytes
// at a time: a word in which no byte is below 0x20 or equal to 0x7f holds
// only field bytes, and most words of most values are such words. A word
// that has one (a tab, which is allowed, or a control character) is
// decided by the byte loop. It pays for the Host and target checks on a
// typical API request: BenchmarkParseAPI takes 3434 instructions per
// request with it, 3748 with the byte loop alone, 3407 before those
// checks existed (cachegrind).
func fieldValue(b []byte) bool {
	return isFieldValue(b[fieldWords(b):])
}

// fieldWords returns the length of the longest prefix of b made of whole
// eight-byte words with no byte below 0x20 and none equal to 0x7f.
func fieldWords(b []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	all := len(b)
	for len(b) >= 8 {
		x := binary.LittleEndian.Uint64(b)
		// The classic tests for a byte below n and a zero byte: exact
		// for whether there is one (x-ones*n borrows into the high bit
		// of the lowest such byte), which is all that is asked here.
		below := (x - ones*0x20) &^ x
		d := x ^ ones*0x7f
		del := (d - ones) &^ d
		if (below|del)&highs != 0 {
			break
		}
		b = b[8:]
	}
	return all - len(b)
}

// fieldByte[c] is true for the bytes a field value (or a chunk extension)
// may hold: anything but control characters other than HTAB (RFC 9110
// 5.5; obs-text is allowed). One lookup per byte: this check runs over
// every header value of every request.
var fieldByte = func() (t [256]bool) {
	for c := range 256 {
		t[c] = (c >= ' ' || c == '\t') && c != 0x7f
	}
	return t
}()

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// equalFold compares b to the lower-case ASCII string s, ignoring case in b.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		if lower(b[i]) != s[i] {
			return false
		}
	}
	return true
}

// equalFoldAny compares ignoring ASCII case on both sides.
func equalFoldAny(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		if lower(b[i]) != lower(s[i]) {
			return false
		}
	}
	return true
}

func hasPrefixFold(b []byte, s string) bool {
	return len(b) >= len(s) && equalFold(b[:len(s)], s)
}

// ValidFieldName reports whether s can be a header field name: a
// non-empty token (RFC 9110 5.1).
func ValidFieldName(s string) bool {
	return s != "" && isToken(s)
}

// ValidFieldValue reports whether s can be a header field value: no
// control characters but horizontal tab (RFC 9110 5.5). A CR or LF in a
// value written into a response would end the header early: response
// splitting.
func ValidFieldValue(s string) bool {
	return isFieldValue(s)
}
