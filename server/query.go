package server

// Percent-decoding of path segments and query parameters, into the
// worker's scratch space (see Ctx.QueryValue), without allocating.

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// validEscapes reports whether every '%' in b begins a %XX triplet.
func validEscapes(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] == '%' {
			if i+2 >= len(b) {
				return false
			}
			if _, ok := unhex(b[i+1]); !ok {
				return false
			}
			if _, ok := unhex(b[i+2]); !ok {
				return false
			}
			i += 2
		}
	}
	return true
}

// needsDecoding reports whether b holds a '%' (or, with plus, a '+').
func needsDecoding(b []byte, plus bool) bool {
	for _, c := range b {
		if c == '%' || plus && c == '+' {
			return true
		}
	}
	return false
}

// unescapeInto returns b decoded: b itself when it holds nothing to
// decode, else its decoding appended to *scratch (which grows only when
// it is full: slices returned earlier keep pointing at the old array and
// stay valid). plus decodes '+' as a space (query components). b's escapes
// must be valid (validEscapes): an invalid one is copied as it is.
func unescapeInto(scratch *[]byte, b []byte, plus bool) []byte {
	if !needsDecoding(b, plus) {
		return b
	}
	s := *scratch
	start := len(s)
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '%' && i+2 < len(b):
			h, ok1 := unhex(b[i+1])
			l, ok2 := unhex(b[i+2])
			if ok1 && ok2 {
				c = h<<4 | l
				i += 2
			}
		case c == '+' && plus:
			c = ' '
		}
		s = append(s, c)
	}
	*scratch = s
	return s[start:len(s):len(s)]
}

// unescapeString is the pattern parser's decoding of a literal segment.
func unescapeString(s string) (string, bool) {
	if !validEscapes([]byte(s)) {
		return "", false
	}
	var scratch []byte
	return string(unescapeInto(&scratch, []byte(s), false)), true
}

// equalDecoded reports whether the query component raw, %- and
// +-decoded, is name, without decoding it anywhere.
func equalDecoded(raw []byte, name string) bool {
	j := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch c {
		case '%':
			h, ok1 := unhex(raw[i+1])
			l, ok2 := unhex(raw[i+2])
			if !ok1 || !ok2 {
				return false
			}
			c = h<<4 | l
			i += 2
		case '+':
			c = ' '
		}
		if j == len(name) || name[j] != c {
			return false
		}
		j++
	}
	return j == len(name)
}

// queryValue finds the first value of name in the raw query q, as
// net/url.ParseQuery would: pairs are separated by '&'; a pair without
// '=' has the value ""; '+' is a space and %XX a byte, in names and
// values; a pair whose name or value holds a bad escape (a '%' not
// followed by two hex digits), or a ';', is skipped, as ParseQuery skips
// it (reporting an error we have no use for). The value is decoded into
// *scratch when it needs decoding.
//
// One pass over each pair notes where '=' is and whether the name and
// the value hold anything to decode: a name without escapes is compared
// as it is, a value without escapes is returned as it is (a slice of the
// request). Separate passes (find '&', find '=', look for ';', check and
// compare the name, check the value) cost 240 instructions per call on
// "q=x" (cachegrind); this one a third of that.
func queryValue(q []byte, name string, scratch *[]byte) ([]byte, bool) {
	i := 0
	for i < len(q) {
		start, eq := i, -1
		keyEsc, valEsc, semi := false, false, false
		for ; i < len(q); i++ {
			c := q[i]
			if c == '&' {
				break
			}
			switch c {
			case '=':
				if eq < 0 {
					eq = i
					continue
				}
			case '%', '+':
				if eq < 0 {
					keyEsc = true
				} else {
					valEsc = true
				}
			case ';':
				semi = true
			}
		}
		pair := q[start:i]
		i++ // past the '&'
		if len(pair) == 0 || semi {
			continue
		}
		key, val := pair, pair[len(pair):]
		if eq >= 0 {
			key, val = q[start:eq], q[eq+1:start+len(pair)]
		}
		if keyEsc {
			if !validEscapes(key) || !equalDecoded(key, name) {
				continue
			}
		} else if string(key) != name {
			continue
		}
		if !valEsc {
			return val, true
		}
		if !validEscapes(val) {
			continue
		}
		return unescapeInto(scratch, val, true), true
	}
	return nil, false
}
