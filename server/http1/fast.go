package http1

import (
	"encoding/binary"
	"math/bits"
)

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
// and part, not the per-byte work, was what they saved). Then, with the
// header block taken in one call (fastFields), values found a word at a
// time (valueRun), run four bytes a step, GET and Host matched in one
// word compare and the last valid Host compared as two words: the parse
// of that request fell from ~1,035 to ~700 instructions (December 2026).
// What is left is mostly the compiler's: bounds checks, slice headers
// built and stored, spills; a word-wise search for the colon and the
// space (find, then a check of the bytes before it) cost more than run.

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
// of class cl: four bytes a step while all four are, then one at a time.
// Each step slices its four bytes first, which leaves one bounds check
// (an index loop otherwise checks every byte twice; reslicing b each step
// costs twice the instructions, cachegrind).
func run(b []byte, cl uint8) int {
	i := 0
	for i+4 <= len(b) {
		w := b[i : i+4 : i+4]
		if class[w[0]]&class[w[1]]&class[w[2]]&class[w[3]]&cl == 0 {
			break
		}
		i += 4
	}
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
	var i int
	if start+4 <= len(b) && load32(b, start) == methodGET {
		i = start + 3 // one compare instead of a run over "GET "
	} else {
		i = start + run(b[start:], clTchar)
		if i == start || i >= len(b) || b[i] != ' ' {
			return 0, false
		}
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
	// SP "HTTP/1." DIGIT CR LF: two overlapping words, " HTTP/1." and
	// "." DIGIT CR LF.
	end := i + 11
	if end > len(b) || end > maxEnd {
		return 0, false
	}
	v := b[i:end:end]
	const spHTTP1 = uint64(' ') | uint64('H')<<8 | uint64('T')<<16 | uint64('T')<<24 |
		uint64('P')<<32 | uint64('/')<<40 | uint64('1')<<48 | uint64('.')<<56
	const dotCRLF = uint32('.') | uint32('\r')<<16 | uint32('\n')<<24
	tail := load32(v, 7)
	minor := byte(tail >> 8)
	if load64(v, 0) != spHTTP1 || tail&0xffff00ff != dotCRLF || !isDigit(minor) {
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

// fastFields parses the header lines from b[p], name ":" OWS value CRLF
// with no tab in them, and takes each in (field), up to and including the
// empty line that ends the block (done), and returns where the body
// begins. At the first line it does not take (a tab, a line not there in
// full or beyond maxEnd, every error, a full r.Headers) it stops and
// returns that line's start with done false: r and f then hold exactly
// the lines before it, and readFields decides the rest. One call per
// request rather than one per line, and each line's bytes looked at once.
func (r *Request) fastFields(b []byte, p, maxEnd int, f *fieldState) (next int, done bool) {
	if maxEnd < len(b) {
		b = b[:maxEnd] // a line that does not end within the limit is not taken
	}
	for {
		if p+1 >= len(b) {
			return p, false
		}
		if b[p] == '\r' {
			if b[p+1] == '\n' {
				return p + 2, true
			}
			return p, false
		}
		if r.Host == nil && r.validHostLen > 0 {
			if next := r.knownHostLine(b, p); next > 0 {
				p = next
				continue
			}
		}
		colon := p + run(b[p:], clTchar)
		if colon == p || colon >= len(b) || b[colon] != ':' || r.NumHeaders == MaxHeaders {
			return p, false
		}
		vs := colon + 1
		for vs < len(b) && b[vs] == ' ' {
			vs++
		}
		i := vs + valueRun(b[vs:])
		if i+1 >= len(b) || b[i] != '\r' || b[i+1] != '\n' {
			return p, false
		}
		ve := i
		for ve > vs && b[ve-1] == ' ' {
			ve--
		}
		name, value := b[p:colon], b[vs:ve]
		r.Headers[r.NumHeaders] = Header{Name: name, Value: value}
		r.NumHeaders++
		if err := r.field(name, value, f); err != nil {
			// field changes nothing when it refuses a line: take the
			// line back out, and readField refuses it again.
			r.NumHeaders--
			return p, false
		}
		p = i + 2
	}
}

// knownHostLine takes in the line at b[p] when it is exactly "Host: "
// (the name in any case) followed by the last Host value found valid with
// r (validHost) and CRLF, and returns where the next line begins; 0 for
// any other line, which fastFields then parses as usual. A client sends
// the same Host line with every request: compared as a whole, it needs no
// walk over the name and the value, no trimming and no call to field,
// which were about 330 of the ~1,390 instructions a pipelined GET /json
// cost (cachegrind, December 2026). The result is what the walk gives:
// the value has no space at either end (a valid Host has none), so
// neither the one space after the colon nor the CRLF leaves OWS to trim;
// its bytes are all field-value bytes; and field would take it in as the
// first Host (r.Host is nil: the caller checks) known valid. r.Headers
// must have room: checked here.
func (r *Request) knownHostLine(b []byte, p int) int {
	n := r.validHostLen
	end := p + len("Host: ") + n // where CRLF must be
	if end+2 > len(b) || r.NumHeaders == MaxHeaders {
		return 0
	}
	line := b[p : end+2 : end+2]
	// "Host: " as a little-endian word of six bytes, the letters of the
	// name lower-cased by or-ing in 0x20 (which makes a lower-case letter
	// only from that letter, in either case; ':' and ' ' are left alone
	// by the mask). len(line) > 8 since n > 0.
	const hostColon = uint64(host4) | uint64(':')<<32 | uint64(' ')<<40
	if load64(line, 0)&(1<<48-1)|0x20202020 != hostColon || line[n+6] != '\r' || line[n+7] != '\n' {
		return 0
	}
	v := line[6 : n+6]
	// knownHost, inline: a value of 8 to 16 bytes as two overlapping words.
	if n >= 8 && n <= 16 {
		if load64(v, 0) != load64(r.validHost[:], 0) || load64(v, n-8) != load64(r.validHost[:], n-8) {
			return 0
		}
	} else if string(v) != string(r.validHost[:n]) {
		return 0
	}
	h := &r.Headers[r.NumHeaders]
	h.Name = line[:4]
	h.Value = v
	r.NumHeaders++
	r.Host = v
	return end + 2
}

// valueRun returns the length of the longest prefix of b with no byte
// below 0x20 (a tab among them) and none equal to 0x7f: the bytes of a
// field value but HTAB. Eight bytes a step: the first word that holds such
// a byte gives its position, since the word-wise test flags the lowest
// one exactly; only a tail of under eight bytes goes byte by byte. The
// byte loop after whole words it replaces cost 141 instructions on a
// 15-byte Host value (cachegrind).
func valueRun(b []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for i+8 <= len(b) {
		x := binary.LittleEndian.Uint64(b[i:])
		d := x ^ ones*0x7f
		if m := ((x-ones*0x20)&^x | (d-ones)&^d) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	for i < len(b) && class[b[i]]&clValue != 0 {
		i++
	}
	return i
}

// methodGET is "GET " read as a little-endian word (load32).
const methodGET = uint32('G') | uint32('E')<<8 | uint32('T')<<16 | uint32(' ')<<24

// load32 and load64 read b[i:] as a little-endian word (one load each).
func load32(b []byte, i int) uint32 { return binary.LittleEndian.Uint32(b[i:]) }

func load64(b []byte, i int) uint64 { return binary.LittleEndian.Uint64(b[i:]) }
