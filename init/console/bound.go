package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Bounds of what the Console writes. EC2's get-console-output returns the
// last 64 KiB: the boot report (MaxReport) must fit whole, and its
// compact form (MaxCompact) together with the KeepEvery bytes that may
// follow it before it is printed again.
const (
	// MaxLine bounds one log line (escaped, without the prefix).
	MaxLine = 1 << 10
	// MaxLog bounds the lines of one Logf call together.
	MaxLog = 4 << 10
	// MaxEvent bounds one event line: a NIC re-application's steps with
	// their details on a 64-queue NIC fit.
	MaxEvent = 16 << 10
	// MaxReport bounds the boot report line, MaxCompact its reprints.
	MaxReport  = 48 << 10
	MaxCompact = 24 << 10
)

// limits are the bounds boundJSON applies to every string (bytes) and to
// every array and object (elements).
type limits struct{ str, items int }

// The bounds tried in turn until a line fits: a normal report passes the
// first unchanged; a hostile value (a 1 MiB instance id, 8,000 user-data
// errors) is cut first, a longer and longer report ever more.
var levels = []limits{{2048, 1024}, {512, 256}, {128, 64}, {64, 32}, {32, 16}}

// boundJSON rewrites the JSON value b with every string escaped
// (appendJSONString) and cut to lim.str bytes and every array and object
// cut to lim.items elements. When it cut something and b is an object,
// it adds the key "truncated" saying what was cut.
func boundJSON(b []byte, lim limits) ([]byte, error) {
	w := &bounder{dec: json.NewDecoder(bytes.NewReader(b)), lim: lim}
	w.dec.UseNumber()
	if err := w.value("", 0); err != nil {
		return nil, fmt.Errorf("console: bound: %w", err)
	}
	return w.out, nil
}

type bounder struct {
	dec   *json.Decoder
	lim   limits
	out   []byte
	notes []string
	more  int // notes beyond the first few
}

func (w *bounder) note(format string, args ...any) {
	if len(w.notes) >= 8 {
		w.more++
		return
	}
	w.notes = append(w.notes, fmt.Sprintf(format, args...))
}

func (w *bounder) str(path, s string) {
	if c, cutDone := cut(s, w.lim.str); cutDone {
		w.note("%s: %d bytes cut to %d", path, len(s), w.lim.str)
		s = c
	}
	w.out = appendJSONString(w.out, s)
}

func (w *bounder) value(path string, depth int) error {
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		end := byte(']')
		if v == '{' {
			end = '}'
		}
		w.out = append(w.out, byte(v))
		n, dropped := 0, 0
		for w.dec.More() {
			key := ""
			if v == '{' {
				kt, err := w.dec.Token()
				if err != nil {
					return err
				}
				key, _ = kt.(string)
			}
			if n >= w.lim.items {
				var skip json.RawMessage
				if err := w.dec.Decode(&skip); err != nil {
					return err
				}
				dropped++
				continue
			}
			if n > 0 {
				w.out = append(w.out, ',')
			}
			sub := path + "[" + strconv.Itoa(n) + "]"
			if v == '{' {
				sub = strings.TrimPrefix(path+"."+key, ".")
				w.str(sub+" (key)", key)
				w.out = append(w.out, ':')
			}
			if err := w.value(sub, depth+1); err != nil {
				return err
			}
			n++
		}
		if _, err := w.dec.Token(); err != nil {
			return err
		}
		if dropped > 0 {
			w.note("%s: %d of %d elements left out", strings.TrimPrefix(path, "."), dropped, n+dropped)
		}
		if depth == 0 && v == '{' && len(w.notes) > 0 {
			if n > 0 {
				w.out = append(w.out, ',')
			}
			w.out = appendJSONString(w.out, "truncated")
			w.out = append(w.out, ':')
			s := strings.Join(w.notes, "; ")
			if w.more > 0 {
				s += "; and " + strconv.Itoa(w.more) + " more"
			}
			w.out = appendJSONString(w.out, s)
		}
		w.out = append(w.out, end)
	case string:
		w.str(path, v)
	case json.Number:
		w.out = append(w.out, v...)
	case bool:
		w.out = strconv.AppendBool(w.out, v)
	case nil:
		w.out = append(w.out, "null"...)
	default:
		return errors.New("unexpected token")
	}
	return nil
}

// fit renders v as prefix and JSON within max bytes (newline included)
// under the first of lims that makes it fit, or returns nil.
func fit(prefix string, v any, max int, lims []limits) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	for _, lim := range lims {
		out, err := boundJSON(b, lim)
		if err == nil && len(prefix)+len(out)+1 <= max {
			return append(append([]byte(prefix), out...), '\n')
		}
	}
	return nil
}

// boundLine is fit over every level; when none makes v fit (or v does
// not marshal), it renders fallback's value instead, which must be small.
func boundLine(prefix string, v any, max int, fallback func(why string) any) []byte {
	if line := fit(prefix, v, max, levels); line != nil {
		return line
	}
	why := fmt.Sprintf("more than the %d bytes a console line may hold", max)
	if _, err := json.Marshal(v); err != nil {
		why = err.Error()
	}
	fb, _ := json.Marshal(fallback(why))
	out, _ := boundJSON(fb, limits{str: 256, items: 64})
	return append(append([]byte(prefix), out...), '\n')
}
