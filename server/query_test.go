package server

import (
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
)

func TestQueryValue(t *testing.T) {
	tests := []struct {
		query, name string
		want        string
		ok          bool
	}{
		{"a=1&b=2", "b", "2", true},
		{"a=1&a=2", "a", "1", true},
		{"a", "a", "", true},
		{"a=", "a", "", true},
		{"=x", "", "x", true},
		{"a=1", "b", "", false},
		{"q=hello+world", "q", "hello world", true},
		{"q=%7Bx%7D%20y", "q", "{x} y", true},
		{"q%20r=1", "q r", "1", true},
		{"q+r=1", "q r", "1", true},
		{"q=a%2Bb", "q", "a+b", true},
		{"q=a=b", "q", "a=b", true},
		{"&&q=1&&", "q", "1", true},
		{"q=%zz&q=2", "q", "2", true},   // a bad escape: the pair is skipped, as ParseQuery does
		{"q=%4&q=2", "q", "2", true},    // truncated escape
		{"q=1;r=2&q=3", "q", "3", true}, // ';' is no separator and the pair is skipped
		{"%zz=1&q=2", "q", "2", true},
		{"", "q", "", false},
	}
	for _, tt := range tests {
		var scratch []byte
		got, ok := queryValue([]byte(tt.query), tt.name, &scratch)
		if string(got) != tt.want || ok != tt.ok {
			t.Errorf("queryValue(%q, %q) = %q, %v; want %q, %v", tt.query, tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// checkQueryVsParseQuery compares queryValue with net/url.ParseQuery (the
// oracle) for every name ParseQuery finds in q, and a few it does not.
func checkQueryVsParseQuery(t *testing.T, q string) {
	t.Helper()
	want, _ := url.ParseQuery(q)
	var scratch []byte
	for name, vals := range want {
		got, ok := queryValue([]byte(q), name, &scratch)
		if !ok || string(got) != vals[0] {
			t.Errorf("query %q, name %q: %q, %v; ParseQuery %q", q, name, got, ok, vals[0])
		}
	}
	for _, name := range []string{"a", "b", " ", "", "a b", "%", "+"} {
		if _, in := want[name]; in {
			continue
		}
		if got, ok := queryValue([]byte(q), name, &scratch); ok {
			t.Errorf("query %q, name %q: %q, but ParseQuery has none", q, name, got)
		}
	}
}

func FuzzQueryValue(f *testing.F) {
	for _, q := range []string{"a=1&b=2", "q=hello+world", "q=%zz&q=2", "a;b=1", "%41=%42", "=&=&a"} {
		f.Add(q)
	}
	f.Fuzz(checkQueryVsParseQuery)
}

// TestQueryVsParseQuery runs the differential check over random queries
// from the bytes that matter (separators, escapes, '+') in every run.
func TestQueryVsParseQuery(t *testing.T) {
	const alphabet = "ab =&+%;4F1z"
	r := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for range 20000 {
		b.Reset()
		for range r.IntN(16) {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		checkQueryVsParseQuery(t, b.String())
		if t.Failed() {
			return
		}
	}
}
