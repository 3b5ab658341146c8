package console

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzEscape: whatever a value holds, the console's JSON of it is valid,
// decodes back to the same value when nothing was cut, and carries no
// control byte, no escaped-rune character and no "HOTPATH-"; a log line
// of it carries none either.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "plain", "a\r\nb", "\x1b[2K", "HOTPATH-REPORT {}", "\u202e\u0085\x7f", "\xff\xfe", `"\`, "HOTPATHHOTPATH--"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, key, val string) {
		v := map[string]any{key: val, "list": []any{val, 1.5, true, nil}}
		b, err := json.Marshal(v)
		if err != nil {
			t.Skip()
		}
		out, err := boundJSON(b, levels[0])
		if err != nil {
			t.Fatalf("boundJSON(%s): %v", b, err)
		}
		check := func(what string, s []byte) {
			for _, c := range s {
				if c < 0x20 || c == 0x7f {
					t.Fatalf("%s: control byte %#02x in %q", what, c, s)
				}
			}
			for _, r := range string(s) {
				if escapeRune(r) {
					t.Fatalf("%s: %U in %q", what, r, s)
				}
			}
			if strings.Contains(string(s), marker) {
				t.Fatalf("%s: %q in %q", what, marker, s)
			}
		}
		check("json", out)
		for _, l := range logLines(val) {
			check("log line", []byte(l))
		}
		// The workload's stream, cut anywhere: its lines and tabs stay,
		// nothing else that acts on a terminal gets through.
		c := &Console{}
		cutAt := len(key) % (len(val) + 1)
		stream := append(c.escapeStream([]byte(val[:cutAt])), c.escapeStream([]byte(val[cutAt:]+"\n"))...)
		for _, l := range strings.Split(strings.ReplaceAll(string(stream), "\t", " "), "\n") {
			check("stream", []byte(l))
		}
		var want, got any
		json.Unmarshal(b, &want)
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q: invalid JSON: %v", out, err)
		}
		if len(key) <= levels[0].str && len(val) <= levels[0].str && !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %v, want %v", got, want)
		}
	})
}
