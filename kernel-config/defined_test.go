package kernelconfig

import (
	"errors"
	"strings"
	"testing"
)

// TestOtherTreesListed: the list parses, and every symbol the built-in
// fragments name is either one a 6.1 tree defines or listed; the policy's
// newer names are listed.
func TestOtherTreesListed(t *testing.T) {
	for _, sym := range []string{"SPECULATION_MITIGATIONS", "MITIGATION_RETPOLINE", "MITIGATION_SSB", "CALL_DEPTH_TRACKING"} {
		if OtherTrees[sym] == "" {
			t.Errorf("%s not in other-trees.txt", sym)
		}
	}
	if _, ok := OtherTrees["NETFILTER"]; ok {
		t.Error("NETFILTER listed as another tree's: 6.1 defines it")
	}
}

func TestVerifyDefined(t *testing.T) {
	reqs := loadFragment(t, "testdata/policy-other-trees.config")
	absent, err := verifyDefined("testdata/tree", "x86_64", reqs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range absent {
		got = append(got, a.Symbol)
		if a.Elsewhere == "" {
			t.Errorf("%s: no tree named", a.Symbol)
		}
	}
	if strings.Join(got, " ") != "MITIGATION_RETPOLINE SPECULATION_MITIGATIONS" {
		t.Errorf("absent = %v, want the two newer names", got)
	}
	s := Summary(reqs, absent)
	for _, want := range []string{
		"policy verified: 6 requested options hold in the final .config (2 more name symbols this tree does not define; not counted)",
		"policy-other-trees.config   6 options hold (1 on/with value, 5 off); 2 lines name symbols this tree lacks",
		"not in this tree (other trees', see fragments/other-trees.txt): MITIGATION_RETPOLINE SPECULATION_MITIGATIONS",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}

// TestVerifyDefinedTypo: an "off" line on a symbol no tree defines fails
// and names the line; so does one only another architecture defines.
func TestVerifyDefinedTypo(t *testing.T) {
	for _, tc := range []struct{ line, sym string }{
		{"# CONFIG_NETFILTR is not set", "NETFILTR"},
		{"# CONFIG_ARM64_ONLY is not set", "ARM64_ONLY"},
	} {
		frag, err := ParseFragment("typo.config", strings.NewReader("# CONFIG_AUDIT is not set\n"+tc.line+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = verifyDefined("testdata/tree", "x86_64", frag.Requirements)
		var pe *PolicyError
		if !errors.As(err, &pe) || len(pe.Violations) != 1 {
			t.Fatalf("%s: err = %v, want one violation", tc.line, err)
		}
		v := pe.Violations[0]
		want := "unknown symbol: typo.config:2 names CONFIG_" + tc.sym + ", which no Kconfig file of this tree defines"
		if v.Kind != Unknown || v.Symbol != tc.sym || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", tc.line, err, want)
		}
	}
}

// TestCheckDefinedOnlyOff: a required value on an undefined symbol is not
// an "absent" pass; Check reports it missing.
func TestCheckDefinedOnlyOff(t *testing.T) {
	reqs := []Requirement{{Symbol: "MITIGATION_RETPOLINE", Value: "y"}, {Symbol: "NOPE", Value: "y"}}
	absent, vs := CheckDefined(reqs, func(string) bool { return false }, OtherTrees)
	if len(absent) != 0 || len(vs) != 0 {
		t.Errorf("absent %v, violations %v; want none (Check's job)", absent, vs)
	}
	if vs := Check(reqs, NewConfig()); len(vs) != 2 {
		t.Errorf("Check: %v, want both missing", vs)
	}
}

// A value requirement on an undefined symbol does not end the pass: the
// "off" requirement after it is still sorted out.
func TestCheckDefinedGoesOn(t *testing.T) {
	reqs := []Requirement{
		{Symbol: "GONE", Value: "y", Fragment: "base.config"},
		{Symbol: "TYPO_NOT_ANYWHERE", Value: NotSet, Fragment: "policy.config"},
	}
	absent, vs := CheckDefined(reqs, func(string) bool { return false }, map[string]string{})
	if len(absent) != 0 || len(vs) != 1 || vs[0].Symbol != "TYPO_NOT_ANYWHERE" || vs[0].Kind != Unknown {
		t.Errorf("absent %v, violations %v; want one Unknown for TYPO_NOT_ANYWHERE", absent, vs)
	}
}
