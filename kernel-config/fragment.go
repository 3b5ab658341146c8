package kernelconfig

import (
	"bufio"
	"embed"
	"fmt"
	"io"
	"path"
	"strings"
)

//go:embed fragments/*.config fragments/arm64/*.config
var fragmentFS embed.FS

// Requirement is one line of a fragment: Symbol must end up with Value in
// the final .config (NotSet: must be off or absent).
type Requirement struct {
	Symbol   string // without the CONFIG_ prefix
	Value    string // raw .config value, or NotSet
	Why      string // the comment block above the line
	Fragment string // fragment name, e.g. "policy.config"
	Line     int    // line number in the fragment
}

// String is the requirement as a .config line.
func (r Requirement) String() string { return Line(r.Symbol, r.Value) }

// Where names the fragment line, for error messages.
func (r Requirement) Where() string { return fmt.Sprintf("%s:%d", r.Fragment, r.Line) }

// Fragment is a named list of requirements, parsed from Kconfig fragment
// syntax with the comments kept as the reason for each option.
type Fragment struct {
	Name         string
	Requirements []Requirement
}

// ParseFragment parses fragment text. A comment block (consecutive "# ..."
// lines that are not "is not set" lines) becomes the Why of the requirement
// lines that follow it; a blank line ends the block.
func ParseFragment(name string, r io.Reader) (*Fragment, error) {
	f := &Fragment{Name: name}
	var why []string
	lastWasReq := false
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		sym, val, isReq := "", "", false
		if m := setLine.FindStringSubmatch(line); m != nil {
			sym, val, isReq = m[1], m[2], true
			if val == "" || val == "n" {
				return nil, fmt.Errorf("%s:%d: write %q instead of %q", name, n, Line(sym, NotSet), line)
			}
		} else if m := notSetLine.FindStringSubmatch(line); m != nil {
			sym, val, isReq = m[1], NotSet, true
		}
		switch {
		case isReq:
			f.Requirements = append(f.Requirements, Requirement{
				Symbol: sym, Value: val, Why: strings.Join(why, " "), Fragment: name, Line: n,
			})
			lastWasReq = true
		case line == "":
			why, lastWasReq = nil, false
		case strings.HasPrefix(line, "#"):
			if lastWasReq {
				why = nil
			}
			lastWasReq = false
			text := strings.TrimSpace(strings.TrimPrefix(line, "#"))
			if strings.HasPrefix(text, "----") { // section rule, not a reason
				continue
			}
			why = append(why, text)
		default:
			return nil, fmt.Errorf("%s:%d: not a Kconfig fragment line: %q", name, n, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return f, nil
}

// Config returns the fragment's lines as a Config (for merging).
func (f *Fragment) Config() *Config {
	c := NewConfig()
	for _, r := range f.Requirements {
		c.Set(r.Symbol, r.Value)
	}
	return c
}

// DefaultFragments returns hotpath's own fragments for amd64: base.config
// (guest support) then policy.config (the appliance policy).
func DefaultFragments() ([]*Fragment, error) { return TargetFragments(AMD64) }

// TargetFragments returns the built-in fragments of a target, in merge
// order (later lines win).
func TargetFragments(t *Target) ([]*Fragment, error) {
	var out []*Fragment
	for _, name := range t.Fragments {
		f, err := fragmentFS.Open("fragments/" + name)
		if err != nil {
			return nil, err
		}
		frag, err := ParseFragment(name, f)
		f.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, frag)
	}
	return out, nil
}

// FragmentText returns the embedded text of a built-in fragment.
func FragmentText(name string) (string, error) {
	b, err := fragmentFS.ReadFile("fragments/" + name)
	return string(b), err
}

// Requirements flattens fragments in order; a later fragment's line for the
// same symbol replaces an earlier one (Kconfig merge semantics), except that
// the policy fragment may not be overridden: a user fragment contradicting
// the policy is an error, whichever comes first.
func Requirements(frags []*Fragment) ([]Requirement, error) {
	idx := map[string]int{}
	var out []Requirement
	for _, f := range frags {
		for _, r := range f.Requirements {
			if i, ok := idx[r.Symbol]; ok {
				prev := out[i]
				if prev.Value != r.Value && (IsPolicy(prev.Fragment) || IsPolicy(r.Fragment)) {
					return nil, fmt.Errorf("%s wants %s but %s (the appliance policy) wants %s",
						r.Where(), r, prev.Where(), prev)
				}
				out[i] = r
				continue
			}
			idx[r.Symbol] = len(out)
			out = append(out, r)
		}
	}
	return out, nil
}

// MergedFragments is the Config of all requirements, in order.
func MergedFragments(reqs []Requirement) *Config {
	c := NewConfig()
	for _, r := range reqs {
		c.Set(r.Symbol, r.Value)
	}
	return c
}

// IsPolicy reports whether a fragment name is an appliance policy
// (policy.config, or arm64/policy.config for another target).
func IsPolicy(fragment string) bool { return path.Base(fragment) == "policy.config" }
