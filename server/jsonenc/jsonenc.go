// Package jsonenc is a streaming JSON encoder that appends to a caller's
// byte slice and never allocates.
//
// Why not encoding/json: json.Marshal allocates its result and, through
// reflection and interface boxing, more per call (BenchmarkStdlibMarshal
// measures it: one allocation and ~4x the time for the TechEmpower
// message), which would
// make every request allocate. Why not a reflection-based third-party
// encoder: the ones that avoid allocating do so with unsafe access to
// runtime internals, which breaks across Go releases. An append-based
// encoder with an explicit value API is the encoding/json output format
// without either cost.
//
// The output is byte-for-byte what encoding/json.Marshal produces for the
// same values (HTML-safe escaping of <, > and &, U+2028/U+2029 escaped,
// invalid UTF-8 replaced by U+FFFD, ECMAScript number formatting); the
// tests check that differentially against encoding/json. Types describe
// their encoding by implementing Appender with an Encoder, so the encoder,
// not the type, owns escaping, separators and nesting.
package jsonenc

import (
	"errors"
	"math"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// Appender is implemented by values that can append their JSON encoding to
// dst. Implementations should use an Encoder (see the package example).
type Appender interface {
	AppendJSON(dst []byte) []byte
}

// maxDepth bounds nesting; the comma state of each level is one bit.
const maxDepth = 64

// Errors recorded by an Encoder; Err returns the first.
var (
	ErrUnsupportedValue = errors.New("jsonenc: unsupported value (NaN or infinity)")
	ErrDepth            = errors.New("jsonenc: nesting deeper than 64")
	ErrMisuse           = errors.New("jsonenc: unbalanced object/array or key outside object")
)

// Encoder writes one JSON value (of any nesting) into a byte slice,
// inserting separators itself. The zero value appends to a nil slice.
// An Encoder is small and meant to live on the stack.
type Encoder struct {
	buf      []byte
	more     uint64 // bit d: level d already holds an element
	inObject uint64 // bit d: level d is an object
	depth    int
	afterKey bool
	err      error
}

// NewEncoder returns an Encoder appending to dst.
func NewEncoder(dst []byte) Encoder { return Encoder{buf: dst} }

// Reset makes e append to dst, discarding its state.
func (e *Encoder) Reset(dst []byte) { *e = Encoder{buf: dst} }

// Bytes returns the slice appended to so far.
func (e *Encoder) Bytes() []byte { return e.buf }

// Err reports the first misuse or unsupported value, if any; the output is
// not valid JSON when Err is not nil. An unfinished value is also an error.
func (e *Encoder) Err() error {
	if e.err == nil && (e.depth != 0 || e.afterKey) {
		return ErrMisuse
	}
	return e.err
}

func (e *Encoder) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// sep writes the separator a value needs at the current position.
func (e *Encoder) sep() {
	if e.afterKey {
		e.afterKey = false
		return
	}
	if e.depth == 0 {
		return
	}
	bit := uint64(1) << (e.depth - 1)
	if e.inObject&bit != 0 {
		e.fail(ErrMisuse) // a value in an object needs a key
	}
	if e.more&bit != 0 {
		e.buf = append(e.buf, ',')
	}
	e.more |= bit
}

func (e *Encoder) open(c byte, object bool) {
	e.sep()
	if e.depth == maxDepth {
		e.fail(ErrDepth)
		return
	}
	e.buf = append(e.buf, c)
	bit := uint64(1) << e.depth
	e.more &^= bit
	if object {
		e.inObject |= bit
	} else {
		e.inObject &^= bit
	}
	e.depth++
}

func (e *Encoder) close(c byte, object bool) {
	if e.depth == 0 || e.afterKey || (e.inObject&(1<<(e.depth-1)) != 0) != object {
		e.fail(ErrMisuse)
		return
	}
	e.depth--
	e.buf = append(e.buf, c)
}

// BeginObject starts an object; pair it with EndObject.
func (e *Encoder) BeginObject() { e.open('{', true) }

// EndObject ends the innermost object.
func (e *Encoder) EndObject() { e.close('}', true) }

// BeginArray starts an array; pair it with EndArray.
func (e *Encoder) BeginArray() { e.open('[', false) }

// EndArray ends the innermost array.
func (e *Encoder) EndArray() { e.close(']', false) }

// Key writes an object member name; the next call writes its value.
func (e *Encoder) Key(k string) {
	if e.depth == 0 || e.inObject&(1<<(e.depth-1)) == 0 || e.afterKey {
		e.fail(ErrMisuse)
		return
	}
	bit := uint64(1) << (e.depth - 1)
	if e.more&bit != 0 {
		e.buf = append(e.buf, ',')
	}
	e.more |= bit
	e.buf = AppendString(e.buf, k)
	e.buf = append(e.buf, ':')
	e.afterKey = true
}

// Name is an object member name encoded ahead of time, by NewName, so
// that writing it costs one copy: the name of a struct field is the same
// in every value, while Key checks and escapes it each time (on the
// TechEmpower message, about a quarter of the encoder's instructions).
// The zero Name is not a name: Encoder.Name records ErrMisuse.
type Name struct {
	enc string // ,"name": with its escapes; the comma is left out where none is due
}

// NewName encodes k, escaped exactly as Key would write it.
func NewName(k string) Name {
	return Name{enc: "," + string(AppendString(nil, k)) + ":"}
}

// Name writes a member name made by NewName; the next call writes its
// value. It is Key without the per-call escaping.
func (e *Encoder) Name(n Name) {
	if e.depth == 0 || e.inObject&(1<<(e.depth-1)) == 0 || e.afterKey || n.enc == "" {
		e.fail(ErrMisuse)
		return
	}
	bit := uint64(1) << (e.depth - 1)
	enc := n.enc
	if e.more&bit == 0 {
		enc = enc[1:]
	}
	e.more |= bit
	e.buf = append(e.buf, enc...)
	e.afterKey = true
}

// String writes a string value.
func (e *Encoder) String(s string) { e.sep(); e.buf = AppendString(e.buf, s) }

// StringBytes writes b as a string value (not base64, unlike encoding/json
// for []byte: use it for text you hold as bytes).
func (e *Encoder) StringBytes(b []byte) { e.sep(); e.buf = appendString(e.buf, b) }

// Int writes an integer.
func (e *Encoder) Int(i int64) { e.sep(); e.buf = strconv.AppendInt(e.buf, i, 10) }

// Uint writes an unsigned integer.
func (e *Encoder) Uint(u uint64) { e.sep(); e.buf = strconv.AppendUint(e.buf, u, 10) }

// Float64 writes a float64 as encoding/json does; NaN and infinities are
// errors (written as null so the output stays parseable).
func (e *Encoder) Float64(f float64) { e.float(f, 64) }

// Float32 writes a float32 as encoding/json does.
func (e *Encoder) Float32(f float32) { e.float(float64(f), 32) }

func (e *Encoder) float(f float64, bits int) {
	e.sep()
	if math.IsNaN(f) || math.IsInf(f, 0) {
		e.fail(ErrUnsupportedValue)
		e.buf = append(e.buf, "null"...)
		return
	}
	e.buf = AppendFloat(e.buf, f, bits)
}

// Bool writes true or false.
func (e *Encoder) Bool(b bool) {
	e.sep()
	if b {
		e.buf = append(e.buf, "true"...)
	} else {
		e.buf = append(e.buf, "false"...)
	}
}

// Null writes null.
func (e *Encoder) Null() { e.sep(); e.buf = append(e.buf, "null"...) }

// Value writes a nested value that encodes itself.
func (e *Encoder) Value(v Appender) { e.sep(); e.buf = v.AppendJSON(e.buf) }

// AppendFloat appends f in the format of encoding/json: the shortest
// representation that round-trips, in exponent form only for very large or
// very small magnitudes (the ECMAScript Number.toString cut-offs), with a
// two-digit exponent shortened ("1e-7", not "1e-07"). f must be finite.
func AppendFloat(dst []byte, f float64, bits int) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) ||
			bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	dst = strconv.AppendFloat(dst, f, format, -1, bits)
	if format == 'e' {
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// AppendString appends s as a quoted JSON string.
//
// A string of eight bytes or more that needs no escaping is tested here
// (plainSSE2) and copied, without the calls to the generic appendString
// and allPlain: 16 instructions fewer for /json's 13-byte message
// (cachegrind). Any other goes to appendString, which tests it again.
func AppendString(dst []byte, s string) []byte {
	if haveSIMD && len(s) >= 8 && plainSSE2(unsafe.StringData(s), len(s)) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	return appendString(dst, s)
}

// plain[c] is true for the bytes that need no escaping and start no
// multi-byte UTF-8 sequence: ASCII from space on, but for " \ < > &. A
// string made only of them is copied as it is. Indexed by a byte, the
// 256-entry table needs no bounds check.
var plain = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = false
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// allPlain reports whether every byte of s is plain, eight bytes a step:
// whole words from the start, then the last eight bytes (overlapping
// what was checked) for the rest, so that no byte is looked at alone
// unless s is shorter than four. A string of four to seven bytes is two
// overlapping four-byte halves of one word. The byte loop it replaces
// took 8.4 instructions a byte, 168 of the 2,036 a pipelined /json
// request cost (its key and message: 7 and 13 bytes), this 90 for the
// 13 bytes (cachegrind over an exact load, December 2026). Copying each
// word as it is checked, instead of one append after, was dearer still
// (171): the compiler spills the word tests' constants around the stores.
// On amd64 a string of eight bytes or more goes to plainSSE2 instead,
// 16 bytes a step in SSE2 (plain_amd64.s): 89 instructions -> 50 for the
// 13-byte message, call included (cachegrind).
func allPlain[S string | []byte](s S) bool {
	n := len(s)
	if haveSIMD && n >= 8 {
		// The data pointer is the first word of a string and of a slice.
		return plainSSE2(*(**byte)(unsafe.Pointer(&s)), n)
	}
	switch {
	case n >= 8:
		for i := 0; i+8 <= n; i += 8 {
			if !plainWord(load64(s, i)) {
				return false
			}
		}
		return n%8 == 0 || plainWord(load64(s, n-8))
	case n >= 4:
		return plainWord(uint64(load32(s, 0)) | uint64(load32(s, n-4))<<32)
	}
	for i := range n {
		if !plain[s[i]] {
			return false
		}
	}
	return true
}

// plainWord reports whether all eight bytes of x are plain: none below
// 0x20, none from 0x80, none of " \ < > &. Each test is the classic
// word-wise one for a zero byte, (v-0x01..)&^v&0x80.., which is exact
// about whether there is one. '<' and '>' are the two bytes that or-ed
// with 0x02 give '>'; '"' and '&' the two that or-ed with 0x04 give '&'.
func plainWord(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	below := (x - ones*0x20) &^ x
	bs := x ^ ones*'\\'
	angle := (x | ones*0x02) ^ ones*'>'
	quote := (x | ones*0x04) ^ ones*'&'
	zero := (bs-ones)&^bs | (angle-ones)&^angle | (quote-ones)&^quote
	return (below|zero|x)&highs == 0
}

// load64 and load32 read s[i:] as a little-endian word; the compiler
// turns each into one load.
func load64[S string | []byte](s S, i int) uint64 {
	w := s[i : i+8]
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

func load32[S string | []byte](s S, i int) uint32 {
	w := s[i : i+4]
	return uint32(w[0]) | uint32(w[1])<<8 | uint32(w[2])<<16 | uint32(w[3])<<24
}

// appendString copies runs of bytes that need no escaping in one append;
// it is generic so string and []byte share one body without conversion.
func appendString[S string | []byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	// Most strings (keys above all) need no escaping: find that out a
	// word at a time, and copy them in one append.
	if allPlain(s) {
		dst = append(dst, s...)
		return append(dst, '"')
	}
	i := 0
	start := 0
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if plain[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default: // other control characters and <, >, &
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		var r rune
		var size int
		switch v := any(s).(type) {
		case string:
			r, size = utf8.DecodeRuneInString(v[i:])
		case []byte:
			r, size = utf8.DecodeRune(v[i:])
		}
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		// U+2028 and U+2029 are valid JSON but end lines in JavaScript.
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
