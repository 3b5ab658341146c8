package boot

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hotpath-dev/hotpath/init/report"
)

func TestRun(t *testing.T) {
	var verified []string
	steps := []Step{
		{Name: "ok", Apply: func(_ context.Context, d Detail) error { d["k"] = "v"; return nil },
			Verify: func(context.Context, Detail) error { verified = append(verified, "ok"); return nil }},
		{Name: "skip", Apply: func(context.Context, Detail) error { return Skip("no %s here", "nic") },
			Verify: func(context.Context, Detail) error { verified = append(verified, "skip"); return nil }},
		{Name: "fail", Apply: func(context.Context, Detail) error { return errors.New("boom") }},
		{Name: "verify-fails", Apply: func(context.Context, Detail) error { return nil },
			Verify: func(context.Context, Detail) error { return errors.New("read back 1, want 0") }},
		{Name: "panics", Apply: func(context.Context, Detail) error { var m map[string]int; m["x"]++; return nil }},
		{Name: "wrapped-skip", Apply: func(context.Context, Detail) error { return errorsJoin(Skip("missing file")) }},
		{Name: "last", Apply: func(context.Context, Detail) error { return nil }},
	}
	var lines []string
	res := Run(context.Background(), steps, func(f string, a ...any) { lines = append(lines, f) })
	want := []struct {
		status report.Status
		text   string
	}{
		{report.Applied, ""},
		{report.Skipped, "no nic here"},
		{report.Failed, "boom"},
		{report.Failed, "verify: read back 1, want 0"},
		{report.Failed, "panic: assignment to entry in nil map"},
		{report.Skipped, "missing file"},
		{report.Applied, ""},
	}
	if len(res) != len(want) || len(lines) != len(want) {
		t.Fatalf("got %d results, %d log lines; want %d", len(res), len(lines), len(want))
	}
	for i, w := range want {
		r := res[i]
		if r.Name != steps[i].Name || r.Status != w.status {
			t.Errorf("step %d: %s %s, want %s %s", i, r.Name, r.Status, steps[i].Name, w.status)
		}
		text := r.Reason + r.Error
		if !strings.HasPrefix(text, w.text) {
			t.Errorf("step %s: text %q, want prefix %q", r.Name, text, w.text)
		}
	}
	if res[0].Detail["k"] != "v" {
		t.Errorf("detail lost: %v", res[0].Detail)
	}
	if strings.Join(verified, ",") != "ok" {
		t.Errorf("verify ran for %v, want only ok (not after a skip)", verified)
	}
}

func errorsJoin(err error) error { return errors.Join(err) }

// TestRunOneBounds: a step whose error, skip reason or detail quotes a
// huge value from outside reports it cut, saying how much was left out.
func TestRunOneBounds(t *testing.T) {
	big := strings.Repeat("é", 1<<19) // 1 MiB, two bytes a rune
	for _, tc := range []struct {
		name string
		err  error
		get  func(report.Step) string
		max  int
	}{
		{"error", errors.New(big), func(r report.Step) string { return r.Error }, MaxError},
		{"reason", Skip("%s", big), func(r report.Step) string { return r.Reason }, MaxError},
		{"detail", nil, func(r report.Step) string { return r.Detail["value"] }, MaxDetail},
	} {
		r := RunOne(context.Background(), Step{Name: "x", Apply: func(_ context.Context, d Detail) error {
			d["value"] = big
			return tc.err
		}})
		got := tc.get(r)
		if len(got) > tc.max+40 || !utf8.ValidString(got) || !strings.HasSuffix(got, "more bytes)") {
			t.Errorf("%s: %d bytes, ends %q", tc.name, len(got), got[max(0, len(got)-30):])
		}
	}
}
