package kernelconfig

import (
	_ "embed"
	"fmt"
	"strings"
)

//go:embed fragments/other-trees.txt
var otherTreesText string

// OtherTrees maps each symbol the fragments may name although the built
// tree does not define it to the trees that do (fragments/other-trees.txt).
var OtherTrees = parseOtherTrees(otherTreesText)

func parseOtherTrees(text string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sym, where, _ := strings.Cut(line, " ")
		m[sym] = strings.TrimSpace(where)
	}
	return m
}

// Absent is an "off" requirement on a symbol the checked tree does not
// define: it holds trivially, so it is reported and not counted as checked.
type Absent struct {
	Requirement
	Elsewhere string // the trees that define it
}

// CheckDefined sorts out requirements on symbols the tree does not define
// (defined reports whether it does). An "off" requirement on a symbol
// another supported tree defines (elsewhere) is Absent; any other "off"
// requirement on an undefined symbol is an Unknown violation: it exists in
// no supported tree, which is a typo. A requirement with a value on an
// undefined symbol is Absent only when elsewhere lists it with that value
// ("RANDOM_TRUST_CPU=y": the option was removed because what it switched on
// became unconditional); any other is left to Check, which finds it missing.
func CheckDefined(reqs []Requirement, defined func(sym string) bool, elsewhere map[string]string) ([]Absent, []Violation) {
	var absent []Absent
	var vs []Violation
	for _, r := range reqs {
		if defined(r.Symbol) {
			continue
		}
		if r.Value != NotSet {
			if where, ok := elsewhere[r.Symbol+"="+r.Value]; ok {
				absent = append(absent, Absent{Requirement: r, Elsewhere: where})
			}
			continue
		}
		if where, ok := elsewhere[r.Symbol]; ok {
			absent = append(absent, Absent{Requirement: r, Elsewhere: where})
			continue
		}
		vs = append(vs, Violation{Requirement: r, Kind: Unknown, Undefined: true})
	}
	return absent, vs
}

// checkable is reqs without the absent ones: what Check must find in the
// final .config (an absent "off" line holds there anyway; an absent line
// with a value would be reported missing).
func checkable(reqs []Requirement, absent []Absent) []Requirement {
	skip := map[Requirement]bool{}
	for _, a := range absent {
		skip[a.Requirement] = true
	}
	out := make([]Requirement, 0, len(reqs))
	for _, r := range reqs {
		if !skip[r] {
			out = append(out, r)
		}
	}
	return out
}

// treeDefined returns which of the requirements' symbols a Kconfig file of
// the tree defines.
func treeDefined(tree, kernelArch string, reqs []Requirement) (func(string) bool, error) {
	want := map[string]bool{}
	for _, r := range reqs {
		want[r.Symbol] = true
	}
	defs, err := findDefinitions(tree, kernelArch, want)
	if err != nil {
		return nil, fmt.Errorf("kernel config: read Kconfig files of %s: %w", tree, err)
	}
	return func(sym string) bool {
		for _, d := range defs[sym] {
			if d.Kind == "defined" {
				return true
			}
		}
		return false
	}, nil
}

// verifyDefined runs CheckDefined on a source tree.
func verifyDefined(tree, kernelArch string, reqs []Requirement) ([]Absent, error) {
	defined, err := treeDefined(tree, kernelArch, reqs)
	if err != nil {
		return nil, err
	}
	absent, vs := CheckDefined(reqs, defined, OtherTrees)
	if len(vs) > 0 {
		return nil, &PolicyError{Violations: vs}
	}
	return absent, nil
}
