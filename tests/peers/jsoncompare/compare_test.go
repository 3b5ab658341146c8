package jsoncompare

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"testing"

	goccy "github.com/goccy/go-json"
	jsoniter "github.com/json-iterator/go"
	"github.com/valyala/fastjson"

	"github.com/hotpath-dev/hotpath/server/jsondec"
)

// scoreBody is a /v1/score request as the example API takes it: ten
// members, two of them arrays, strings without escapes but one.
var scoreBody = []byte(`{"user_id":48213,"item_id":"sku-000042","session":"7f3a9c2e-1b4d-4e8f-9a6b-2c5d8e1f0a3b",` +
	`"features":[0.125,3.5,-1.25,42,0.001,7.75,2.5,-0.5],"country":"DE","premium":true,"age":34,` +
	`"min_score":0.25,"tags":["new","sale","caf\u00e9"],"explain":false}`)

type scoreRequest struct {
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

func want(t testing.TB) scoreRequest {
	var r scoreRequest
	if err := stdjson.Unmarshal(scoreBody, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func same(a, b *scoreRequest) bool {
	x, _ := stdjson.Marshal(a)
	y, _ := stdjson.Marshal(b)
	return bytes.Equal(x, y)
}

// decoders are the candidates, each with the state a worker would keep.
func decoders() []struct {
	name string
	new  func() func([]byte, *scoreRequest) error
} {
	return []struct {
		name string
		new  func() func([]byte, *scoreRequest) error
	}{
		{"encoding-json", func() func([]byte, *scoreRequest) error {
			return func(b []byte, r *scoreRequest) error { return stdjson.Unmarshal(b, r) }
		}},
		{"goccy-go-json", func() func([]byte, *scoreRequest) error {
			return func(b []byte, r *scoreRequest) error { return goccy.Unmarshal(b, r) }
		}},
		{"json-iterator", func() func([]byte, *scoreRequest) error {
			api := jsoniter.ConfigCompatibleWithStandardLibrary
			return func(b []byte, r *scoreRequest) error { return api.Unmarshal(b, r) }
		}},
		{"fastjson-parser", newFastjson},
		{"hotpath-jsondec", func() func([]byte, *scoreRequest) error {
			d := jsondec.NewDecoder(jsondec.Options{DisallowUnknownFields: true})
			s := jsondec.MustSchema[scoreRequest]()
			return func(b []byte, r *scoreRequest) error { return s.Decode(d, b, r) }
		}},
	}
}

// newFastjson binds a reused fastjson.Parser's tree onto the struct: the
// library parses (leniently: NaN, bad escapes), Validate first makes it
// refuse what encoding/json refuses, the binding is this code's.
func newFastjson() func([]byte, *scoreRequest) error {
	var p fastjson.Parser
	var err error
	return func(b []byte, r *scoreRequest) error {
		if err := fastjson.ValidateBytes(b); err != nil {
			return err
		}
		v, perr := p.ParseBytes(b)
		if perr != nil {
			return perr
		}
		o, oerr := v.Object()
		if oerr != nil {
			return oerr
		}
		err = nil
		o.Visit(func(k []byte, v *fastjson.Value) {
			if err != nil {
				return
			}
			switch string(k) {
			case "user_id":
				r.UserID, err = v.Int64()
			case "item_id":
				r.ItemID, err = str(v)
			case "session":
				r.Session, err = str(v)
			case "country":
				r.Country, err = str(v)
			case "premium":
				r.Premium, err = v.Bool()
			case "explain":
				r.Explain, err = v.Bool()
			case "age":
				r.Age, err = v.Int()
			case "min_score":
				r.MinScore, err = v.Float64()
			case "features":
				a, aerr := v.Array()
				if aerr != nil {
					err = aerr
					return
				}
				r.Features = r.Features[:0]
				for _, e := range a {
					f, ferr := e.Float64()
					if ferr != nil {
						err = ferr
						return
					}
					r.Features = append(r.Features, f)
				}
			case "tags":
				a, aerr := v.Array()
				if aerr != nil {
					err = aerr
					return
				}
				r.Tags = r.Tags[:0]
				for _, e := range a {
					s, serr := str(e)
					if serr != nil {
						err = serr
						return
					}
					r.Tags = append(r.Tags, s)
				}
			default:
				err = errors.New("unknown field")
			}
		})
		return err
	}
}

// str returns the string without copying it out of the parser's buffer
// (valid until the next parse), which is the point of a reused parser.
func str(v *fastjson.Value) (string, error) {
	b, err := v.StringBytes()
	return unsafeString(b), err
}

func TestCandidatesAgree(t *testing.T) {
	w := want(t)
	for _, c := range decoders() {
		dec := c.new()
		var r scoreRequest
		for range 3 {
			if err := dec(scoreBody, &r); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		if !same(&r, &w) {
			t.Errorf("%s decoded %+v, want %+v", c.name, r, w)
		}
	}
}

func BenchmarkDecodeScore(b *testing.B) {
	for _, c := range decoders() {
		b.Run(c.name, func(b *testing.B) {
			dec := c.new()
			var r scoreRequest
			b.SetBytes(int64(len(scoreBody)))
			b.ReportAllocs()
			for b.Loop() {
				if err := dec(scoreBody, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The fastjson pieces alone: validation, then the parse into its tree.
func BenchmarkFastjsonParts(b *testing.B) {
	b.Run("validate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := fastjson.ValidateBytes(scoreBody); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parse", func(b *testing.B) {
		var p fastjson.Parser
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.ParseBytes(scoreBody); err != nil {
				b.Fatal(err)
			}
		}
	})
}
