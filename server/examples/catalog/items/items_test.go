package items

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestJSONMatchesEncodingJSON: the peers encode with encoding/json, the
// workload with AppendJSON; the bytes must be the same.
func TestJSONMatchesEncodingJSON(t *testing.T) {
	c := Generate(2000, 1)
	if c.Get(0) != nil || c.Get(2001) != nil || c.Get(2000) == nil {
		t.Fatal("Get bounds")
	}
	for id := int64(1); id <= 2000; id++ {
		it := c.Get(id)
		want, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		if got := it.AppendJSON(nil); !bytes.Equal(got, want) {
			t.Fatalf("item %d:\n got %s\nwant %s", id, got, want)
		}
	}
	var req ScoreRequest
	if err := json.Unmarshal([]byte(SampleScoreBody), &req); err != nil {
		t.Fatal(err)
	}
	if msg := req.Validate(); msg != "" {
		t.Fatalf("sample body invalid: %s", msg)
	}
	for id := int64(1); id <= 2000; id++ {
		r := Score(&req, c.Get(id))
		want, _ := json.Marshal(r)
		if got := r.AppendJSON(nil); !bytes.Equal(got, want) {
			t.Fatalf("score for %d:\n got %s\nwant %s", id, got, want)
		}
	}
	eb := ErrorBody{Error: "bad \"x\"", Field: "age", Offset: 3}
	if got := string(eb.AppendJSON(nil)); got != `{"error":"bad \"x\"","field":"age","offset":3}` {
		t.Errorf("error body %s", got)
	}
	if got := string((ErrorBody{Error: "no such item", Offset: -1}).AppendJSON(nil)); got != `{"error":"no such item"}` {
		t.Errorf("error body %s", got)
	}
}

func TestGenerateDeterministic(t *testing.T) {
	a, b := Generate(100, 3), Generate(100, 3)
	for id := int64(1); id <= 100; id++ {
		if !bytes.Equal(a.Get(id).AppendJSON(nil), b.Get(id).AppendJSON(nil)) {
			t.Fatalf("item %d differs between two runs", id)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := func() ScoreRequest {
		return ScoreRequest{UserID: 1, ItemID: 1, Features: []float64{1}, Country: "DE", MinScore: 0.5}
	}
	for _, tc := range []struct {
		name string
		edit func(*ScoreRequest)
		want string
	}{
		{"ok", func(*ScoreRequest) {}, ""},
		{"user", func(r *ScoreRequest) { r.UserID = 0 }, "user_id must be positive"},
		{"item", func(r *ScoreRequest) { r.ItemID = -1 }, "item_id must be positive"},
		{"no features", func(r *ScoreRequest) { r.Features = nil }, "features must have 1 to 64 numbers"},
		{"65 features", func(r *ScoreRequest) { r.Features = make([]float64, 65) }, "features must have 1 to 64 numbers"},
		{"64 features", func(r *ScoreRequest) { r.Features = make([]float64, 64) }, ""},
		{"country", func(r *ScoreRequest) { r.Country = "de" }, "country must be two capital letters"},
		{"age", func(r *ScoreRequest) { r.Age = 151 }, "age must be 0 to 150"},
		{"min score", func(r *ScoreRequest) { r.MinScore = 1.01 }, "min_score must be 0 to 1"},
		{"session", func(r *ScoreRequest) { r.Session = string(make([]byte, 65)) }, "session must be at most 64 bytes"},
		{"tags", func(r *ScoreRequest) { r.Tags = make([]string, 17) }, "at most 16 tags"},
	} {
		r := ok()
		tc.edit(&r)
		if got := r.Validate(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestBenchBody: tests/bench/score.lua posts SampleScoreBody.
func TestBenchBody(t *testing.T) {
	lua, err := os.ReadFile("../../../../tests/bench/score.lua")
	if err != nil {
		t.Fatal(err)
	}
	// The Lua single-quoted string escapes its backslashes.
	want := "wrk.body = '" + strings.ReplaceAll(SampleScoreBody, `\`, `\\`) + "'\n"
	if !strings.Contains(string(lua), want) {
		t.Errorf("score.lua does not post SampleScoreBody; want the line\n%s", want)
	}
}
