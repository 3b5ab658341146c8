package main

import (
	"fmt"
	"path"
	"strings"
)

// DefaultTargets are the packages where a wrong line hurts users most
// (issue 20): the HTTP framing, the CPU steering, the NIC masks, the
// user-data rules, the supervisor, the IPv6 mode and DHCPv6 lease, the
// kernel policy, the predicted PCRs and the AMI upload (issue 41 added
// init/netconf6 and image/pcr).
var DefaultTargets = []string{
	"server/http1",
	"server/reuseport",
	"init/nic",
	"init/config",
	"init/supervise",
	"init/netconf6",
	"kernel-config",
	"image/pcr",
	"packer/ebsupload",
	"packer/postprocessor/...",
}

// A Target is one directory of the repository to mutate.
type Target struct {
	// Dir is the directory, slash-separated, relative to the repository
	// root ("kernel-config", "packer/postprocessor").
	Dir string
	// Recursive is set for a pattern ending in "/...": the packages below
	// Dir are mutated too. Otherwise only the files of Dir itself are
	// (kernel-config/cmd/hotpath-kernel, a CLI without tests, and
	// init/supervise/testdata are left out that way).
	Recursive bool
	// Only, when set, is the one file of Dir to mutate ("check.go"): the
	// target was given as kernel-config/check.go. The package's tests all
	// run, as for the whole directory; the other files are left out. A
	// package whose every mutant costs minutes can be measured where it
	// changed.
	Only string
}

// Name is the target as it was given ("packer/postprocessor/...").
func (t Target) Name() string {
	if t.Recursive {
		return t.Dir + "/..."
	}
	if t.Only != "" {
		return t.Dir + "/" + t.Only
	}
	return t.Dir
}

// File is the name of the target's raw files under out/mutation/raw.
func (t Target) File() string {
	f := strings.ReplaceAll(strings.TrimSuffix(t.Dir, "/"), "/", "_")
	if t.Only != "" {
		f += "_" + strings.TrimSuffix(t.Only, ".go")
	}
	return f
}

// ParseTarget reads one target as `make mutation MUTATION_PKG=...` or the
// -pkg flag gives it: a directory relative to the repository root, with an
// optional "./" in front and "/..." behind.
func ParseTarget(s string) (Target, error) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "./")
	t := Target{Dir: s}
	if d, ok := strings.CutSuffix(s, "/..."); ok {
		t = Target{Dir: d, Recursive: true}
	}
	t.Dir = strings.TrimSuffix(t.Dir, "/")
	if strings.HasSuffix(t.Dir, ".go") && !t.Recursive {
		if strings.HasSuffix(t.Dir, "_test.go") {
			return Target{}, fmt.Errorf("target %q: a test file is not mutated; name the file under test", s)
		}
		t = Target{Dir: path.Dir(t.Dir), Only: path.Base(t.Dir)}
	}
	if t.Dir == "" || t.Dir == "." || path.IsAbs(t.Dir) || path.Clean(t.Dir) != t.Dir || strings.HasPrefix(t.Dir, "..") {
		return Target{}, fmt.Errorf("target %q: want a directory below the repository root, such as server/http1 or packer/postprocessor/...", s)
	}
	return t, nil
}

// ParseTargets reads a comma- or space-separated list of targets; an empty
// list is DefaultTargets.
func ParseTargets(s string) ([]Target, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
	if len(fields) == 0 {
		fields = DefaultTargets
	}
	var ts []Target
	seen := map[string]bool{}
	for _, f := range fields {
		t, err := ParseTarget(f)
		if err != nil {
			return nil, err
		}
		if seen[t.Name()] {
			continue
		}
		seen[t.Name()] = true
		ts = append(ts, t)
	}
	return ts, nil
}
