package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// gremlinsResult is the part of gremlins' --output file (its
// internal/report/internal.OutputResult, v0.6.0) that the report reads.
type gremlinsResult struct {
	Files []gremlinsFile `json:"files"`
}

type gremlinsFile struct {
	FileName  string             `json:"file_name"` // relative to the directory gremlins ran on
	Mutations []gremlinsMutation `json:"mutations"`
}

type gremlinsMutation struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
}

// gremlins' statuses of a mutant.
const (
	statusKilled     = "KILLED"
	statusLived      = "LIVED"
	statusTimedOut   = "TIMED OUT"
	statusNotCovered = "NOT COVERED"
	statusNotViable  = "NOT VIABLE"
	statusSkipped    = "SKIPPED"
)

// A Mutant is one mutation gremlins tested.
type Mutant struct {
	File   string // repository path, slash-separated
	Line   int
	Column int
	Type   string // gremlins' mutator, e.g. CONDITIONALS_BOUNDARY
	Status string // gremlins' status, e.g. LIVED
	From   string // the token in the source, e.g. "<"
	To     string // what the mutant has instead, e.g. "<="
	Source string // the source line, trimmed
	// Note says why the mutant is equivalent by construction, when it is.
	Note string `json:",omitempty"`
}

// Where is file:line:column.
func (m Mutant) Where() string { return fmt.Sprintf("%s:%d:%d", m.File, m.Line, m.Column) }

// Change is the mutation in a few characters: "`<` -> `<=`".
func (m Mutant) Change() string {
	if m.From == "" {
		return m.Type
	}
	return fmt.Sprintf("`%s` -> `%s`", m.From, m.To)
}

// A Package is the result of one package (directory) of a target.
type Package struct {
	Package string // repository directory, e.g. packer/postprocessor/ami
	Target  string // the target it was mutated under, e.g. packer/postprocessor/...

	Killed, TimedOut, Lived, NotCovered, NotViable int
	// Untested counts NOT COVERED mutants where Go's coverage profile,
	// which gremlins decides coverage by, has no block at all: the
	// expressions of switch cases and package-level initialisers. A test
	// may well run them; gremlins never tried. They are listed with the
	// survivors (Note says why) but left out of the score either way.
	Untested int
	// Partial is set when the figures come from gremlins' output of a run
	// that did not finish (stopped, or still running): only the mutants
	// decided so far.
	Partial bool `json:",omitempty"`
	// Duplicates counts the mutants gremlins tested twice (a binary `-` is
	// both ARITHMETIC_BASE and INVERT_NEGATIVES, the same code); counted
	// once above. Disagree counts those whose two runs disagreed: a flaky
	// test, or a timeout under load.
	Duplicates, Disagree int
	// Survivors are the LIVED and NOT COVERED mutants, by file and line.
	Survivors []Mutant
}

// Tested is the number of mutants that compiled, but those gremlins left
// untested for want of a coverage block (Untested).
func (p Package) Tested() int { return p.Killed + p.TimedOut + p.Lived + p.NotCovered }

// Score is the percentage of the mutants that compiled which a test
// detected (failed, or ran out of time): the mutation score. A mutant on a
// line no test runs (NOT COVERED) counts as surviving.
func (p Package) Score() float64 {
	if p.Tested() == 0 {
		return 0
	}
	return 100 * float64(p.Killed+p.TimedOut) / float64(p.Tested())
}

// CoveredScore is Score over the mutants on lines a test runs: gremlins'
// "test efficacy" (which leaves TIMED OUT out; here it counts as detected).
func (p Package) CoveredScore() float64 {
	n := p.Killed + p.TimedOut + p.Lived
	if n == 0 {
		return 0
	}
	return 100 * float64(p.Killed+p.TimedOut) / float64(n)
}

// A Report is one `make mutation` run.
type Report struct {
	Gremlins string    // module and version of the gremlins binary
	Started  time.Time // UTC
	Targets  []TargetRun
	Packages []Package
}

// A TargetRun is how one target's run went.
type TargetRun struct {
	Target  string
	Seconds float64
	Error   string `json:",omitempty"` // the run failed: no result for it
}

// logLine is a mutant's line in gremlins' output, written as soon as the
// mutant is decided: "      LIVED CONDITIONALS_BOUNDARY at parse.go:71:16".
var logLine = regexp.MustCompile(`^\s*(KILLED|LIVED|TIMED OUT|NOT COVERED|NOT VIABLE|SKIPPED) ([A-Z_]+) at (.+):(\d+):(\d+)$`)

// readLog rebuilds gremlins' result from its output, for a run that was
// stopped (or is still running) before gremlins wrote its result file.
func readLog(file string) (gremlinsResult, error) {
	var r gremlinsResult
	b, err := os.ReadFile(file)
	if err != nil {
		return r, err
	}
	index := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		m := logLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		i, ok := index[m[3]]
		if !ok {
			i = len(r.Files)
			index[m[3]] = i
			r.Files = append(r.Files, gremlinsFile{FileName: m[3]})
		}
		ln, _ := strconv.Atoi(m[4])
		col, _ := strconv.Atoi(m[5])
		r.Files[i].Mutations = append(r.Files[i].Mutations, gremlinsMutation{Type: m[2], Status: m[1], Line: ln, Column: col})
	}
	return r, nil
}

// readResult reads gremlins' result file for raw (the path without
// extension); when there is none, it reads the log and partial is set.
func readResult(raw string) (r gremlinsResult, partial bool, err error) {
	b, err := os.ReadFile(raw + ".json")
	if errors.Is(err, fs.ErrNotExist) {
		r, err = readLog(raw + ".log")
		return r, true, err
	}
	if err != nil {
		return r, false, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, false, fmt.Errorf("%s.json: %w", raw, err)
	}
	return r, false, nil
}

// Load reads gremlins' result for target t (run on the stage directory of
// t.Dir; raw is the result's path without .json) and each mutant's source
// line from the repository at repo.
func Load(raw string, s *Stage, t Target, repo string) ([]Package, error) {
	r, partial, err := readResult(raw)
	if err != nil {
		return nil, err
	}
	src := sourceCache{repo: repo, lines: map[string][]string{}, files: map[string]*parsedFile{}}
	byPkg := map[string]*Package{}
	seen := map[string]*Mutant{}
	for _, f := range r.Files {
		file := s.RepoPath(path.Join(s.StagePath(t.Dir), filepath.ToSlash(f.FileName)))
		pkg := byPkg[path.Dir(file)]
		if pkg == nil {
			pkg = &Package{Package: path.Dir(file), Target: t.Name(), Partial: partial}
			byPkg[pkg.Package] = pkg
		}
		for _, mu := range f.Mutations {
			m := Mutant{File: file, Line: mu.Line, Column: mu.Column, Type: mu.Type, Status: mu.Status}
			line := src.line(file, mu.Line)
			m.Source = strings.TrimSpace(line)
			m.From, m.To, m.Note = describe(line, mu.Column, mu.Type)
			if m.Status == statusNotCovered {
				if why := src.noBlock(file, mu.Line, mu.Column); why != "" {
					m.Note = why
				}
			}
			key := fmt.Sprintf("%s:%d:%d %s", m.File, m.Line, m.Column, m.To)
			if prev := seen[key]; prev != nil && m.To != "" {
				pkg.Duplicates++
				if prev.Status != m.Status {
					pkg.Disagree++
				}
				continue
			}
			seen[key] = &m
			pkg.add(m)
		}
	}
	var pkgs []Package
	for _, p := range byPkg {
		sort.Slice(p.Survivors, func(i, j int) bool {
			a, b := p.Survivors[i], p.Survivors[j]
			if a.File != b.File {
				return a.File < b.File
			}
			if a.Line != b.Line {
				return a.Line < b.Line
			}
			return a.Column < b.Column
		})
		pkgs = append(pkgs, *p)
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].Package < pkgs[j].Package })
	return pkgs, nil
}

func (p *Package) add(m Mutant) {
	switch m.Status {
	case statusKilled:
		p.Killed++
	case statusTimedOut:
		p.TimedOut++
	case statusLived:
		p.Lived++
		p.Survivors = append(p.Survivors, m)
	case statusNotCovered:
		if strings.HasPrefix(m.Note, noBlockNote) {
			p.Untested++
		} else {
			p.NotCovered++
		}
		p.Survivors = append(p.Survivors, m)
	case statusNotViable:
		p.NotViable++
	}
}

// sourceCache reads the lines of repository files once each.
type sourceCache struct {
	repo  string
	lines map[string][]string
	files map[string]*parsedFile
}

type parsedFile struct {
	fset *token.FileSet
	f    *ast.File
}

// noBlockNote starts the Note of a mutant gremlins left untested because
// Go's coverage profile has no block where it is.
const noBlockNote = "untested by gremlins: "

// noBlock says why the mutant at line:col of file lies outside every block
// of Go's coverage profile (cmd/cover ends a block before a switch and
// starts the next at the first case body, so case expressions belong to
// none; package-level declarations are outside functions), or "".
func (c sourceCache) noBlock(file string, line, col int) string {
	pf, ok := c.files[file]
	if !ok {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, filepath.Join(c.repo, filepath.FromSlash(file)), nil, parser.SkipObjectResolution)
		if err != nil {
			f = nil
		}
		pf = &parsedFile{fset: fset, f: f}
		c.files[file] = pf
	}
	if pf.f == nil {
		return ""
	}
	tf := pf.fset.File(pf.f.Pos())
	if line < 1 || line > tf.LineCount() {
		return ""
	}
	pos := tf.LineStart(line) + token.Pos(col-1)
	in := func(n ast.Node) bool { return n != nil && n.Pos() <= pos && pos < n.End() }
	why := ""
	for _, d := range pf.f.Decls {
		if gd, ok := d.(*ast.GenDecl); ok && in(gd) {
			return noBlockNote + "a package-level declaration has no coverage block"
		}
	}
	ast.Inspect(pf.f, func(n ast.Node) bool {
		if why != "" || n == nil || !in(n) {
			return why == ""
		}
		if cc, ok := n.(*ast.CaseClause); ok {
			for _, e := range cc.List {
				if in(e) {
					why = noBlockNote + "a switch case expression has no coverage block (a test may run it)"
				}
			}
		}
		return why == ""
	})
	return why
}

func (c sourceCache) line(file string, n int) string {
	ls, ok := c.lines[file]
	if !ok {
		b, _ := os.ReadFile(filepath.Join(c.repo, filepath.FromSlash(file)))
		ls = strings.Split(string(b), "\n")
		c.lines[file] = ls
	}
	if n < 1 || n > len(ls) {
		return ""
	}
	return ls[n-1]
}

// operators are the tokens gremlins mutates, longest first so that the
// token at a column is read whole.
var operators = []string{
	"continue", "break",
	"&^=", "<<=", ">>=",
	"&&", "||", "&^", "<<", ">>", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=",
	"++", "--", "==", "!=", "<=", ">=",
	"<", ">", "+", "-", "*", "/", "%", "&", "|", "^",
}

// mutations is what each gremlins mutator puts in place of each token
// (gremlins' documentation, docs/usage/mutations, checked against its
// engine/mappings.go of v0.6.0).
var mutations = map[string]map[string]string{
	"ARITHMETIC_BASE":       {"+": "-", "-": "+", "*": "/", "/": "*", "%": "*"},
	"CONDITIONALS_BOUNDARY": {">": ">=", ">=": ">", "<": "<=", "<=": "<"},
	"CONDITIONALS_NEGATION": {"==": "!=", "!=": "==", ">": "<=", ">=": "<", "<": ">=", "<=": ">"},
	"INCREMENT_DECREMENT":   {"++": "--", "--": "++"},
	// %= -> %=: the documentation says *=, v0.6.0's table maps %= to
	// itself, so that mutant is the original code (see Note).
	"INVERT_ASSIGNMENTS": {"+=": "-=", "-=": "+=", "*=": "/=", "/=": "*=", "%=": "%="},
	"INVERT_BITWISE":     {"&": "|", "|": "&", "^": "&", "&^": "&", "<<": ">>", ">>": "<<"},
	"INVERT_BWASSIGN":    {"&=": "|=", "|=": "&=", "^=": "&=", "&^=": "&=", "<<=": ">>=", ">>=": "<<="},
	"INVERT_LOGICAL":     {"&&": "||", "||": "&&"},
	"INVERT_LOOPCTRL":    {"break": "continue", "continue": "break"},
	"INVERT_NEGATIVES":   {"-": "+"},
	"REMOVE_SELF_ASSIGNMENTS": {
		"+=": "=", "-=": "=", "*=": "=", "/=": "=", "%=": "=",
		"&=": "=", "|=": "=", "^=": "=", "&^=": "=", "<<=": "=", ">>=": "=",
	},
}

// describe reads the token at the 1-based byte column col of line and what
// mutator typ makes of it; note is set when the mutant is the original
// code. An unknown token or mutator gives empty strings.
func describe(line string, col int, typ string) (from, to, note string) {
	if col < 1 || col > len(line) {
		return "", "", ""
	}
	rest := line[col-1:]
	for _, op := range operators {
		if strings.HasPrefix(rest, op) {
			from = op
			break
		}
	}
	to = mutations[typ][from]
	if to == "" {
		return from, "", ""
	}
	if to == from {
		note = "equivalent by construction: gremlins v0.6.0 leaves the token unchanged"
	}
	return from, to, note
}

// Summary writes the per-package table: the figures an "after" run is
// compared against. before, when not nil, adds the score of an earlier run.
func (r Report) Summary(w io.Writer, before *Report) {
	prev := map[string]Package{}
	if before != nil {
		for _, p := range before.Packages {
			prev[p.Package] = p
		}
	}
	fmt.Fprintf(w, "%-30s %6s %6s %6s %6s %6s %6s %6s %7s %7s", "package", "tested", "killed", "t/out", "lived", "uncov", "nobloc", "n/v", "score", "covered")
	if before != nil {
		fmt.Fprintf(w, " %7s", "before")
	}
	fmt.Fprintln(w)
	var all Package
	for _, p := range r.Packages {
		name := p.Package
		if p.Partial {
			name += " (partial)"
		}
		fmt.Fprintf(w, "%-30s %6d %6d %6d %6d %6d %6d %6d %6.1f%% %6.1f%%", name, p.Tested(), p.Killed, p.TimedOut, p.Lived, p.NotCovered, p.Untested, p.NotViable, p.Score(), p.CoveredScore())
		if before != nil {
			if b, ok := prev[p.Package]; ok {
				fmt.Fprintf(w, " %6.1f%%", b.Score())
			} else {
				fmt.Fprintf(w, " %7s", "-")
			}
		}
		fmt.Fprintln(w)
		all.Killed += p.Killed
		all.TimedOut += p.TimedOut
		all.Lived += p.Lived
		all.NotCovered += p.NotCovered
		all.NotViable += p.NotViable
		all.Untested += p.Untested
	}
	fmt.Fprintf(w, "%-30s %6d %6d %6d %6d %6d %6d %6d %6.1f%% %6.1f%%\n", "all", all.Tested(), all.Killed, all.TimedOut, all.Lived, all.NotCovered, all.Untested, all.NotViable, all.Score(), all.CoveredScore())
	for _, t := range r.Targets {
		if t.Error != "" {
			fmt.Fprintf(w, "FAILED %s: %s\n", t.Target, t.Error)
		}
	}
}

// WriteText writes the whole report: the table, then every survivor by
// package and file.
func (r Report) WriteText(w io.Writer, before *Report) {
	fmt.Fprintf(w, "mutation report, %s, started %s\n", r.Gremlins, r.Started.Format(time.RFC3339))
	fmt.Fprintln(w, "score = detected (killed or timed out) / mutants that compiled; covered = the same over mutants on lines a test runs;")
	fmt.Fprintln(w, "nobloc = NOT COVERED only because Go's coverage profile has no block there (switch cases, package-level): untested, outside the score")
	fmt.Fprintln(w)
	r.Summary(w, before)
	for _, t := range r.Targets {
		if t.Seconds > 0 {
			fmt.Fprintf(w, "time %s: %.0f s\n", t.Target, t.Seconds)
		}
	}
	for _, p := range r.Packages {
		fmt.Fprintf(w, "\n== %s: %d lived, %d not covered", p.Package, p.Lived, p.NotCovered)
		if p.Partial {
			fmt.Fprint(w, " (partial: the run did not finish; only the mutants decided so far)")
		}
		if p.Duplicates > 0 {
			fmt.Fprintf(w, " (%d duplicate mutants counted once, %d of them disagreeing)", p.Duplicates, p.Disagree)
		}
		fmt.Fprintln(w)
		file := ""
		for _, m := range p.Survivors {
			if m.File != file {
				file = m.File
				fmt.Fprintf(w, "-- %s\n", file)
			}
			fmt.Fprintf(w, "%-11s %s:%d:%d %s %s   | %s", m.Status, path.Base(m.File), m.Line, m.Column, m.Type, m.Change(), m.Source)
			if m.Note != "" {
				fmt.Fprintf(w, "   [%s]", m.Note)
			}
			fmt.Fprintln(w)
		}
	}
}

// ReadReport reads a report.json written by an earlier run.
func ReadReport(file string) (*Report, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &r, nil
}
