package kernelconfig

import (
	"fmt"
	"sort"
	"strings"
)

// ViolationKind says how a requirement failed.
type ViolationKind int

const (
	// Forbidden: the requirement is "not set" but the option is on.
	Forbidden ViolationKind = iota + 1
	// Missing: the requirement is a value but the option is off or absent.
	Missing
	// Mismatch: the option is on with a different value.
	Mismatch
	// Overridden: the built-in command line does not start with the
	// required one, or later words override a mitigation.
	Overridden
	// Unknown: no supported tree defines the symbol (a typo).
	Unknown
)

func (k ViolationKind) String() string {
	switch k {
	case Forbidden:
		return "forbidden option set"
	case Missing:
		return "required option missing"
	case Mismatch:
		return "value mismatch"
	case Overridden:
		return "command line overridden"
	case Unknown:
		return "unknown symbol"
	}
	return "unknown"
}

// Violation is one requirement that does not hold in a .config.
type Violation struct {
	Requirement
	Kind ViolationKind
	Got  string // raw value found; NotSet; "" when the symbol is absent
	// Detail says why an Overridden command line fails.
	Detail string
	// Deps are the Kconfig conditions of the symbol that are not met in the
	// checked config (filled by Explain; empty when unknown).
	Deps []Dep
	// Undefined is set by Explain when no Kconfig file of the tree defines
	// the symbol (renamed or removed in this kernel version).
	Undefined bool
}

// Error names the option, what was found, what the fragment wanted, and why
// Kconfig refused it where that is known.
func (v Violation) Error() string {
	var b strings.Builder
	switch v.Kind {
	case Forbidden:
		fmt.Fprintf(&b, "%s: %s is set, but %s requires it off", v.Kind, Line(v.Symbol, v.Got), v.Where())
	case Missing:
		state := "absent from .config"
		if v.Got == NotSet {
			state = "not set"
		}
		fmt.Fprintf(&b, "%s: CONFIG_%s is %s, but %s requires %s", v.Kind, v.Symbol, state, v.Where(), v.Requirement)
	case Mismatch:
		fmt.Fprintf(&b, "%s: %s, but %s requires %s", v.Kind, Line(v.Symbol, v.Got), v.Where(), v.Requirement)
	case Overridden:
		fmt.Fprintf(&b, "%s: %s requires %s: %s", v.Kind, v.Where(), v.Requirement, v.Detail)
	case Unknown:
		fmt.Fprintf(&b, "%s: %s names CONFIG_%s, which no Kconfig file of this tree defines and no other supported tree has "+
			"(fragments/other-trees.txt): a typo?", v.Kind, v.Where(), v.Symbol)
		return b.String()
	}
	if v.Undefined {
		b.WriteString(" (no Kconfig file of this tree defines it: renamed or removed in this version?)")
	}
	for _, d := range v.Deps {
		fmt.Fprintf(&b, "; Kconfig %s", d)
	}
	return b.String()
}

// Check compares a final .config with the requirements. It is a pure
// function so that the policy can be tested on small fixtures.
//
// CMDLINE is the one requirement that is a prefix, not a value: an image
// appends its own words to the policy's command line, so the final line
// must start with the required one and no appended word may name a
// mitigation parameter (CheckCmdline).
func Check(reqs []Requirement, got *Config) []Violation {
	var out []Violation
	for _, r := range reqs {
		val, present := got.Get(r.Symbol)
		on := present && val != NotSet && val != ""
		switch {
		case r.Symbol == "CMDLINE" && r.Value != NotSet && on:
			if err := CheckCmdline(Unquote(r.Value), Unquote(val)); err != nil {
				out = append(out, Violation{Requirement: r, Kind: Overridden, Got: val, Detail: err.Error()})
			}
		case r.Value == NotSet:
			if on {
				out = append(out, Violation{Requirement: r, Kind: Forbidden, Got: val})
			}
		case !on:
			if !present {
				val = ""
			}
			out = append(out, Violation{Requirement: r, Kind: Missing, Got: val})
		case val != r.Value:
			out = append(out, Violation{Requirement: r, Kind: Mismatch, Got: val})
		}
	}
	return out
}

// PolicyError is returned when requirements did not stick.
type PolicyError struct {
	Violations []Violation
	Config     string // path of the offending .config, if any
}

func (e *PolicyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kernel config: %d requested option(s) did not stick", len(e.Violations))
	if e.Config != "" {
		fmt.Fprintf(&b, " (in %s)", e.Config)
	}
	b.WriteString(":")
	for _, v := range e.Violations {
		b.WriteString("\n  ")
		b.WriteString(v.Error())
	}
	b.WriteString("\nfix the fragment (enable what the option depends on, or drop the option)")
	return b.String()
}

// Summary describes a verified set of requirements for humans: per fragment,
// how many options were required on and off and really checked, the "off"
// lines on symbols this tree lacks (absent, not counted), and the policy's
// lines.
func Summary(reqs []Requirement, absent []Absent) string {
	type count struct{ on, off, absent int }
	counts := map[string]*count{}
	var names []string
	var policyOn, policyOff []string
	isAbsent := map[Requirement]bool{}
	for _, a := range absent {
		isAbsent[a.Requirement] = true
	}
	for _, r := range reqs {
		c, ok := counts[r.Fragment]
		if !ok {
			c = &count{}
			counts[r.Fragment] = c
			names = append(names, r.Fragment)
		}
		switch {
		case isAbsent[r]:
			c.absent++
			continue
		case r.Value == NotSet:
			c.off++
		default:
			c.on++
		}
		if IsPolicy(r.Fragment) {
			if r.Value == NotSet {
				policyOff = append(policyOff, r.Symbol)
			} else {
				policyOn = append(policyOn, r.Symbol+"="+r.Value)
			}
		}
	}
	var b strings.Builder
	total, totalAbsent := 0, 0
	for _, n := range names {
		c := counts[n]
		total += c.on + c.off
		totalAbsent += c.absent
		fmt.Fprintf(&b, "  %-14s %3d options hold (%d on/with value, %d off)", n, c.on+c.off, c.on, c.off)
		if c.absent > 0 {
			fmt.Fprintf(&b, "; %d lines name symbols this tree lacks", c.absent)
		}
		b.WriteString("\n")
	}
	sort.Strings(policyOff)
	if len(policyOff) > 0 {
		fmt.Fprintf(&b, "  policy off: %s\n", strings.Join(policyOff, " "))
	}
	if len(policyOn) > 0 {
		fmt.Fprintf(&b, "  policy on:  %s\n", strings.Join(policyOn, " "))
	}
	if len(absent) > 0 {
		syms := make([]string, len(absent))
		for i, a := range absent {
			syms[i] = a.Symbol
		}
		sort.Strings(syms)
		fmt.Fprintf(&b, "  not in this tree (other trees', see fragments/other-trees.txt): %s\n", strings.Join(syms, " "))
	}
	head := fmt.Sprintf("policy verified: %d requested options hold in the final .config", total)
	if totalAbsent > 0 {
		head += fmt.Sprintf(" (%d more name symbols this tree does not define; not counted)", totalAbsent)
	}
	return head + "\n" + b.String()
}
