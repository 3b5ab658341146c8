package e2e

import (
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/report"
)

// An arm64 guest with mitigations=off reports two "Mitigation" lines that
// no build or command line removes; they pass, and a real software
// mitigation on arm64 still fails.
func TestCheckPolicyArm64(t *testing.T) {
	facts := func(v map[string]string) *report.Facts {
		return &report.Facts{Vulnerabilities: v, Cmdline: "mitigations=off panic=10 panic_on_oops=1"}
	}
	clean := map[string]string{
		"spectre_v1":        "Mitigation: __user pointer sanitization",
		"spectre_v2":        "Mitigation: CSV2, but not BHB",
		"spec_store_bypass": "Vulnerable",
		"meltdown":          "Not affected",
		"retbleed":          "Not affected",
	}
	if errs := CheckPolicy(facts(clean)); len(errs) != 0 {
		t.Errorf("arm64 with mitigations=off: %v", errs)
	}
	for name, v := range map[string]string{
		"spectre_v2":        "Mitigation: CSV2, BHB",
		"meltdown":          "Mitigation: PTI",
		"spec_store_bypass": "Mitigation: Speculative Store Bypass disabled via prctl",
		"spectre_v1":        "Mitigation: usercopy/swapgs barriers and __user pointer sanitization",
	} {
		bad := map[string]string{}
		for k, v := range clean {
			bad[k] = v
		}
		bad[name] = v
		errs := CheckPolicy(facts(bad))
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), name) {
			t.Errorf("%s = %q: %v, want one violation", name, v, errs)
		}
	}
}
