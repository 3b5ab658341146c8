package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A Named mutation is one bug written out by hand, with the tests that must
// fail when it is put in (issue 41: "every test can fail"). gremlins'
// mutants are operator swaps picked by a program; these are the bugs a
// review named: a statement dropped, a constant changed, the pre-fix code
// put back. tests/mutation/named.txt is their catalogue, `make
// mutation-named` replays it (RunNamed) and TestNamedCatalogue checks in
// every `make unit` that each entry still applies to the code.
type Named struct {
	// Name identifies the entry (`-only` selects by it).
	Name string
	// From is the issue point the mutation comes from, and the note that
	// checked it first.
	From string
	// File is the file mutated, a slash path relative to the repository
	// root. It may be a test file: a harness change that makes the bug
	// happen (a disk write during a boot) is a mutation of the test.
	File string
	// Old is replaced by New in File. Old must occur exactly once.
	Old, New string
	// Pkg is the directory of the package whose tests run, relative to
	// the repository root (its module is found from it: packer/... runs
	// in the packer module).
	Pkg string
	// Run is go test's -run pattern: the tests of which at least one must
	// fail. Every test name in it must be a test function of Pkg.
	Run string
	// Boot marks an entry whose tests boot QEMU (minutes each): run only
	// with -boot, under the QEMU lock.
	Boot bool
	// Timeout is go test's -timeout for the entry (default 5 min, 30 for
	// a boot).
	Timeout time.Duration
	// Notes are free text, shown with the entry's result.
	Notes []string
	// Line is where the entry starts in the catalogue.
	Line int
}

// Label names the entry in messages: its name and catalogue line.
func (n Named) Label() string { return fmt.Sprintf("%s (line %d)", n.Name, n.Line) }

// timeout is go test's -timeout for n.
func (n Named) timeout() time.Duration {
	switch {
	case n.Timeout > 0:
		return n.Timeout
	case n.Boot:
		return 30 * time.Minute
	}
	return 5 * time.Minute
}

// ParseNamed reads a catalogue (the format is described at the top of
// tests/mutation/named.txt). Lines are `key value`; `mutation NAME` starts
// an entry; `#` starts a comment line. old and new take a Go string
// literal ("..." or `...`) or a here-document:
//
//	old <<END
//		for ; w.scanNext < end && expired < expirePerTurn; w.scanNext++ {
//	END
//
// whose text is the lines between, each with its newline, byte for byte.
func ParseNamed(r io.Reader) ([]Named, error) {
	var (
		out  []Named
		cur  *Named
		seen = map[string]int{}
		errs []error
		have map[string]bool
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	fail := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("line %d: "+format, append([]any{line}, a...)...))
	}
	finish := func() {
		if cur == nil {
			return
		}
		for _, k := range []string{"from", "file", "pkg", "run", "old", "new"} {
			if !have[k] {
				errs = append(errs, fmt.Errorf("mutation %s: no %s", cur.Label(), k))
			}
		}
		if have["old"] && cur.Old == "" {
			errs = append(errs, fmt.Errorf("mutation %s: old is empty", cur.Label()))
		}
		if have["old"] && have["new"] && cur.Old == cur.New {
			errs = append(errs, fmt.Errorf("mutation %s: new is old", cur.Label()))
		}
		out = append(out, *cur)
		cur = nil
	}
	for sc.Scan() {
		line++
		text := sc.Text()
		if t := strings.TrimSpace(text); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		key, val, _ := strings.Cut(text, " ")
		val = strings.TrimSpace(val)
		if key == "mutation" {
			finish()
			if val == "" || strings.ContainsAny(val, " \t,") {
				fail("mutation %q: want one word", val)
			}
			if l, dup := seen[val]; dup {
				fail("mutation %s: already at line %d", val, l)
			}
			seen[val] = line
			cur, have = &Named{Name: val, Line: line}, map[string]bool{}
			continue
		}
		if cur == nil {
			fail("%q before the first `mutation NAME`", key)
			continue
		}
		if have[key] && key != "note" {
			fail("%s given twice in %s", key, cur.Name)
		}
		have[key] = true
		switch key {
		case "from":
			cur.From = val
		case "file":
			cur.File = val
		case "pkg":
			cur.Pkg = strings.TrimSuffix(strings.TrimPrefix(val, "./"), "/")
		case "run":
			cur.Run = val
		case "note":
			cur.Notes = append(cur.Notes, val)
		case "boot":
			cur.Boot = true
			if val != "" {
				cur.Notes = append(cur.Notes, val)
			}
		case "timeout":
			d, err := time.ParseDuration(val)
			if err != nil || d <= 0 {
				fail("timeout %q: want a duration such as 10m", val)
			}
			cur.Timeout = d
		case "old", "new":
			var s string
			if end, ok := strings.CutPrefix(val, "<<"); ok {
				if end == "" {
					fail("%s <<: name the end line (<<END)", key)
				}
				start, closed := line, false
				var b strings.Builder
				for sc.Scan() {
					line++
					if sc.Text() == end {
						closed = true
						break
					}
					b.WriteString(sc.Text())
					b.WriteByte('\n')
				}
				if !closed {
					errs = append(errs, fmt.Errorf("line %d: %s <<%s: no line %q after it", start, key, end, end))
				}
				s = b.String()
			} else {
				var err error
				if s, err = strconv.Unquote(val); err != nil {
					fail("%s %s: want a Go string literal or <<END: %v", key, val, err)
				}
			}
			if key == "old" {
				cur.Old = s
			} else {
				cur.New = s
			}
		default:
			fail("unknown key %q (want from, file, pkg, run, old, new, boot, timeout, note)", key)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	finish()
	return out, errors.Join(errs...)
}

// ReadNamed reads the catalogue file.
func ReadNamed(file string) ([]Named, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ns, err := ParseNamed(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return ns, nil
}

// testFunc is a top-level test function's declaration.
var testFunc = regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]*)\(\w+ \*testing\.T\)`)

// testName is a test function's name inside a -run pattern.
var testName = regexp.MustCompile(`Test[A-Za-z0-9_]*`)

// TestFuncs lists the test functions of the package in dir (every
// _test.go file of it, whatever its build tags).
func TestFuncs(dir string) (map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	funcs := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range testFunc.FindAllSubmatch(b, -1) {
			funcs[string(m[1])] = true
		}
	}
	return funcs, nil
}

// splitRun splits a -run pattern into its levels as go test does: at each
// slash outside brackets and parentheses (testing's splitRegexp).
func splitRun(s string) []string {
	var out []string
	cs, cp, start := 0, 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			cs++
		case ']':
			if cs--; cs < 0 {
				cs = 0
			}
		case '(':
			if cs == 0 {
				cp++
			}
		case ')':
			if cs == 0 {
				cp--
			}
		case '\\':
			i++
		case '/':
			if cs == 0 && cp == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// Check reports why n cannot be replayed on the repository at repo: its
// file is missing, its old text does not occur exactly once, its package
// has none of the tests its pattern names. nil when it applies.
func (n Named) Check(repo string) error {
	var errs []error
	for _, p := range []string{n.File, n.Pkg} {
		if p == "" || path.IsAbs(p) || path.Clean(p) != p || strings.HasPrefix(p, "..") {
			errs = append(errs, fmt.Errorf("%q: want a slash path below the repository root", p))
		}
	}
	if b, err := os.ReadFile(filepath.Join(repo, filepath.FromSlash(n.File))); err != nil {
		errs = append(errs, err)
	} else if c := strings.Count(string(b), n.Old); c != 1 {
		errs = append(errs, fmt.Errorf("%s: the old text occurs %d times, want once: %q", n.File, c, n.Old))
	}
	funcs, err := TestFuncs(filepath.Join(repo, filepath.FromSlash(n.Pkg)))
	if err != nil {
		errs = append(errs, err)
	}
	levels := splitRun(n.Run)
	top, err := regexp.Compile(levels[0])
	for _, l := range levels[1:] {
		if _, err := regexp.Compile(l); err != nil {
			errs = append(errs, fmt.Errorf("run %q: %w", n.Run, err))
		}
	}
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("run %q: %w", n.Run, err))
	case len(funcs) == 0:
		errs = append(errs, fmt.Errorf("%s: no test functions", n.Pkg))
	default:
		var missing, matched []string
		for _, name := range testName.FindAllString(levels[0], -1) {
			if !funcs[name] {
				missing = append(missing, name)
			}
		}
		for f := range funcs {
			if top.MatchString(f) {
				matched = append(matched, f)
			}
		}
		if len(missing) > 0 {
			errs = append(errs, fmt.Errorf("run %q: no func %s(t *testing.T) in %s", n.Run, strings.Join(missing, ", "), n.Pkg))
		}
		if len(matched) == 0 {
			errs = append(errs, fmt.Errorf("run %q matches no test of %s", n.Run, n.Pkg))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("mutation %s: %w", n.Label(), err)
	}
	return nil
}

// Matched lists the test functions of n.Pkg that n.Run selects at its top
// level, sorted.
func (n Named) Matched(repo string) []string {
	funcs, _ := TestFuncs(filepath.Join(repo, filepath.FromSlash(n.Pkg)))
	top, err := regexp.Compile(splitRun(n.Run)[0])
	if err != nil {
		return nil
	}
	var out []string
	for f := range funcs {
		if top.MatchString(f) {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}
