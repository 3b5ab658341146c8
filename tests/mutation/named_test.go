package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNamedCatalogue keeps named.txt from rotting: every entry still
// applies to the code (its file exists, its old text occurs there exactly
// once) and names tests its package has. It is `make unit`'s check; the
// catalogue itself is replayed by `make mutation-named`.
func TestNamedCatalogue(t *testing.T) {
	ns, err := ReadNamed("named.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) < 60 {
		t.Errorf("%d entries in named.txt, want the 60 or more issue 41's notes named", len(ns))
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	boots := 0
	for _, n := range ns {
		if err := n.Check(repo); err != nil {
			t.Error(err)
		}
		if n.Boot {
			boots++
		}
	}
	if boots == 0 {
		t.Error("no boot entry: the QEMU checks of issue 41 point 4 are missing")
	}
}

const sample = `# a comment
mutation one
from issue 1 point 1
file a/a.go
old "x > 1"
new "x >= 1"
pkg a
run ^(TestA|TestB)$

mutation two
from issue 1 point 2
file a/a.go
old <<END
	y := 2
	return y
END
new <<END
	return 3
END
pkg a
run ^TestA$/^sub$
boot two boots
timeout 7m
note a note
note another
`

func TestParseNamed(t *testing.T) {
	ns, err := ParseNamed(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) != 2 {
		t.Fatalf("%d entries, want 2", len(ns))
	}
	one, two := ns[0], ns[1]
	if one.Name != "one" || one.From != "issue 1 point 1" || one.File != "a/a.go" || one.Old != "x > 1" || one.New != "x >= 1" ||
		one.Pkg != "a" || one.Run != "^(TestA|TestB)$" || one.Boot || one.Line != 2 || one.timeout() != 5*60e9 {
		t.Errorf("one = %+v", one)
	}
	if two.Old != "\ty := 2\n\treturn y\n" || two.New != "\treturn 3\n" || !two.Boot || two.timeout() != 7*60e9 ||
		strings.Join(two.Notes, "|") != "two boots|a note|another" {
		t.Errorf("two = %+v", two)
	}
}

func TestParseNamedErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"file a.go\n", "before the first"},
		{"mutation a\nfrom x\nfile f\nold \"a\"\nnew \"b\"\npkg p\n", "no run"},
		{"mutation a\nfrom x\nfile f\nold \"a\"\nnew \"a\"\npkg p\nrun T\n", "new is old"},
		{"mutation a\nfrom x\nfile f\nold \"\"\nnew \"a\"\npkg p\nrun T\n", "old is empty"},
		{"mutation a\nfrom x\nfile f\nold a\nnew \"b\"\npkg p\nrun T\n", "want a Go string literal"},
		{"mutation a\nfrom x\nfile f\nold <<END\nx\nnew \"b\"\npkg p\nrun T\n", `no line "END"`},
		{"mutation a\nfrom x\nfile f\nold \"a\"\nnew \"b\"\npkg p\nrun T\nmutation a\n", "already at line 1"},
		{"mutation a\nfrom x\nfile f\nfile g\nold \"a\"\nnew \"b\"\npkg p\nrun T\n", "file given twice"},
		{"mutation a\nfrom x\nfile f\nold \"a\"\nnew \"b\"\npkg p\nrun T\ntimeout soon\n", "want a duration"},
		{"mutation a\nfrom x\nfile f\nold \"a\"\nnew \"b\"\npkg p\nrun T\ntests T\n", `unknown key "tests"`},
	} {
		_, err := ParseNamed(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseNamed(%q) = %v, want an error with %q", tc.in, err, tc.want)
		}
	}
}

// TestNamedCheck: each way an entry rots is caught, so that
// TestNamedCatalogue can fail.
func TestNamedCheck(t *testing.T) {
	repo := t.TempDir()
	writeTree(t, repo, map[string]string{
		"a/a.go":      "package a\n\nfunc f(x int) bool { return x > 1 || x > 10 }\n",
		"a/a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {}\n\nfunc TestB(t *testing.T) {}\n",
	})
	good := Named{Name: "good", File: "a/a.go", Old: "x > 1 ", New: "x >= 1 ", Pkg: "a", Run: "^(TestA|TestB)$/^sub$"}
	if err := good.Check(repo); err != nil {
		t.Fatalf("good entry: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Named)
		want string
	}{
		{"file gone", func(n *Named) { n.File = "a/b.go" }, "no such file"},
		{"old text gone", func(n *Named) { n.Old = "x > 2" }, "occurs 0 times"},
		{"old text twice", func(n *Named) { n.Old = "x > 1" }, "occurs 2 times"},
		{"test renamed", func(n *Named) { n.Run = "^(TestA|TestC)$" }, "no func TestC(t *testing.T) in a"},
		{"pattern matches none", func(n *Named) { n.Run = "^Foo$" }, "matches no test of a"},
		{"bad pattern", func(n *Named) { n.Run = "^(TestA$" }, "missing closing )"},
		{"package gone", func(n *Named) { n.Pkg = "b" }, "b: no test functions"},
		{"path outside", func(n *Named) { n.File = "../a.go" }, "want a slash path below the repository root"},
	} {
		n := good
		tc.edit(&n)
		err := n.Check(repo)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if got := good.Matched(repo); strings.Join(got, ",") != "TestA,TestB" {
		t.Errorf("Matched = %v", got)
	}
}

func TestSplitRun(t *testing.T) {
	for in, want := range map[string]string{
		"^TestA$":                 "^TestA$",
		"^TestA$/^sub$":           "^TestA$|^sub$",
		"^(TestA|TestB/x)$/[a/b]": "^(TestA|TestB/x)$|[a/b]",
		`a\/b/c`:                  `a\/b|c`,
	} {
		if got := strings.Join(splitRun(in), "|"); got != want {
			t.Errorf("splitRun(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestNamedRunner replays a small catalogue on a throwaway module, end to
// end: a mutation its test catches, one it does not, one that does not
// compile, one that no longer applies, a test that fails unmutated, a boot
// entry not run; and the repository itself is left as it was.
func TestNamedRunner(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds five small test binaries")
	}
	repo := t.TempDir()
	files := map[string]string{
		"go.mod":      "module example.com/m\n\ngo 1.22\n",
		"a/a.go":      "package a\n\nfunc Max(x, y int) int {\n\tif x > y {\n\t\treturn x\n\t}\n\treturn y\n}\n\nfunc Unused() int { return 1 }\n",
		"a/a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestMax(t *testing.T) {\n\tif Max(1, 2) != 2 || Max(2, 1) != 2 {\n\t\tt.Error(\"Max is wrong\")\n\t}\n}\n\nfunc TestUnused(t *testing.T) {}\n",
		"b/b.go":      "package b\n\nfunc B() int { return 1 }\n",
		"b/b_test.go": "package b\n\nimport \"testing\"\n\nfunc TestBroken(t *testing.T) { t.Fatal(\"always\") }\n",
	}
	writeTree(t, repo, files)
	git(t, repo, "init", "-q")
	stage, err := NewStage(repo, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ns := []Named{
		{Name: "caught", File: "a/a.go", Old: "x > y", New: "x < y", Pkg: "a", Run: "^TestMax$"},
		{Name: "missed", File: "a/a.go", Old: "return 1 }", New: "return 2 }", Pkg: "a", Run: "^(TestMax|TestUnused)$"},
		{Name: "nocompile", File: "a/a.go", Old: "return y\n", New: "return z\n", Pkg: "a", Run: "^TestMax$"},
		{Name: "moved", File: "a/a.go", Old: "x >= y", New: "x < y", Pkg: "a", Run: "^TestMax$"},
		{Name: "broken", File: "b/b.go", Old: "return 1", New: "return 2", Pkg: "b", Run: "^TestBroken$"},
		{Name: "boot", File: "a/a.go", Old: "x > y", New: "x < y", Pkg: "a", Run: "^TestMax$", Boot: true},
	}
	var log, status bytes.Buffer
	r := NamedRunner{Stage: stage, Repo: repo, Control: true, Env: cleanEnv(os.Environ()), Log: &log, Status: &status}
	rs := r.Run(context.Background(), ns)
	want := map[string]string{"caught": Killed, "missed": Survived, "nocompile": NoCompile, "moved": NoLonger, "broken": ControlFails, "boot": NotRun}
	for _, res := range rs {
		if res.Status != want[res.Named.Name] {
			t.Errorf("%s: %s (%s), want %s", res.Named.Name, res.Status, res.Detail, want[res.Named.Name])
		}
	}
	if got := strings.Join(rs[0].Failed, ","); got != "TestMax" || len(rs[0].Lines) == 0 || !strings.Contains(rs[0].Lines[0], "Max is wrong") {
		t.Errorf("caught: failed %q, lines %q", got, rs[0].Lines)
	}
	var table bytes.Buffer
	if WriteNamedTable(&table, rs) {
		t.Errorf("the table says all is well with a survivor:\n%s", table.String())
	}
	for _, s := range []string{"caught", "killed", "SURVIVED", "DOES NOT COMPILE", "NO LONGER APPLIES", "FAILS UNMUTATED", "Max is wrong"} {
		if !strings.Contains(table.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, table.String())
		}
	}
	if !WriteNamedTable(&bytes.Buffer{}, rs[:1]) {
		t.Error("a table of killed mutations is not ok")
	}
	// Every entry was reverted in the stage, and the repository untouched.
	for name, content := range files {
		for _, root := range []string{repo, stage.Root} {
			if b, err := os.ReadFile(filepath.Join(root, name)); err != nil || string(b) != content {
				t.Errorf("%s in %s changed: %q, %v", name, root, b, err)
			}
		}
	}
}
