package http1

import "encoding/binary"

// The fast paths: the request line and the header lines of the requests
// almost every client sends, parsed in one pass over their bytes.
//
// The general parser finds each line's end with bytes.IndexByte and then
// walks the line again for each of its parts (the spaces, the colon, the
// token, the target and value alphabets): six IndexByte calls and a
// second walk per request, about 270 of the 2,370 instructions a
// pipelined GET /json cost the server in user space (cachegrind over an
// exact load of 25,600 requests, December 2026), and the parse was half
// of the whole. Here one walk classifies each byte as it finds where the
// part ends. A fast path only ever accepts: on anything it does not
// expect (an error, a line that has not arrived in full, a '%' in a
// target, an absolute-form target, a tab in a value) it gives up and the
// general parser decides the same bytes from the same position, so the
// two agree by construction on every input they both see, and
// FuzzFastPath checks that they do. Measured the same way: 2,371 ->
// 2,207 instructions per request with them (the fixed cost of each line
// and part, not the per-byte work, was what they saved).

// The byte classes of the fast paths, one table lookup per byte.
const (
	clTchar   = 1 << iota // tchar: a method or field-name byte
	clPath                // pathByte but '?': a byte of an absolute-path
	clQuery               // pathByte: a byte of a query
	clValue               // a field-value byte but HTAB (which the general parser takes)
	clRegName             // regNameByte: a byte of a Host reg-name
)

var class = func() (t [256]uint8) {
	for c := range 256 {
		if tchar[c] {
			t[c] |= clTchar
		}
		if pathByte[c] {
			t[c] |= clQuery
			if c != '?' {
				t[c] |= clPath
			}
		}
		if fieldByte[c] && c != '\t' {
			t[c] |= clValue
		}
		if regNameByte[c] {
			t[c] |= clRegName
		}
	}
	return t
}()

// run returns the length of the longest prefix of b whose bytes are all
// of class cl. An index loop: reslicing b each step costs twice the
// instructions (cachegrind).
func run(b []byte, cl uint8) int {
	i := 0
	for i < len(b) && class[b[i]]&cl != 0 {
		i++
	}
	return i
}

// fastRequestLine parses a request line of the form
// token SP origin-form SP "HTTP/1." DIGIT CRLF, starting at b[start] and
// ending before maxEnd, whose target holds no pct-encoded byte, and
// returns where the header fields begin. ok is false for any other line,
// complete or not: readRequestLine decides it.
func (r *Request) fastRequestLine(b []byte, start, maxEnd int) (p int, ok bool) {
	i := start + run(b[start:], clTchar)
	if i == start || i >= len(b) || b[i] != ' ' {
		return 0, false
	}
	method := b[start:i]
	t := i + 1
	if t >= len(b) || b[t] != '/' {
		return 0, false
	}
	q := t + run(b[t:], clPath)
	i = q
	if i < len(b) && b[i] == '?' {
		i += 1 + run(b[i+1:], clQuery)
	}
	// SP "HTTP/1.d" CR LF
	end := i + 11
	if end > len(b) || end > maxEnd || b[i] != ' ' || b[i+9] != '\r' || b[i+10] != '\n' {
		return 0, false
	}
	v := binary.LittleEndian.Uint64(b[i+1:])
	const http1 = uint64('H') | uint64('T')<<8 | uint64('T')<<16 | uint64('P')<<24 |
		uint64('/')<<32 | uint64('1')<<40 | uint64('.')<<48
	minor := byte(v >> 56)
	if v&(1<<56-1) != http1 || !isDigit(minor) {
		return 0, false
	}
	r.Method = method
	r.Target = b[t:i]
	if q < i {
		r.Path, r.Query = b[t:q], b[q+1:i]
	} else {
		r.Path, r.Query = b[t:i], nil
	}
	r.Minor = 1 // RFC 9110 6.2: answer 1.x (x>1) as the highest we speak
	if minor == '0' {
		r.Minor = 0
	}
	return end, true
}

// fastField parses the header line at b[p], name ":" OWS value CRLF with
// no tab and no trailing tab in it, or the empty line that ends the block
// (done), appends the field to r.Headers and returns where the next line
// begins. ok is false for any other line, complete or not, and when
// r.Headers is full: readField decides it.
func (r *Request) fastField(b []byte, p, maxEnd int) (next int, done, ok bool) {
	if p+1 < len(b) && b[p] == '\r' && b[p+1] == '\n' && p+2 <= maxEnd {
		return p + 2, true, true
	}
	colon := p + run(b[p:], clTchar)
	if colon == p || colon >= len(b) || b[colon] != ':' || r.NumHeaders == MaxHeaders {
		return 0, false, false
	}
	vs := colon + 1
	for vs < len(b) && b[vs] == ' ' {
		vs++
	}
	i := vs + valueRun(b[vs:])
	if i+1 >= len(b) || b[i] != '\r' || b[i+1] != '\n' || i+2 > maxEnd {
		return 0, false, false
	}
	ve := i
	for ve > vs && b[ve-1] == ' ' {
		ve--
	}
	r.Headers[r.NumHeaders] = Header{Name: b[p:colon], Value: b[vs:ve]}
	r.NumHeaders++
	return i + 2, false, true
}

// valueRun is run(b, clValue), eight bytes a step first while no byte of
// the word is below 0x20 or 0x7f (fieldWords; a tab stops it too).
func valueRun(b []byte) int {
	n := fieldWords(b)
	return n + run(b[n:], clValue)
}
