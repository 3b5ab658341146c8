package main

import (
	"encoding/json"
	"testing"
)

// TestMessageMatchesStdlib holds message's hand-written encoding to what
// encoding/json writes for the same value, for the test's message and for
// values that need escaping, and checks that it appends to what is there.
func TestMessageMatchesStdlib(t *testing.T) {
	for _, s := range []string{"Hello, World!", "", `"quoted" \\ <b>&</b>`, "line\nbreak\t\x00", "caf\u00e9 \u2028 \xff"} {
		want, err := json.Marshal(message{Message: s})
		if err != nil {
			t.Fatal(err)
		}
		if got := (message{Message: s}).AppendJSON([]byte("prefix")); string(got) != "prefix"+string(want) {
			t.Errorf("AppendJSON(%q) = %s, want prefix%s", s, got, want)
		}
	}
}

// TestMessageNoAllocs: encoding into a buffer with room allocates nothing.
func TestMessageNoAllocs(t *testing.T) {
	buf := make([]byte, 0, 256)
	if a := testing.AllocsPerRun(1000, func() {
		buf = message{Message: "Hello, World!"}.AppendJSON(buf[:0])
	}); a != 0 {
		t.Errorf("%v allocations per encoding, want 0", a)
	}
}
