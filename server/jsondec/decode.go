package jsondec

import (
	"encoding/binary"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Options are the caller's choices for a Decoder.
type Options struct {
	// DisallowUnknownFields refuses a member that the Schema does not
	// name (encoding/json's Decoder.DisallowUnknownFields). By default
	// such a member is checked for syntax and skipped.
	DisallowUnknownFields bool
	// AllowTrailingData stops at the end of the object and leaves what
	// follows unread, as json.Decoder.Decode does. By default anything
	// but white space after the object is an error, as in json.Unmarshal.
	AllowTrailingData bool
}

// maxDepth is how deep values may nest, the object itself counting as
// one: encoding/json's limit, so that both refuse the same inputs.
const maxDepth = 10000

// Decoder holds one worker's decoding state: its options and the scratch
// space that decoded strings and slices live in. It is not safe for
// concurrent use: keep one per worker (PerCPU does that). Its memory grows
// to what the largest request needed and is reused from then on, so that
// decoding allocates nothing in steady state.
type Decoder struct {
	opts Options

	// The scratch space, emptied at the start of each decode. Slices
	// handed out are capped at their length, so a caller's append copies
	// instead of writing over what follows.
	text  []byte   // strings that had escapes or invalid UTF-8
	strs  []string // elements of []string fields
	words []uint64 // elements of numeric and bool slices, 8-aligned

	stack []byte // open '[' and '{' while skipping a value
	err   Error  // the last error, returned by pointer (no allocation)

	data  []byte
	i     int
	field string // the member being decoded, for errors
}

// NewDecoder returns a Decoder with the given options.
func NewDecoder(opts Options) *Decoder { return &Decoder{opts: opts} }

// Error is a request body that could not be decoded: where, and why.
// The Decoder returns the same *Error each time (decoding allocates
// nothing, even for a bad body): it is valid until the next decode.
type Error struct {
	// Offset is the byte offset in the input where the problem was found.
	Offset int
	// Field is the member being decoded (a Schema name, or for an
	// unknown member its name as sent), "" outside any member.
	Field string
	// Reason says what is wrong, e.g. "expected a number".
	Reason string
}

func (e *Error) Error() string {
	s := "jsondec: " + e.Reason + " at offset " + strconv.Itoa(e.Offset)
	if e.Field != "" {
		s += " (member " + strconv.Quote(e.Field) + ")"
	}
	return s
}

func (d *Decoder) fail(at int, reason string) *Error {
	d.err = Error{Offset: at, Field: d.field, Reason: reason}
	return &d.err
}

// The reasons an Error gives.
const (
	reasonEOF       = "unexpected end of input"
	reasonSyntax    = "invalid character"
	reasonNotObject = "expected an object"
	reasonUnknown   = "unknown member"
	reasonTrailing  = "data after the object"
	reasonDepth     = "nesting deeper than 10000"
	reasonRange     = "number out of range"
)

func (d *Decoder) decode(data []byte, base unsafe.Pointer, fields []field) error {
	d.data, d.i, d.field = data, 0, ""
	d.text, d.strs, d.words = d.text[:0], d.strs[:0], d.words[:0]
	err := d.top(base, fields)
	d.data = nil
	if err != nil {
		return err
	}
	return nil
}

func (d *Decoder) top(base unsafe.Pointer, fields []field) *Error {
	d.ws()
	if d.i >= len(d.data) {
		return d.fail(d.i, reasonEOF)
	}
	switch d.data[d.i] {
	case '{':
		if err := d.object(base, fields); err != nil {
			return err
		}
	case 'n':
		if err := d.literal("null"); err != nil {
			return err
		}
	default:
		at := d.i
		if err := d.skip(0); err != nil {
			return err
		}
		return d.fail(at, reasonNotObject)
	}
	if d.opts.AllowTrailingData {
		return nil
	}
	d.ws()
	if d.i < len(d.data) {
		return d.fail(d.i, reasonTrailing)
	}
	return nil
}

// ws skips JSON white space.
func (d *Decoder) ws() {
	if d.i < len(d.data) && d.data[d.i] > ' ' {
		return // the common case: no white space at all
	}
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// expect consumes c after white space.
func (d *Decoder) expect(c byte) *Error {
	d.ws()
	if d.i >= len(d.data) {
		return d.fail(d.i, reasonEOF)
	}
	if d.data[d.i] != c {
		return d.fail(d.i, reasonSyntax)
	}
	d.i++
	return nil
}

func (d *Decoder) literal(lit string) *Error {
	for j := range len(lit) {
		if d.i+j >= len(d.data) {
			return d.fail(d.i+j, reasonEOF)
		}
		if d.data[d.i+j] != lit[j] {
			return d.fail(d.i+j, reasonSyntax)
		}
	}
	d.i += len(lit)
	return nil
}

// object decodes the members of an object at d.i onto the fields at base.
func (d *Decoder) object(base unsafe.Pointer, fields []field) *Error {
	d.i++ // '{'
	d.ws()
	if d.i < len(d.data) && d.data[d.i] == '}' {
		d.i++
		return nil
	}
	for {
		d.ws()
		keyAt := d.i
		if d.i >= len(d.data) {
			return d.fail(d.i, reasonEOF)
		}
		if d.data[d.i] != '"' {
			return d.fail(d.i, reasonSyntax)
		}
		textMark := len(d.text)
		key, err := d.str()
		if err != nil {
			return err
		}
		if err := d.expect(':'); err != nil {
			return err
		}
		d.ws()
		f := lookup(fields, key)
		if f == nil {
			if d.opts.DisallowUnknownFields {
				d.field = unsafe.String(unsafe.SliceData(key), len(key))
				return d.fail(keyAt, reasonUnknown)
			}
			// The name was needed only to look it up.
			d.text = d.text[:textMark]
			if err := d.skip(1); err != nil {
				return err
			}
		} else {
			d.text = d.text[:textMark]
			d.field = f.name
			if err := d.value(f, unsafe.Add(base, f.offset)); err != nil {
				return err
			}
			d.field = ""
		}
		d.ws()
		if d.i >= len(d.data) {
			return d.fail(d.i, reasonEOF)
		}
		switch d.data[d.i] {
		case ',':
			d.i++
		case '}':
			d.i++
			return nil
		default:
			return d.fail(d.i, reasonSyntax)
		}
	}
}

func lookup(fields []field, name []byte) *field {
	if len(name) == 0 {
		return nil // a Schema name is never empty
	}
	for i := range fields {
		f := &fields[i]
		// Length and last byte first: names of one length are common.
		if len(f.name) == len(name) && f.name[len(f.name)-1] == name[len(name)-1] && f.name == string(name) {
			return f
		}
	}
	return nil
}

// value decodes the value at d.i into the field f at p.
func (d *Decoder) value(f *field, p unsafe.Pointer) *Error {
	if d.i >= len(d.data) {
		return d.fail(d.i, reasonEOF)
	}
	if d.data[d.i] == 'n' {
		// null leaves a field as it is, but a slice becomes nil, as in
		// encoding/json.
		if err := d.literal("null"); err != nil {
			return err
		}
		if f.slice {
			*(*unsafeSlice)(p) = unsafeSlice{}
		}
		return nil
	}
	if !f.slice {
		return d.scalar(f.kind, p)
	}
	if d.data[d.i] != '[' {
		at := d.i
		if err := d.skip(0); err != nil {
			return err
		}
		return d.fail(at, "expected an array")
	}
	d.i++
	if f.kind == kString {
		return d.stringArray(p)
	}
	return d.wordArray(f.kind, p)
}

// unsafeSlice is the layout of every slice header.
type unsafeSlice struct {
	data     unsafe.Pointer
	len, cap int
}

// empty is what an empty, non-nil slice points to: encoding/json makes
// `[]` an empty slice, not nil, and so does this without allocating.
var empty uint64

// wordArray decodes the elements of a numeric or boolean array (d.i just
// past '[') into d.words, and points the slice at p at them.
func (d *Decoder) wordArray(k kind, p unsafe.Pointer) *Error {
	size := k.size()
	startWord := len(d.words)
	n := 0
	var elem [8]byte
	d.ws()
	if d.i < len(d.data) && d.data[d.i] == ']' {
		d.i++
		*(*unsafeSlice)(p) = unsafeSlice{data: unsafe.Pointer(&empty)}
		return nil
	}
	for {
		d.ws()
		if d.i >= len(d.data) {
			return d.fail(d.i, reasonEOF)
		}
		clear(elem[:])
		if d.data[d.i] == 'n' { // null: a zero element
			if err := d.literal("null"); err != nil {
				return err
			}
		} else if err := d.scalar(k, unsafe.Pointer(&elem)); err != nil {
			return err
		}
		// Append size bytes at byte startWord*8 + n*size.
		end := startWord*8 + (n+1)*int(size)
		if need := (end + 7) / 8; need > len(d.words) {
			d.words = append(d.words, 0)
		}
		dst := unsafe.Add(unsafe.Pointer(unsafe.SliceData(d.words)), startWord*8+n*int(size))
		copy(unsafe.Slice((*byte)(dst), size), elem[:size])
		n++
		d.ws()
		if d.i >= len(d.data) {
			return d.fail(d.i, reasonEOF)
		}
		switch d.data[d.i] {
		case ',':
			d.i++
		case ']':
			d.i++
			at := unsafe.Add(unsafe.Pointer(unsafe.SliceData(d.words)), startWord*8)
			*(*unsafeSlice)(p) = unsafeSlice{data: at, len: n, cap: n}
			return nil
		default:
			return d.fail(d.i, reasonSyntax)
		}
	}
}

// stringArray decodes the elements of a string array (d.i just past '[')
// into d.strs, and points the slice at p at them.
func (d *Decoder) stringArray(p unsafe.Pointer) *Error {
	start := len(d.strs)
	d.ws()
	if d.i < len(d.data) && d.data[d.i] == ']' {
		d.i++
		*(*unsafeSlice)(p) = unsafeSlice{data: unsafe.Pointer(&empty)}
		return nil
	}
	for {
		d.ws()
		if d.i >= len(d.data) {
			return d.fail(d.i, reasonEOF)
		}
		var s string
		if d.data[d.i] == 'n' { // null: an empty element
			if err := d.literal("null"); err != nil {
				return err
			}
		} else if err := d.scalar(kString, unsafe.Pointer(&s)); err != nil {
			return err
		}
		d.strs = append(d.strs, s)
		d.ws()
		if d.i >= len(d.data) {
			return d.fail(d.i, reasonEOF)
		}
		switch d.data[d.i] {
		case ',':
			d.i++
		case ']':
			d.i++
			s := d.strs[start:len(d.strs):len(d.strs)]
			*(*[]string)(p) = s
			return nil
		default:
			return d.fail(d.i, reasonSyntax)
		}
	}
}

// scalar decodes the non-null value at d.i into p, of kind k.
func (d *Decoder) scalar(k kind, p unsafe.Pointer) *Error {
	at := d.i
	c := d.data[d.i]
	switch {
	case c == '"':
		s, err := d.str()
		if err != nil {
			return err
		}
		if k != kString {
			return d.fail(at, k.expected())
		}
		*(*string)(p) = unsafe.String(unsafe.SliceData(s), len(s))
		return nil
	case c == 't' || c == 'f':
		lit := "true"
		if c == 'f' {
			lit = "false"
		}
		if err := d.literal(lit); err != nil {
			return err
		}
		if k != kBool {
			return d.fail(at, k.expected())
		}
		*(*bool)(p) = c == 't'
		return nil
	case c == '-' || '0' <= c && c <= '9':
		num, err := d.number()
		if err != nil {
			return err
		}
		return d.setNumber(k, p, num, at)
	}
	// An object, an array, or not JSON: the value is refused either way,
	// for its syntax or its type.
	if err := d.skip(0); err != nil {
		return err
	}
	return d.fail(at, k.expected())
}

// number scans a JSON number at d.i and returns its text.
func (d *Decoder) number() (string, *Error) {
	start := d.i
	data := d.data
	i := d.i
	if data[i] == '-' {
		i++
	}
	if i < len(data) && data[i] == '0' {
		i++
	} else if j := digits(data, i); j > i {
		i = j
	} else {
		return "", d.failEnd(i)
	}
	if i < len(data) && data[i] == '.' {
		j := digits(data, i+1)
		if j == i+1 {
			return "", d.failEnd(j)
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := digits(data, i)
		if j == i {
			return "", d.failEnd(j)
		}
		i = j
	}
	d.i = i
	return unsafe.String(&data[start], i-start), nil
}

// digits returns the index of the first byte from i that is not a digit.
func digits(data []byte, i int) int {
	for i < len(data) && '0' <= data[i] && data[i] <= '9' {
		i++
	}
	return i
}

// failEnd is a syntax error at i, or the end of input there.
func (d *Decoder) failEnd(i int) *Error {
	if i >= len(d.data) {
		return d.fail(i, reasonEOF)
	}
	return d.fail(i, reasonSyntax)
}

// setNumber stores num as k at p, refusing what encoding/json refuses: a
// fraction or exponent in an integer, a negative unsigned, a value out of
// the field's range. strconv does not keep num (its errors copy it), so
// num may alias the input.
func (d *Decoder) setNumber(k kind, p unsafe.Pointer, num string, at int) *Error {
	switch k {
	case kInt8, kInt16, kInt32, kInt64:
		bits := int(k.size()) * 8
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return d.fail(at, k.expected())
		}
		if bits < 64 && (n < -1<<(bits-1) || n > 1<<(bits-1)-1) {
			return d.fail(at, reasonRange)
		}
		switch k {
		case kInt8:
			*(*int8)(p) = int8(n)
		case kInt16:
			*(*int16)(p) = int16(n)
		case kInt32:
			*(*int32)(p) = int32(n)
		default:
			*(*int64)(p) = n
		}
	case kUint8, kUint16, kUint32, kUint64:
		bits := int(k.size()) * 8
		n, err := strconv.ParseUint(num, 10, 64)
		if err != nil {
			return d.fail(at, k.expected())
		}
		if bits < 64 && n > 1<<bits-1 {
			return d.fail(at, reasonRange)
		}
		switch k {
		case kUint8:
			*(*uint8)(p) = uint8(n)
		case kUint16:
			*(*uint16)(p) = uint16(n)
		case kUint32:
			*(*uint32)(p) = uint32(n)
		default:
			*(*uint64)(p) = n
		}
	case kFloat32:
		f, err := strconv.ParseFloat(num, 32)
		if err != nil || math.Abs(f) > math.MaxFloat32 {
			return d.fail(at, reasonRange)
		}
		*(*float32)(p) = float32(f)
	case kFloat64:
		f, ok := exactFloat(num)
		if !ok {
			var err error
			if f, err = strconv.ParseFloat(num, 64); err != nil {
				return d.fail(at, reasonRange)
			}
		}
		*(*float64)(p) = f
	default:
		return d.fail(at, k.expected())
	}
	return nil
}

// pow10 are the powers of ten that a float64 holds exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// exactFloat converts num, a valid JSON number, the fast way when that is
// exact: a mantissa of at most 2^53 and a power of ten of at most 22 are
// both exact float64s, so one multiplication or division rounds the
// result correctly (Clinger's fast path, which strconv also takes, but
// only after a general parse that was 14% of a /v1/score decode's
// instructions, cachegrind). It reports false for any other number.
func exactFloat(num string) (float64, bool) {
	i, neg := 0, false
	if num[0] == '-' {
		neg, i = true, 1
	}
	var mant uint64
	nd, exp := 0, 0
	afterDot := false
	for ; i < len(num); i++ {
		c := num[i]
		if c == '.' {
			afterDot = true
			continue
		}
		if c == 'e' || c == 'E' {
			break
		}
		if afterDot {
			exp--
		}
		if mant == 0 && c == '0' {
			continue // a leading zero changes only the scale
		}
		if nd++; nd > 15 { // 10^15 < 2^53
			return 0, false
		}
		mant = mant*10 + uint64(c-'0')
	}
	if i < len(num) { // the exponent
		i++
		eneg := false
		if num[i] == '+' || num[i] == '-' {
			eneg = num[i] == '-'
			i++
		}
		e := 0
		for ; i < len(num); i++ {
			if e = e*10 + int(num[i]-'0'); e > 1000 {
				return 0, false
			}
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	f := float64(mant)
	switch {
	case mant == 0:
	case exp < -22 || exp > 22:
		return 0, false
	case exp < 0:
		f /= pow10[-exp]
	default:
		f *= pow10[exp]
	}
	if neg {
		f = -f
	}
	return f, true
}

// str scans the string at d.i (its opening quote) and returns its
// contents: a slice of the input when it has no escapes and is valid
// UTF-8, as most are, or else its decoded form appended to d.text.
// Decoding follows encoding/json: escapes, surrogate pairs joined, a
// lone surrogate or an invalid UTF-8 byte replaced by U+FFFD, a control
// character refused.
func (d *Decoder) str() ([]byte, *Error) {
	data := d.data
	start := d.i + 1
	i := start
	for i < len(data) {
		// Most of a string is plain ASCII: skip it eight bytes a step,
		// then a byte at a time.
		for i+8 <= len(data) && plainWord(binary.LittleEndian.Uint64(data[i:])) {
			i += 8
		}
		for i < len(data) && plainASCII[data[i]] {
			i++
		}
		if i >= len(data) {
			break
		}
		c := data[i]
		switch {
		case c == '"':
			d.i = i + 1
			return data[start:i:i], nil
		case c == '\\':
			return d.strSlow(start, i)
		case c < 0x20:
			return nil, d.fail(i, "control character in string")
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return d.strSlow(start, i)
			}
			i += size
		}
	}
	return nil, d.fail(i, reasonEOF)
}

// plainASCII[c]: c needs no attention inside a string: ASCII, not a
// control character, not '"' or '\\'.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// plainWord reports whether the eight bytes of x are all plainASCII:
// none below 0x20, none from 0x80, no '"' and no '\\'. Each test is the
// classic word-wise one for a zero byte, (v-0x01..)&^v&0x80.., exact
// about whether there is one (as in package jsonenc).
func plainWord(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	below := (x - ones*0x20) &^ x
	q := x ^ ones*'"'
	bs := x ^ ones*'\\'
	zero := (q-ones)&^q | (bs-ones)&^bs
	return (below|zero|x)&highs == 0
}

// strSlow decodes the string that starts at start into d.text, from i,
// the first byte that needs it.
func (d *Decoder) strSlow(start, i int) ([]byte, *Error) {
	data := d.data
	mark := len(d.text)
	d.text = append(d.text, data[start:i]...)
	for i < len(data) {
		c := data[i]
		switch {
		case c == '"':
			d.i = i + 1
			return d.text[mark:len(d.text):len(d.text)], nil
		case c < 0x20:
			return nil, d.fail(i, "control character in string")
		case c == '\\':
			if i+1 >= len(data) {
				return nil, d.fail(i+1, reasonEOF)
			}
			switch e := data[i+1]; e {
			case '"', '\\', '/':
				d.text = append(d.text, e)
			case 'b':
				d.text = append(d.text, '\b')
			case 'f':
				d.text = append(d.text, '\f')
			case 'n':
				d.text = append(d.text, '\n')
			case 'r':
				d.text = append(d.text, '\r')
			case 't':
				d.text = append(d.text, '\t')
			case 'u':
				r, err := d.hex4(i + 2)
				if err != nil {
					return nil, err
				}
				i += 6
				if utf16.IsSurrogate(r) {
					// A pair only if a valid low half follows; otherwise
					// U+FFFD, and what follows is decoded on its own.
					if i+6 <= len(data) && data[i] == '\\' && data[i+1] == 'u' {
						if r2, err := d.hex4(i + 2); err == nil {
							if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
								d.text = utf8.AppendRune(d.text, dec)
								i += 6
								continue
							}
						}
					}
					r = utf8.RuneError // (AppendRune would write it for r too)
				}
				d.text = utf8.AppendRune(d.text, r)
				continue
			default:
				return nil, d.fail(i+1, "invalid escape in string")
			}
			i += 2
		case c < utf8.RuneSelf:
			d.text = append(d.text, c)
			i++
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				d.text = utf8.AppendRune(d.text, utf8.RuneError)
			} else {
				d.text = append(d.text, data[i:i+size]...)
			}
			i += size
		}
	}
	return nil, d.fail(i, reasonEOF)
}

// hex4 reads the four hex digits of a \u escape at i.
func (d *Decoder) hex4(i int) (rune, *Error) {
	var r rune
	for j := i; j < i+4; j++ {
		if j >= len(d.data) {
			return 0, d.fail(j, reasonEOF)
		}
		c := d.data[j]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, d.fail(j, "invalid escape in string")
		}
		r = r<<4 | rune(c)
	}
	return r, nil
}

// skip checks the syntax of the value at d.i and moves past it, without
// recursion: the open brackets are a stack of bytes in d.stack. depth is
// how many arrays and objects enclose the value (for maxDepth).
func (d *Decoder) skip(depth int) *Error {
	d.stack = d.stack[:0]
	for {
		// A value.
		d.ws()
		if d.i >= len(d.data) {
			return d.fail(d.i, reasonEOF)
		}
		switch c := d.data[d.i]; c {
		case '{', '[':
			if depth+len(d.stack)+1 > maxDepth {
				return d.fail(d.i, reasonDepth)
			}
			d.stack = append(d.stack, c)
			d.i++
			d.ws()
			if d.i < len(d.data) && d.data[d.i] == c+2 { // '}' or ']'
				d.i++
				d.stack = d.stack[:len(d.stack)-1]
				break
			}
			if c == '{' {
				if err := d.skipKey(); err != nil {
					return err
				}
			}
			continue
		case '"':
			mark := len(d.text)
			if _, err := d.str(); err != nil {
				return err
			}
			d.text = d.text[:mark]
		case 't':
			if err := d.literal("true"); err != nil {
				return err
			}
		case 'f':
			if err := d.literal("false"); err != nil {
				return err
			}
		case 'n':
			if err := d.literal("null"); err != nil {
				return err
			}
		default:
			if c != '-' && (c < '0' || c > '9') {
				return d.fail(d.i, reasonSyntax)
			}
			if _, err := d.number(); err != nil {
				return err
			}
		}
		// After a value: close what ends here, or go on to the next.
		for {
			if len(d.stack) == 0 {
				return nil
			}
			d.ws()
			if d.i >= len(d.data) {
				return d.fail(d.i, reasonEOF)
			}
			open := d.stack[len(d.stack)-1]
			c := d.data[d.i]
			if c == open+2 {
				d.i++
				d.stack = d.stack[:len(d.stack)-1]
				continue
			}
			if c != ',' {
				return d.fail(d.i, reasonSyntax)
			}
			d.i++
			if open == '{' {
				if err := d.skipKey(); err != nil {
					return err
				}
			}
			break
		}
	}
}

// skipKey moves past `"name":` in an object being skipped.
func (d *Decoder) skipKey() *Error {
	d.ws()
	if d.i >= len(d.data) {
		return d.fail(d.i, reasonEOF)
	}
	if d.data[d.i] != '"' {
		return d.fail(d.i, reasonSyntax)
	}
	mark := len(d.text)
	if _, err := d.str(); err != nil {
		return err
	}
	d.text = d.text[:mark]
	return d.expect(':')
}
