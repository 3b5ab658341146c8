package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseTargets(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []Target
		wantErr bool
	}{
		{in: "server/http1", want: []Target{{Dir: "server/http1"}}},
		{in: "./packer/postprocessor/...", want: []Target{{Dir: "packer/postprocessor", Recursive: true}}},
		{in: "init/nic, init/config/ init/nic", want: []Target{{Dir: "init/nic"}, {Dir: "init/config"}}},
		{in: "../elsewhere", wantErr: true},
		{in: "/abs", wantErr: true},
		{in: ".", wantErr: true},
		{in: "a/../b", wantErr: true},
		{in: "kernel-config/check.go", want: []Target{{Dir: "kernel-config", Only: "check.go"}}},
		{in: "kernel-config/check_test.go", wantErr: true},
		{in: "kernel-config/...", want: []Target{{Dir: "kernel-config", Recursive: true}}},
	} {
		got, err := ParseTargets(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseTargets(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if !tc.wantErr && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseTargets(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	all, err := ParseTargets("")
	if err != nil || len(all) != len(DefaultTargets) || all[len(all)-1] != (Target{Dir: "packer/postprocessor", Recursive: true}) {
		t.Errorf("ParseTargets(\"\") = %+v, %v; want the %d default targets", all, err, len(DefaultTargets))
	}
	if n := (Target{Dir: "packer/postprocessor", Recursive: true}).File(); n != "packer_postprocessor" {
		t.Errorf("File() = %q", n)
	}
	one := Target{Dir: "packer/postprocessor/ami", Only: "step_prevalidate.go"}
	if n, f := one.Name(), one.File(); n != "packer/postprocessor/ami/step_prevalidate.go" || f != "packer_postprocessor_ami_step_prevalidate" {
		t.Errorf("one-file target: Name() = %q, File() = %q", n, f)
	}
}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		line          string
		col           int
		typ           string
		from, to, why string
	}{
		{line: "\tif n < len(b) {", col: 7, typ: "CONDITIONALS_BOUNDARY", from: "<", to: "<="},
		{line: "\tif n <= len(b) {", col: 7, typ: "CONDITIONALS_NEGATION", from: "<=", to: ">"},
		{line: "\tmask |= 1 << cpu", col: 7, typ: "INVERT_BWASSIGN", from: "|=", to: "&="},
		{line: "\tmask |= 1 << cpu", col: 7, typ: "REMOVE_SELF_ASSIGNMENTS", from: "|=", to: "="},
		{line: "\tmask |= 1 << cpu", col: 12, typ: "INVERT_BITWISE", from: "<<", to: ">>"},
		{line: "\tx &^= y", col: 4, typ: "INVERT_BWASSIGN", from: "&^=", to: "&="},
		{line: "\tif a && b {", col: 7, typ: "INVERT_LOGICAL", from: "&&", to: "||"},
		{line: "\t\tbreak", col: 3, typ: "INVERT_LOOPCTRL", from: "break", to: "continue"},
		{line: "\ti++", col: 3, typ: "INCREMENT_DECREMENT", from: "++", to: "--"},
		{line: "\treturn -1", col: 9, typ: "INVERT_NEGATIVES", from: "-", to: "+"},
		{line: "\tn %= 8", col: 4, typ: "INVERT_ASSIGNMENTS", from: "%=", to: "%=", why: "equivalent by construction: gremlins v0.6.0 leaves the token unchanged"},
		{line: "\ta = b", col: 4, typ: "ARITHMETIC_BASE", from: "", to: ""},
		{line: "short", col: 40, typ: "ARITHMETIC_BASE"},
	} {
		from, to, why := describe(tc.line, tc.col, tc.typ)
		if from != tc.from || to != tc.to || why != tc.why {
			t.Errorf("describe(%q, %d, %s) = %q, %q, %q; want %q, %q, %q", tc.line, tc.col, tc.typ, from, to, why, tc.from, tc.to, tc.why)
		}
	}
}

const sourceLines = `package x

func f(a, b int) int {
	if a < b {
		return a - b
	}
	return -a
}
`

// gremlins' result for sourceLines as a gremlins run on the stage
// directory "kernelconfig" (the repository's kernel-config) writes it.
const gremlinsJSON = `{"go_module":"m","files":[{"file_name":"x.go","mutations":[
 {"type":"CONDITIONALS_BOUNDARY","status":"LIVED","line":4,"column":7},
 {"type":"CONDITIONALS_NEGATION","status":"KILLED","line":4,"column":7},
 {"type":"ARITHMETIC_BASE","status":"KILLED","line":5,"column":12},
 {"type":"INVERT_NEGATIVES","status":"LIVED","line":5,"column":12},
 {"type":"ARITHMETIC_BASE","status":"NOT COVERED","line":7,"column":9},
 {"type":"INVERT_NEGATIVES","status":"NOT COVERED","line":7,"column":9},
 {"type":"INVERT_BITWISE","status":"NOT VIABLE","line":3,"column":1},
 {"type":"INVERT_LOGICAL","status":"TIMED OUT","line":4,"column":2}
]}]}`

func TestLoad(t *testing.T) {
	repo := t.TempDir()
	os.MkdirAll(filepath.Join(repo, "kernel-config"), 0o755)
	os.WriteFile(filepath.Join(repo, "kernel-config", "x.go"), []byte(sourceLines), 0o644)
	raw := filepath.Join(t.TempDir(), "kernel-config")
	os.WriteFile(raw+".json", []byte(gremlinsJSON), 0o644)
	s := &Stage{renames: []rename{{repo: "kernel-config", stage: "kernelconfig"}}}

	pkgs, err := Load(raw, s, Target{Dir: "kernel-config"}, repo)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 1 {
		t.Fatalf("%d packages, want 1: %+v", len(pkgs), pkgs)
	}
	p := pkgs[0]
	// Line 5's two mutants are the same code (a - b -> a + b) and disagree;
	// line 7's two are the same and agree. The first of each counts.
	want := Package{Package: "kernel-config", Target: "kernel-config", Killed: 2, TimedOut: 1, Lived: 1, NotCovered: 1, NotViable: 1, Duplicates: 2, Disagree: 1}
	got := p
	got.Survivors = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("package\n got %+v\nwant %+v", got, want)
	}
	if p.Tested() != 5 || p.Score() != 60 || p.CoveredScore() != 75 {
		t.Errorf("tested %d score %.1f covered %.1f, want 5, 60.0, 75.0", p.Tested(), p.Score(), p.CoveredScore())
	}
	wantSurv := []Mutant{
		{File: "kernel-config/x.go", Line: 4, Column: 7, Type: "CONDITIONALS_BOUNDARY", Status: "LIVED", From: "<", To: "<=", Source: "if a < b {"},
		{File: "kernel-config/x.go", Line: 7, Column: 9, Type: "ARITHMETIC_BASE", Status: "NOT COVERED", From: "-", To: "+", Source: "return -a"},
	}
	if !reflect.DeepEqual(p.Survivors, wantSurv) {
		t.Errorf("survivors\n got %+v\nwant %+v", p.Survivors, wantSurv)
	}

	var b bytes.Buffer
	Report{Gremlins: "g v0", Packages: pkgs}.WriteText(&b, &Report{Packages: []Package{{Package: "kernel-config", Killed: 1, Lived: 3}}})
	for _, s := range []string{
		"kernel-config                       5      2      1      1      1      0      1   60.0%   75.0%   25.0%",
		"LIVED       x.go:4:7 CONDITIONALS_BOUNDARY `<` -> `<=`   | if a < b {",
		"-- kernel-config/x.go",
	} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, b.String())
		}
	}
}

// NOT COVERED in a switch case or a package-level initialiser means Go's
// coverage profile has no block there, not that no test runs it.
func TestNoBlock(t *testing.T) {
	repo := t.TempDir()
	os.WriteFile(filepath.Join(repo, "u.go"), []byte(`package u

var limit = 1 << 4

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	}
	if c > 'z' {
		return -1
	}
	return -2
}
`), 0o644)
	c := sourceCache{repo: repo, lines: map[string][]string{}, files: map[string]*parsedFile{}}
	for _, tc := range []struct {
		line, col int
		want      string
	}{
		{3, 15, "package-level"},
		{7, 11, "switch case"},
		{7, 16, "switch case"},
		{8, 16, ""}, // the case body has a block
		{10, 7, ""},
		{12, 10, ""},
	} {
		got := c.noBlock("u.go", tc.line, tc.col)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("noBlock(%d:%d) = %q, want %q", tc.line, tc.col, got, tc.want)
		}
	}
}

// A run stopped before gremlins wrote its result: the mutants decided so
// far are read from its output, and the package is marked partial.
func TestLoadPartial(t *testing.T) {
	repo := t.TempDir()
	os.MkdirAll(filepath.Join(repo, "server", "http1"), 0o755)
	os.WriteFile(filepath.Join(repo, "server", "http1", "x.go"), []byte(sourceLines), 0o644)
	raw := filepath.Join(t.TempDir(), "server_http1")
	os.WriteFile(raw+".log", []byte(`Starting...
Gathering coverage... done in 5.077869006s
       LIVED CONDITIONALS_BOUNDARY at x.go:4:7
      KILLED CONDITIONALS_NEGATION at x.go:4:7
 NOT COVERED ARITHMETIC_BASE at x.go:7:9
   TIMED OUT INVERT_NEGATIVES at x.go:5:12
`), 0o644)
	pkgs, err := Load(raw, &Stage{}, Target{Dir: "server/http1"}, repo)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 1 {
		t.Fatalf("%d packages, want 1", len(pkgs))
	}
	p := pkgs[0]
	if !p.Partial || p.Killed != 1 || p.Lived != 1 || p.NotCovered != 1 || p.TimedOut != 1 || len(p.Survivors) != 2 {
		t.Errorf("partial package = %+v", p)
	}
	if s := p.Survivors[0]; s.File != "server/http1/x.go" || s.Line != 4 || s.To != "<=" {
		t.Errorf("first survivor = %+v", s)
	}
	var b bytes.Buffer
	Report{Packages: pkgs}.Summary(&b, nil)
	if !strings.Contains(b.String(), "server/http1 (partial)") {
		t.Errorf("summary does not say partial:\n%s", b.String())
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none"), &Stage{}, Target{Dir: "x"}, repo); err == nil {
		t.Error("Load of a target with neither result nor log succeeded")
	}
}

func TestTestEnv(t *testing.T) {
	got := TestEnv([]string{"PATH=/bin", "GOFLAGS=-buildvcs=false", "HOTPATH_TEST_KERNEL_BUILD=1", "GREMLINS_UNLEASH_WORKERS=8", "HOME=/root"}, 1)
	want := []string{"PATH=/bin", "HOME=/root", "GOFLAGS=-buildvcs=false -short -count=1 -p=1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("TestEnv = %q, want %q", got, want)
	}
}

func TestArgs(t *testing.T) {
	r := Runner{Gremlins: "g", Config: "/c.yaml", Workers: 1, Raw: "/out/raw"}
	got := r.Args(Target{Dir: "packer/postprocessor", Recursive: true}, "/stage/packer/postprocessor", []string{"ami/config.hcl2spec.go"}, 31)
	want := []string{"unleash", "--config", "/c.yaml", "--workers", "1", "--output", "/out/raw/packer_postprocessor.json",
		"--timeout-coefficient", "31", "--exclude-files", `(^|/)testdata/`, "--exclude-files", `^ami/config\.hcl2spec\.go$`, "/stage/packer/postprocessor"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Args =\n %q\nwant\n %q", got, want)
	}
	got = r.Args(Target{Dir: "kernel-config"}, "/stage/kernelconfig", nil, 20)
	if i := len(got) - 3; got[i] != "--exclude-files" || got[i+1] != "/" {
		t.Errorf("a directory target must leave out its subdirectories: %q", got)
	}
}

func TestWarmArgs(t *testing.T) {
	for _, tc := range []struct {
		t    Target
		want []string
	}{
		{Target{Dir: "packer/postprocessor", Recursive: true}, []string{"test", "-run", "^$", "./..."}},
		{Target{Dir: "server/http1"}, []string{"test", "-run", "^$", "."}},
	} {
		if got := WarmArgs(tc.t); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("WarmArgs(%+v) = %q, want %q", tc.t, got, tc.want)
		}
	}
}

// The limit of a mutant's run: the coefficient, or more to reach the
// floor; the real-kernel packages' own limits are longer.
func TestCoefficientFor(t *testing.T) {
	for _, tc := range []struct {
		l    Limits
		took time.Duration
		want int
	}{
		{DefaultLimits, 30 * time.Second, 20}, // 10 min > 2 min floor
		{DefaultLimits, time.Second, 120},     // 20 s would be below the floor
		{DefaultLimits, 7 * time.Second, 20},  // ceil(120/7) = 18 < 20
		{DefaultLimits, 5 * time.Second, 24},
		{DefaultLimits, 0, 20},
		{KernelLimits, 47 * time.Second, 8},  // init/netconf6 under load: 6 min 16 s
		{KernelLimits, 10 * time.Second, 30}, // the 5 min floor
		{KernelLimits, 2 * time.Second, 150},
		{Limits{Coefficient: 3, Floor: time.Minute}, 7 * time.Second, 9}, // ceil(60/7)
	} {
		if got := tc.l.CoefficientFor(tc.took); got != tc.want {
			t.Errorf("%+v.CoefficientFor(%v) = %d, want %d", tc.l, tc.took, got, tc.want)
		}
	}
	if KernelLimits.Floor <= DefaultLimits.Floor {
		t.Errorf("real-kernel floor %+v not above the default %+v", KernelLimits, DefaultLimits)
	}
}

// Which packages get KernelLimits: those whose tests check for root,
// found in the repository's own packages.
func TestKernelTests(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, tc := range []struct {
		dir       string
		recursive bool
		want      bool
	}{
		{"init/netconf6", false, true},
		{"init/nic", false, true},
		{"kernel-config", false, false},
		{"server/http1", false, false},
		{"packer/postprocessor", true, false},
		{"init", false, false}, // init's own tests; init/nic's are below
		{"init", true, true},
	} {
		got, err := KernelTests(filepath.Join(root, tc.dir), tc.recursive)
		if err != nil || got != tc.want {
			t.Errorf("KernelTests(%s, %v) = %v, %v; want %v", tc.dir, tc.recursive, got, err, tc.want)
		}
		l, err := LimitsFor(filepath.Join(root, tc.dir), tc.recursive)
		if want := map[bool]Limits{true: KernelLimits, false: DefaultLimits}[tc.want]; err != nil || l != want {
			t.Errorf("LimitsFor(%s, %v) = %+v, %v; want %+v", tc.dir, tc.recursive, l, err, want)
		}
	}
}

// A one-file target leaves out the other files of its directory, not its
// tests or subdirectories.
func TestOtherFiles(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.go", "b.go", "b_test.go", "c.go", "notes.txt", "sub/d.go"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, f), []byte("package x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := otherFiles(dir, "b.go")
	if want := []string{"a.go", "c.go"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("otherFiles(b.go) = %q, %v; want %q", got, err, want)
	}
	if _, err := otherFiles(dir, "missing.go"); err == nil {
		t.Error("otherFiles of a file that is not there: no error")
	}
}
