package kernelconfig

import (
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig(strings.NewReader(`#
# comment
CONFIG_A=y
# CONFIG_B is not set
CONFIG_S="a \"quoted\" \\ string"
CONFIG_N=256

CONFIG_A=m
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ sym, val string }{{"A", "m"}, {"B", NotSet}, {"N", "256"}} {
		if v, _ := c.Get(tc.sym); v != tc.val {
			t.Errorf("%s = %q, want %q", tc.sym, v, tc.val)
		}
	}
	if v, _ := c.Get("S"); Unquote(v) != `a "quoted" \ string` {
		t.Errorf("S unquoted = %q", Unquote(v))
	}
	if c.Enabled("B") || !c.Enabled("A") || c.Enabled("MISSING") {
		t.Error("Enabled wrong")
	}
	want := "CONFIG_A=m\n# CONFIG_B is not set\nCONFIG_S=\"a \\\"quoted\\\" \\\\ string\"\nCONFIG_N=256\n"
	if got := c.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if _, err := ParseConfig(strings.NewReader("CONFIG_A=y\nCONFG_TYPO=y\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("typo not rejected with its line: %v", err)
	}
}

func TestQuoteRoundTrip(t *testing.T) {
	for _, s := range []string{"", "console=ttyS0 mitigations=off", `a"b\c`, "/path with space/x.cpio"} {
		if got := Unquote(Quote(s)); got != s {
			t.Errorf("Unquote(Quote(%q)) = %q", s, got)
		}
	}
}

func TestParseFragment(t *testing.T) {
	f, err := ParseFragment("t.config", strings.NewReader(`# header, not a reason

# Reason for A,
# two lines.
CONFIG_A=y
# CONFIG_B is not set
# Reason for C.
CONFIG_C="x"
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Requirement{
		{Symbol: "A", Value: "y", Why: "Reason for A, two lines.", Fragment: "t.config", Line: 5},
		{Symbol: "B", Value: NotSet, Why: "Reason for A, two lines.", Fragment: "t.config", Line: 6},
		{Symbol: "C", Value: `"x"`, Why: "Reason for C.", Fragment: "t.config", Line: 8},
	}
	if len(f.Requirements) != len(want) {
		t.Fatalf("got %+v", f.Requirements)
	}
	for i := range want {
		if f.Requirements[i] != want[i] {
			t.Errorf("%d: got %+v, want %+v", i, f.Requirements[i], want[i])
		}
	}
	for _, bad := range []string{"CONFIG_A=n\n", "CONFIG_A=\n", "A=y\n"} {
		if _, err := ParseFragment("bad", strings.NewReader(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestDefaultFragmentsDocumented(t *testing.T) {
	frags, err := DefaultFragments()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frags {
		if len(f.Requirements) == 0 {
			t.Errorf("%s is empty", f.Name)
		}
		for _, r := range f.Requirements {
			if r.Why == "" {
				t.Errorf("%s: %s has no comment saying why", r.Where(), r)
			}
		}
	}
}

func TestRequirementsOverride(t *testing.T) {
	frags, err := DefaultFragments()
	if err != nil {
		t.Fatal(err)
	}
	// An override (NR_CPUS is base.config's) and, after it, what the base
	// does not name: the merge goes on past an override.
	user := &Fragment{Name: "user.config", Requirements: []Requirement{
		{Symbol: "NR_CPUS", Value: "64", Fragment: "user.config", Line: 1},
		{Symbol: "HZ_1000", Value: "y", Fragment: "user.config", Line: 2},
		{Symbol: "HOTPATH_TEST_ONLY", Value: "y", Fragment: "user.config", Line: 3},
	}}
	reqs, err := Requirements(append(frags, user))
	if err != nil {
		t.Fatal(err)
	}
	got := MergedFragments(reqs)
	if v, _ := got.Get("NR_CPUS"); v != "64" {
		t.Errorf("user fragment did not override base: NR_CPUS=%s", v)
	}
	if v, _ := got.Get("HZ_1000"); v != "y" {
		t.Errorf("HZ_1000=%s", v)
	}
	if v, _ := got.Get("HOTPATH_TEST_ONLY"); v != "y" {
		t.Errorf("the requirement after an override was lost: HOTPATH_TEST_ONLY=%q", v)
	}
	evil := &Fragment{Name: "user.config", Requirements: []Requirement{{Symbol: "AUDIT", Value: "y", Fragment: "user.config", Line: 3}}}
	_, err = Requirements(append(frags, evil))
	if err == nil || !strings.Contains(err.Error(), "CONFIG_AUDIT") || !strings.Contains(err.Error(), "policy") {
		t.Errorf("a fragment overriding the policy was not refused: %v", err)
	}
}

func TestKey(t *testing.T) {
	base := Key("tarball sha256:aa", "CONFIG_A=y\n", "gcc 12.2.0")
	if base != Key("tarball sha256:aa", "CONFIG_A=y\n", "gcc 12.2.0") {
		t.Fatal("key not deterministic")
	}
	for name, k := range map[string]string{
		"compiler": Key("tarball sha256:aa", "CONFIG_A=y\n", "gcc 13.1.0"),
		"config":   Key("tarball sha256:aa", "CONFIG_A=y\nCONFIG_B=y\n", "gcc 12.2.0"),
		"source":   Key("tarball sha256:ab", "CONFIG_A=y\n", "gcc 12.2.0"),
		// Length-prefixed parts: moving a byte between parts changes it.
		"boundary": Key("tarball sha256:aa\n", "CONFIG_A=y", "\ngcc 12.2.0"),
	} {
		if k == base {
			t.Errorf("changing the %s did not change the key", name)
		}
	}
}

func TestHasValues(t *testing.T) {
	have, _ := ParseConfig(strings.NewReader("CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_S=\"x\"\nCONFIG_EXTRA=y\n"))
	for _, tc := range []struct {
		want string
		ok   bool
	}{
		{"CONFIG_A=y\n", true},
		{"CONFIG_A=y\n# CONFIG_B is not set\n# CONFIG_ABSENT is not set\n", true},
		{"CONFIG_S=\"y\"\n", false},
		{"CONFIG_B=y\n", false},
		{"CONFIG_NEW=y\n", false},
		// A symbol skipped (not set, and absent) goes on to the next.
		{"# CONFIG_ABSENT is not set\nCONFIG_A=m\n", false},
	} {
		want, _ := ParseConfig(strings.NewReader(tc.want))
		if got := hasValues(have, want); got != tc.ok {
			t.Errorf("hasValues(%q) = %v, want %v", tc.want, got, tc.ok)
		}
	}
}

func TestWithImage(t *testing.T) {
	frags, _ := DefaultFragments()
	reqs, _ := Requirements(frags)
	image := &Fragment{Name: "image", Requirements: []Requirement{
		{Symbol: "CMDLINE", Value: Quote("console=ttyS0 mitigations=off hotpath.port=80"), Fragment: "image"},
		{Symbol: "INITRAMFS_SOURCE", Value: Quote("/c/initramfs.cpio"), Fragment: "image"},
	}}
	got := MergedFragments(withImage(reqs, image))
	if v, _ := got.Get("CMDLINE"); Unquote(v) != "console=ttyS0 mitigations=off hotpath.port=80" {
		t.Errorf("CMDLINE = %s", v)
	}
	if v, _ := got.Get("INITRAMFS_SOURCE"); v != `"/c/initramfs.cpio"` {
		t.Errorf("INITRAMFS_SOURCE = %s", v)
	}
	if v, _ := got.Get("AUDIT"); v != NotSet {
		t.Errorf("policy lost: AUDIT = %s", v)
	}
	// INITRAMFS_SOURCE is new; CMDLINE is added beside the policy's, which
	// Check still holds the final line to.
	with := withImage(reqs, image)
	if len(with) != len(reqs)+2 {
		t.Errorf("%d requirements with the image's, want %d", len(with), len(reqs)+2)
	}
	var policy int
	for _, r := range with {
		if r.Symbol == "CMDLINE" && r.Fragment == "policy.config" {
			policy++
		}
	}
	if policy != 1 {
		t.Errorf("the policy's CMDLINE requirement is there %d times, want once", policy)
	}
}

func TestSameVisibility(t *testing.T) {
	image := &Fragment{Requirements: []Requirement{{Symbol: "CMDLINE"}, {Symbol: "INITRAMFS_SOURCE"}, {Symbol: "INITRAMFS_COMPRESSION_NONE"}}}
	have, _ := ParseConfig(strings.NewReader("CONFIG_A=y\nCONFIG_CMDLINE=\"x\"\nCONFIG_INITRAMFS_SOURCE=\"/b/i.cpio\"\nCONFIG_INITRAMFS_COMPRESSION_NONE=y\nCONFIG_INITRAMFS_ROOT_UID=0\n"))
	for _, tc := range []struct {
		want string
		ok   bool
	}{
		{"CONFIG_A=y\nCONFIG_CMDLINE=\"y\"\nCONFIG_INITRAMFS_SOURCE=\"/b/i.cpio\"\n", true},
		{"CONFIG_A=m\nCONFIG_CMDLINE=\"y\"\nCONFIG_INITRAMFS_SOURCE=\"/b/i.cpio\"\n", false},
		{"CONFIG_A=y\nCONFIG_CMDLINE=\"y\"\nCONFIG_INITRAMFS_SOURCE=\"\"\n", false},
		// Not set and absent is the same; a new symbol is not.
		{"# CONFIG_ABSENT is not set\nCONFIG_A=y\nCONFIG_INITRAMFS_SOURCE=\"/b/i.cpio\"\n", true},
		{"CONFIG_A=y\nCONFIG_NEW=y\nCONFIG_INITRAMFS_SOURCE=\"/b/i.cpio\"\n", false},
		// A skipped symbol (per-image, or not set and absent) goes on to
		// the next, which differs.
		{"CONFIG_CMDLINE=\"y\"\nCONFIG_A=m\nCONFIG_INITRAMFS_SOURCE=\"/b/i.cpio\"\n", false},
		{"# CONFIG_ABSENT is not set\nCONFIG_A=m\nCONFIG_INITRAMFS_SOURCE=\"/b/i.cpio\"\n", false},
	} {
		want, _ := ParseConfig(strings.NewReader(tc.want))
		if got := sameVisibility(have, want, image); got != tc.ok {
			t.Errorf("sameVisibility(%q) = %v, want %v", tc.want, got, tc.ok)
		}
	}
}

// Unquote's edges: a value it must leave alone, escapes, and a trailing
// backslash (Quote never writes one, a hand-edited .config may).
func TestUnquoteEdges(t *testing.T) {
	for in, want := range map[string]string{
		`"`: `"`, `"a`: `"a`, `a"`: `a"`, `""`: ``, `y`: `y`,
		`"a\"b"`: `a"b`, `"\\"`: `\`, `"a\"`: `a\`, `"a\\\"b"`: `a\"b`,
	} {
		if got := Unquote(in); got != want {
			t.Errorf("Unquote(%s) = %s, want %s", in, got, want)
		}
	}
}
