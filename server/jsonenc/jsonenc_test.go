package jsonenc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"testing"
)

// stdString is the reference: what encoding/json writes for s.
func stdString(t testing.TB, s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestStringMatchesStdlib(t *testing.T) {
	for _, s := range []string{
		"", "Hello, World!", `"quoted" \back\slash`, "<script>&amp;</script>",
		"\x00\x01\x1f\x7f", "\b\f\n\r\t", "caf\u00e9 \u4e16\u754c \U0001F600",
		"\u2028\u2029", "bad \xff utf8 \xc3", "\xed\xa0\x80 surrogate",
	} {
		if got, want := string(AppendString(nil, s)), stdString(t, s); got != want {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
}

func TestFloatMatchesStdlib(t *testing.T) {
	for _, f := range []float64{0, math.Copysign(0, -1), 1, -1.5, 0.1, 1e-6, 1e-7, 123456789, 1e20, 1e21, 1.7976931348623157e308, 5e-324, 3.14159} {
		want, _ := json.Marshal(f)
		if got := AppendFloat(nil, f, 64); string(got) != string(want) {
			t.Errorf("AppendFloat(%v, 64) = %s, want %s", f, got, want)
		}
		if math.IsInf(float64(float32(f)), 0) {
			continue
		}
		want32, _ := json.Marshal(float32(f))
		if got := AppendFloat(nil, float64(float32(f)), 32); string(got) != string(want32) {
			t.Errorf("AppendFloat(%v, 32) = %s, want %s", f, got, want32)
		}
	}
}

type point struct {
	X, Y float64
}

func (p point) AppendJSON(dst []byte) []byte {
	e := NewEncoder(dst)
	e.BeginObject()
	e.Key("X")
	e.Float64(p.X)
	e.Key("Y")
	e.Float64(p.Y)
	e.EndObject()
	return e.Bytes()
}

type doc struct {
	Name   string   `json:"name"`
	Tags   []string `json:"tags"`
	Count  int64    `json:"count"`
	Ratio  float64  `json:"ratio"`
	OK     bool     `json:"ok"`
	Parent *doc     `json:"parent"`
	At     point    `json:"at"`
	Empty  []int    `json:"empty"`
}

func (d *doc) AppendJSON(dst []byte) []byte {
	e := NewEncoder(dst)
	e.BeginObject()
	e.Key("name")
	e.String(d.Name)
	e.Key("tags")
	e.BeginArray()
	for _, t := range d.Tags {
		e.String(t)
	}
	e.EndArray()
	e.Key("count")
	e.Int(d.Count)
	e.Key("ratio")
	e.Float64(d.Ratio)
	e.Key("ok")
	e.Bool(d.OK)
	e.Key("parent")
	if d.Parent == nil {
		e.Null()
	} else {
		e.Value(d.Parent)
	}
	e.Key("at")
	e.Value(d.At)
	e.Key("empty")
	e.BeginArray()
	for _, v := range d.Empty {
		e.Int(int64(v))
	}
	e.EndArray()
	e.EndObject()
	return e.Bytes()
}

func TestNestedMatchesStdlib(t *testing.T) {
	d := &doc{Name: "a<b>", Tags: []string{"x", "y\n"}, Count: -3, Ratio: 0.25, OK: true,
		Parent: &doc{Name: "root", Tags: []string{}, Empty: []int{}}, At: point{1, 2e-9}, Empty: []int{}}
	want, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.AppendJSON(nil); string(got) != string(want) {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestMisuse(t *testing.T) {
	tests := []struct {
		name string
		f    func(e *Encoder)
		want error
	}{
		{"ok", func(e *Encoder) { e.BeginArray(); e.Int(1); e.EndArray() }, nil},
		{"key outside object", func(e *Encoder) { e.Key("a") }, ErrMisuse},
		{"value without key", func(e *Encoder) { e.BeginObject(); e.Int(1); e.EndObject() }, ErrMisuse},
		{"unclosed", func(e *Encoder) { e.BeginObject() }, ErrMisuse},
		{"dangling key", func(e *Encoder) { e.BeginObject(); e.Key("a"); e.EndObject() }, ErrMisuse},
		{"mismatched", func(e *Encoder) { e.BeginObject(); e.EndArray() }, ErrMisuse},
		{"nan", func(e *Encoder) { e.Float64(math.NaN()) }, ErrUnsupportedValue},
		{"too deep", func(e *Encoder) {
			for range maxDepth + 1 {
				e.BeginArray()
			}
		}, ErrDepth},
	}
	for _, tt := range tests {
		var e Encoder
		tt.f(&e)
		if got := e.Err(); got != tt.want {
			t.Errorf("%s: Err() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

type message struct{ Message string }

func (m message) AppendJSON(dst []byte) []byte {
	e := NewEncoder(dst)
	e.BeginObject()
	e.Key("message")
	e.String(m.Message)
	e.EndObject()
	return e.Bytes()
}

func TestNoAllocs(t *testing.T) {
	buf := make([]byte, 0, 256)
	if a := testing.AllocsPerRun(1000, func() {
		buf = message{Message: "Hello, World!"}.AppendJSON(buf[:0])
	}); a != 0 {
		t.Errorf("AppendJSON allocates %v times, want 0", a)
	}
}

func FuzzStringMatchesStdlib(f *testing.F) {
	for _, s := range []string{"", "a", "<\u2028>", "\xff\xfe", "\x00\"\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(AppendString(nil, s)), stdString(t, s); got != want {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
		if got, want := string(appendString(nil, []byte(s))), stdString(t, s); got != want {
			t.Fatalf("appendString([]byte %q) = %s, want %s", s, got, want)
		}
		// After other bytes, with room in dst.
		room := make([]byte, 1, len(s)+8)
		if got, want := string(AppendString(room, s)[1:]), stdString(t, s); got != want {
			t.Fatalf("AppendString(dst with room, %q) = %s, want %s", s, got, want)
		}
	})
}

func FuzzFloatMatchesStdlib(f *testing.F) {
	for _, v := range []float64{0, 1e21, 1e-7, 123.456} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		want, _ := json.Marshal(v)
		if got := AppendFloat(nil, v, 64); string(got) != string(want) {
			t.Fatalf("AppendFloat(%v) = %s, want %s", v, got, want)
		}
	})
}

// BenchmarkEncoder and BenchmarkStdlibMarshal show why the server does not
// use encoding/json on the request path.
func BenchmarkEncoder(b *testing.B) {
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = message{Message: "Hello, World!"}.AppendJSON(buf[:0])
	}
}

func BenchmarkStdlibMarshal(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(message{Message: "Hello, World!"}); err != nil {
			b.Fatal(err)
		}
	}
}

func ExampleEncoder() {
	type user struct {
		Name  string
		Roles []string
	}
	u := user{Name: "Ada <admin>", Roles: []string{"ops", "dev"}}
	e := NewEncoder(nil)
	e.BeginObject()
	e.Key("name")
	e.String(u.Name)
	e.Key("roles")
	e.BeginArray()
	for _, r := range u.Roles {
		e.String(r)
	}
	e.EndArray()
	e.EndObject()
	fmt.Println(string(e.Bytes()), e.Err())
	// Output: {"name":"Ada \u003cadmin\u003e","roles":["ops","dev"]} <nil>
}

// TestAllPlainEveryByte puts every byte value at every position of
// strings of 0 to 49 bytes (the byte loop, the two halves of one word,
// whole words and the overlapping last word; on amd64 the two words in
// one vector, whole 16-byte blocks and the overlapping last block) and
// compares allPlain with the table.
func TestAllPlainEveryByte(t *testing.T) {
	for n := range 50 {
		base := make([]byte, n)
		for i := range base {
			base[i] = 'a' + byte(i%26)
		}
		if !allPlain(base) || !allPlain(string(base)) {
			t.Fatalf("allPlain(%q) = false", base)
		}
		for pos := range n {
			for c := range 256 {
				s := bytes.Clone(base)
				s[pos] = byte(c)
				if got, want := allPlain(s), plain[c]; got != want {
					t.Fatalf("allPlain(%q) = %v, want %v (byte %#x at %d of %d)", s, got, want, c, pos, n)
				}
				if got := allPlain(string(s)); got != plain[c] {
					t.Fatalf("allPlain(string %q) = %v, want %v", s, got, plain[c])
				}
			}
		}
	}
}

// TestNameMatchesKey: an object written with Names is byte for byte the
// one written with Key, escapes and commas included, and misused Names
// are refused like misused keys.
func TestNameMatchesKey(t *testing.T) {
	keys := []string{"message", "a<b>", `q"uote`, "caf\u00e9", ""}
	withKey, withName := NewEncoder(nil), NewEncoder(nil)
	withKey.BeginObject()
	withName.BeginObject()
	for i, k := range keys {
		withKey.Key(k)
		withKey.Int(int64(i))
		withName.Name(NewName(k))
		withName.Int(int64(i))
	}
	withKey.EndObject()
	withName.EndObject()
	if got, want := string(withName.Bytes()), string(withKey.Bytes()); got != want {
		t.Errorf("with Name: %s\nwith Key:  %s", got, want)
	}
	if err := withName.Err(); err != nil {
		t.Errorf("Err() = %v", err)
	}
	for _, tt := range []struct {
		name string
		f    func(e *Encoder)
	}{
		{"outside object", func(e *Encoder) { e.Name(NewName("a")) }},
		{"in array", func(e *Encoder) { e.BeginArray(); e.Name(NewName("a")) }},
		{"after a name", func(e *Encoder) { e.BeginObject(); e.Name(NewName("a")); e.Name(NewName("b")) }},
		{"zero Name", func(e *Encoder) { e.BeginObject(); e.Name(Name{}); e.Int(1); e.EndObject() }},
	} {
		var e Encoder
		tt.f(&e)
		if e.Err() != ErrMisuse {
			t.Errorf("%s: Err() = %v, want ErrMisuse", tt.name, e.Err())
		}
	}
}
