package jsondec

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// score is a /v1/score request body as the example API takes it.
type score struct {
	UserID   int64     `json:"user_id"`
	ItemID   string    `json:"item_id"`
	Session  string    `json:"session"`
	Features []float64 `json:"features"`
	Country  string    `json:"country"`
	Premium  bool      `json:"premium"`
	Age      int       `json:"age"`
	MinScore float64   `json:"min_score"`
	Tags     []string  `json:"tags"`
	Explain  bool      `json:"explain"`
}

var scoreBody = []byte(`{"user_id":48213,"item_id":"sku-000042","session":"7f3a9c2e-1b4d-4e8f-9a6b-2c5d8e1f0a3b",` +
	`"features":[0.125,3.5,-1.25,42,0.001,7.75,2.5,-0.5],"country":"DE","premium":true,"age":34,` +
	`"min_score":0.25,"tags":["new","sale","caf\u00e9"],"explain":false}`)

var scoreSchema = MustSchema[score]()

// every holds a field of each supported kind, for the fuzz test.
type every struct {
	B   bool      `json:"b"`
	I   int       `json:"i"`
	I8  int8      `json:"i8"`
	I16 int16     `json:"i16"`
	I32 int32     `json:"i32"`
	U   uint      `json:"u"`
	U8  uint8     `json:"u8"`
	U16 uint16    `json:"u16"`
	U32 uint32    `json:"u32"`
	U64 uint64    `json:"u64"`
	F32 float32   `json:"f32"`
	F   float64   `json:"f"`
	S   string    `json:"s"`
	Ren string    `json:"renamed,omitempty"`
	Raw string    // no tag: the Go name
	No  string    `json:"-"`
	SB  []bool    `json:"sb"`
	SI8 []int8    `json:"si8"`
	SI  []int64   `json:"si"`
	SU  []uint16  `json:"su"`
	SF3 []float32 `json:"sf32"`
	SF  []float64 `json:"sf"`
	SS  []string  `json:"ss"`
	NS  []name    `json:"ns"`
	N   name      `json:"n"`
	un  int
}

type name string

var everySchema = MustSchema[every]()

func TestDecodeScore(t *testing.T) {
	var want score
	if err := json.Unmarshal(scoreBody, &want); err != nil {
		t.Fatal(err)
	}
	d := NewDecoder(Options{DisallowUnknownFields: true})
	for range 3 { // the scratch space is reused from the second on
		var got score
		if err := scoreSchema.Decode(d, scoreBody, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v\nwant %+v", got, want)
		}
	}
}

// TestNoAllocs: decoding a body into a fresh struct allocates nothing
// once the Decoder's scratch space has grown to it.
func TestNoAllocs(t *testing.T) {
	d := NewDecoder(Options{DisallowUnknownFields: true})
	bad := []byte(`{"user_id":"x"}`)
	var sink score
	n := testing.AllocsPerRun(1000, func() {
		var r score
		if err := scoreSchema.Decode(d, scoreBody, &r); err != nil {
			t.Fatal(err)
		}
		if scoreSchema.Decode(d, bad, &r) == nil {
			t.Fatal("bad body accepted")
		}
		sink.Age += r.Age
	})
	if n != 0 {
		t.Errorf("%v allocations per decode, want 0", n)
	}
}

// TestLifetime: what a decode handed out is the Decoder's until the next
// decode, and a slice is capped so that appending to it copies.
func TestLifetime(t *testing.T) {
	d := NewDecoder(Options{})
	var a score
	if err := scoreSchema.Decode(d, []byte(`{"tags":["x\u0041","b","c"],"features":[1,2,3]}`), &a); err != nil {
		t.Fatal(err)
	}
	if cap(a.Tags) != len(a.Tags) || cap(a.Features) != len(a.Features) {
		t.Errorf("slices not capped: tags %d/%d features %d/%d", len(a.Tags), cap(a.Tags), len(a.Features), cap(a.Features))
	}
	var b score
	if err := scoreSchema.Decode(d, []byte(`{"tags":["y\u0042","c"],"features":[3]}`), &b); err != nil {
		t.Fatal(err)
	}
	if b.Tags[0] != "yB" || a.Tags[0] != "yB" || a.Features[0] != 3 {
		t.Errorf("after a second decode: a.Tags[0] %q a.Features[0] %v, b.Tags[0] %q: the scratch space was not reused", a.Tags[0], a.Features[0], b.Tags[0])
	}
}

// TestNull: null leaves a field as it was, but makes a slice nil, as in
// encoding/json.
func TestNull(t *testing.T) {
	d := NewDecoder(Options{})
	r := score{Age: 7, ItemID: "x", Tags: []string{"a"}, Features: []float64{1}}
	if err := scoreSchema.Decode(d, []byte(`{"age":null,"item_id":null,"tags":null,"features":null}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.Age != 7 || r.ItemID != "x" || r.Tags != nil || r.Features != nil {
		t.Errorf("after nulls: %+v", r)
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		in      string
		opts    Options
		offset  int
		field   string
		reason  string
		nothing bool // no error
	}{
		{in: `{"user_id":12,"age":"x"}`, offset: 20, field: "age", reason: "expected an integer"},
		{in: `{"user_id":1.5}`, offset: 11, field: "user_id", reason: "expected an integer"},
		{in: `{"age":1e400}`, offset: 7, field: "age", reason: "expected an integer"},
		{in: `{"min_score":1e400}`, offset: 13, field: "min_score", reason: reasonRange},
		{in: `{"tags":"x"}`, offset: 8, field: "tags", reason: "expected an array"},
		{in: `{"tags":["a",1]}`, offset: 13, field: "tags", reason: "expected a string"},
		{in: `{"features":[1,]}`, offset: 15, field: "features", reason: reasonSyntax},
		{in: `{"premium":tru}`, offset: 14, field: "premium", reason: reasonSyntax},
		{in: `{"item_id":"a` + "\n" + `"}`, offset: 13, field: "item_id", reason: "control character in string"},
		{in: `{"item_id":"\x"}`, offset: 13, field: "item_id", reason: "invalid escape in string"},
		{in: `{"zzz":1}`, opts: Options{DisallowUnknownFields: true}, offset: 1, field: "zzz", reason: reasonUnknown},
		{in: `{"zzz":{"a":[1,{"b":null}]},"age":3}`, nothing: true},
		{in: `{"zzz":{"a":[1,{"b":nul}]}}`, offset: 23, reason: reasonSyntax},
		{in: `{"age":3} x`, offset: 10, reason: reasonTrailing},
		{in: `{"age":3} x`, opts: Options{AllowTrailingData: true}, nothing: true},
		{in: `{"age":3}{"age":4}`, opts: Options{AllowTrailingData: true}, nothing: true},
		{in: `[1]`, offset: 0, reason: reasonNotObject},
		{in: ``, offset: 0, reason: reasonEOF},
		{in: `{"age":3`, offset: 8, reason: reasonEOF},
		{in: `{"age":3,}`, offset: 9, reason: reasonSyntax},
		{in: `null`, nothing: true},
		{in: `{"zzz":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + `}`, nothing: true},
		{in: `{"zzz":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`, offset: 7 + maxDepth - 1, reason: reasonDepth},
	} {
		d := NewDecoder(tc.opts)
		var r score
		err := scoreSchema.Decode(d, []byte(tc.in), &r)
		if tc.nothing {
			if err != nil {
				t.Errorf("%.40q: %v", tc.in, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%.40q: error %v, want an *Error", tc.in, err)
			continue
		}
		if e.Offset != tc.offset || e.Field != tc.field || e.Reason != tc.reason {
			t.Errorf("%.40q: got offset %d member %q %q, want %d %q %q", tc.in, e.Offset, e.Field, e.Reason, tc.offset, tc.field, tc.reason)
		}
		if !strings.Contains(e.Error(), tc.reason) {
			t.Errorf("%.40q: Error() = %q", tc.in, e.Error())
		}
	}
}

func TestSchemaRefuses(t *testing.T) {
	check := func(name string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one mentioning %q", name, err, want)
		}
	}
	_, err := NewSchema[struct{ M map[string]int }]()
	check("map", err, "M")
	_, err = NewSchema[struct{ B []byte }]()
	check("[]byte", err, "base64")
	_, err = NewSchema[struct {
		N int `json:"n,string"`
	}]()
	check(",string", err, "string option")
	_, err = NewSchema[struct {
		Q int `json:"a\"b"`
	}]()
	check("quote in name", err, "not valid")
	_, err = NewSchema[struct {
		E int `json:"a€"`
	}]()
	check("symbol in name", err, "not valid")
	if _, err = NewSchema[struct {
		E int `json:"a-b.c d"`
	}](); err != nil {
		t.Errorf("a valid tag name refused: %v", err)
	}
	_, err = NewSchema[struct{ every }]()
	check("embedded", err, "embedded")
	type dup struct {
		A int `json:"X"`
		X int
	}
	_, err = NewSchema[dup]()
	check("duplicate", err, `"X"`)
	_, err = NewSchema[struct{ T textType }]()
	check("UnmarshalText", err, "UnmarshalText")
	_, err = NewSchema[int]()
	check("not a struct", err, "not a struct")
}

type textType int

func (*textType) UnmarshalText([]byte) error { return nil }

// reference decodes b with encoding/json as Options o describe.
func reference(b []byte, o Options, v *every) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if o.DisallowUnknownFields {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return err
	}
	if o.AllowTrailingData {
		return nil
	}
	if len(bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n")) > 0 {
		return errors.New("trailing data")
	}
	return nil
}

// foldedKey reports whether b has a member whose name matches a field of
// every only case-insensitively: encoding/json fills the field, jsondec
// (like encoding/json/v2) does not, by design.
func foldedKey(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	type level struct{ object, wantKey bool }
	var stack []level
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if n := len(stack); n > 0 && stack[n-1].object {
			top := &stack[n-1]
			if top.wantKey {
				if k, ok := tok.(string); ok && n == 1 {
					for _, f := range everySchema.fields {
						if k != f.name && strings.EqualFold(k, f.name) {
							return true
						}
					}
				}
				if tok != json.Delim('}') {
					top.wantKey = false
					continue
				}
			} else {
				top.wantKey = true // what follows this value is a key
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, level{object: true, wantKey: true})
		case json.Delim('['):
			stack = append(stack, level{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// FuzzAgainstEncodingJSON: on any input, in each of the four option
// combinations, jsondec accepts what encoding/json accepts and decodes the
// same values (compared as encoding/json re-encodes them).
func FuzzAgainstEncodingJSON(f *testing.F) {
	for _, s := range []string{
		string(scoreBody),
		`{"b":true,"i":-12,"i8":-128,"i16":300,"i32":70000,"u":1,"u8":255,"u16":65535,"u32":1,"u64":18446744073709551615}`,
		`{"f32":3.4e38,"f":-0.0,"s":"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00\ud800x\udc00","renamed":"r","Raw":"raw","No":"no"}`,
		`{"sb":[true,false,null],"si8":[1,-1],"si":[],"su":[65535],"sf32":[1.5],"sf":[1e-7,2E+3],"ss":["a",null,""],"ns":["x"],"n":"y"}`,
		`{"i8":128}`, `{"u":-1}`, `{"f32":3.5e38}`, `{"i":1.0}`, `{"s":1}`, `{"sb":null}`, `{"s":null,"i":null}`,
		"{\"s\":\"\xff\xfe\xed\xa0\x80ok\"}", `{"x":[{"y":[1,2,{"z":"w"}]}],"i":1}`, ` {} `, `null`, `{} {}`, `{"i":1}x`,
		`{"i":01}`, `{"i":-}`, `{"f":1.}`, `{"f":.5}`, `{"f":1e}`, `[]`, `"s"`, `{"I":1}`, `{"s":"\u12"}`, `{,}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if foldedKey(b) {
			return
		}
		for _, o := range []Options{{}, {DisallowUnknownFields: true}, {AllowTrailingData: true}, {true, true}} {
			var want, got every
			werr := reference(b, o, &want)
			d := NewDecoder(o)
			gerr := everySchema.Decode(d, b, &got)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("%+v %q: encoding/json: %v, jsondec: %v", o, b, werr, gerr)
			}
			if werr != nil {
				continue
			}
			wj, _ := json.Marshal(want)
			gj, _ := json.Marshal(got)
			if !bytes.Equal(wj, gj) {
				t.Fatalf("%+v %q:\nencoding/json %s\njsondec       %s", o, b, wj, gj)
			}
		}
	})
}

func TestFloat32Range(t *testing.T) {
	d := NewDecoder(Options{})
	var v every
	if err := everySchema.Decode(d, []byte(`{"f32":3.4028235e38}`), &v); err != nil || v.F32 != math.MaxFloat32 {
		t.Errorf("max float32: %v %v", v.F32, err)
	}
}

func BenchmarkDecodeScore(b *testing.B) {
	d := NewDecoder(Options{DisallowUnknownFields: true})
	b.SetBytes(int64(len(scoreBody)))
	b.ReportAllocs()
	for b.Loop() {
		var r score
		if err := scoreSchema.Decode(d, scoreBody, &r); err != nil {
			b.Fatal(err)
		}
	}
}

// TestExactFloat: the fast path gives what strconv gives, or declines.
func TestExactFloat(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	nums := []string{"0", "-0", "0.0", "-0.0", "1", "0.125", "-1.25", "42", "0.001", "1e-7", "2E+3", "1.5e22",
		"123456789012345", "1234567890123456", "0.1", "9007199254740993", "1e23", "1e-23", "0.000000000000000000001"}
	for range 20000 {
		var b []byte
		if r.IntN(2) == 0 {
			b = append(b, '-')
		}
		b = strconv.AppendUint(b, r.Uint64N(1<<uint(r.IntN(60)+1)), 10)
		if r.IntN(2) == 0 {
			b = append(b, '.')
			b = strconv.AppendUint(b, r.Uint64N(1000000), 10)
		}
		if r.IntN(2) == 0 {
			b = append(b, 'e')
			b = strconv.AppendInt(b, int64(r.IntN(60)-30), 10)
		}
		nums = append(nums, string(b))
	}
	fast := 0
	for _, n := range nums {
		want, err := strconv.ParseFloat(n, 64)
		got, ok := exactFloat(n)
		if !ok {
			continue
		}
		fast++
		if err != nil || math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("exactFloat(%q) = %v, strconv %v (%v)", n, got, want, err)
		}
	}
	if fast < len(nums)/4 {
		t.Errorf("only %d of %d numbers took the fast path", fast, len(nums))
	}
}

func TestPerCPU(t *testing.T) {
	p := NewPerCPU(Options{DisallowUnknownFields: true})
	if len(p.ds) < 1 {
		t.Fatal("empty table")
	}
	a, b := p.For(0), p.For(0)
	if a != b || !a.opts.DisallowUnknownFields {
		t.Errorf("For(0) twice: %p %p, options %+v", a, b, a.opts)
	}
	if len(p.ds) > 1 && p.For(1) == a {
		t.Error("CPUs 0 and 1 share a Decoder")
	}
	if p.For(len(p.ds)) == p.For(len(p.ds)) || p.For(-1) == nil {
		t.Error("a CPU outside the table should get a fresh Decoder each time")
	}
}
