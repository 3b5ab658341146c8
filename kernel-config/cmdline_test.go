package kernelconfig

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestRefusedParamsCoverage pins the parameters the list must hold: the
// ones mitigations=off stands for in Linux 6.1 and the ones that override
// it. Trimming the list fails here.
func TestRefusedParamsCoverage(t *testing.T) {
	for _, name := range []string{
		"mitigations", "spectre_v2", "spectre_v2_user", "spectre_bhi", "nospectre_v1", "nospectre_v2",
		"pti", "nopti", "mds", "tsx_async_abort", "mmio_stale_data", "retbleed", "srbds", "l1tf",
		"spec_store_bypass_disable", "nospec_store_bypass_disable", "gather_data_sampling",
		"reg_file_data_sampling", "spec_rstack_overflow", "indirect_target_selection", "tsa", "vmscape",
		"tsx", "l1d_flush", "nosmt", "kpti", "ssbd", "nospectre_bhb",
	} {
		if !slices.Contains(RefusedParams, name) {
			t.Errorf("%s missing from cmdline-refused.txt", name)
		}
	}
}

// TestCheckExtraCmdlineRefusesEveryParam tries every listed parameter, bare
// and with a value, with '-' for '_', alone and among harmless words.
func TestCheckExtraCmdlineRefusesEveryParam(t *testing.T) {
	if len(RefusedParams) < 20 {
		t.Fatalf("only %d refused parameters parsed", len(RefusedParams))
	}
	for _, name := range RefusedParams {
		for _, word := range []string{name, name + "=on", name + "=off", strings.ReplaceAll(name, "_", "-") + "=auto"} {
			line := "hotpath.workload.port=9000 " + word + " quiet"
			err := CheckExtraCmdline(line)
			var ce *CmdlineError
			if !errors.As(err, &ce) {
				t.Errorf("CheckExtraCmdline(%q) = %v, want a CmdlineError", line, err)
				continue
			}
			if !slices.Equal(ce.Words, []string{word}) {
				t.Errorf("CheckExtraCmdline(%q) names %q, want only %q", line, ce.Words, word)
			}
			if !strings.Contains(err.Error(), word) || !strings.Contains(err.Error(), "mitigations=off") {
				t.Errorf("error %q does not name %q and the policy", err, word)
			}
		}
	}
}

func TestCheckExtraCmdlineAccepts(t *testing.T) {
	for _, line := range []string{
		"",
		"hotpath.workload.port=9000 hotpath.nic.gro=on",
		"quiet loglevel=3 panic=30",
		// Names that merely start like a refused one.
		"ptiX=1 mdsfoo tsx_foo=1 nosmtx",
	} {
		if err := CheckExtraCmdline(line); err != nil {
			t.Errorf("CheckExtraCmdline(%q) = %v", line, err)
		}
	}
}

func TestCheckCmdline(t *testing.T) {
	const policy = "console=ttyS0 mitigations=off panic=10"
	for _, tc := range []struct {
		final string
		want  string // "" = holds
	}{
		{policy, ""},
		{policy + " hotpath.workload.port=9000", ""},
		{"  console=ttyS0   mitigations=off panic=10 quiet", ""},
		{policy + " mitigations=auto", "mitigations=auto would override"},
		{policy + " quiet spectre_v2=on mds=full", "spectre_v2=on, mds=full would override"},
		{"console=ttyS0 panic=10", "does not start with the policy's"},
		{"mitigations=off console=ttyS0 panic=10", "does not start with the policy's"},
		{"console=ttyS0 mitigations=auto panic=10", "does not start with the policy's"},
		{"", "does not start with the policy's"},
	} {
		err := CheckCmdline(policy, tc.final)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckCmdline(%q) = %v, want nil", tc.final, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckCmdline(%q) = %v, want %q", tc.final, err, tc.want)
		}
	}
}

// TestCheckCmdlineRequirement: the policy's CMDLINE holds for a final line
// that appends to it and fails, naming the word, for one that overrides it.
func TestCheckCmdlineRequirement(t *testing.T) {
	reqs := []Requirement{{Symbol: "CMDLINE", Value: Quote("console=ttyS0 mitigations=off"), Fragment: "policy.config", Line: 9}}
	for _, tc := range []struct {
		final string
		want  string
	}{
		{"console=ttyS0 mitigations=off hotpath.x=1", ""},
		{"console=ttyS0 mitigations=off mitigations=auto", "command line overridden: policy.config:9 requires CONFIG_CMDLINE=\"console=ttyS0 mitigations=off\": kernel command line \"mitigations=auto\": mitigations=auto would override"},
		{"console=ttyS0", "does not start with"},
	} {
		cfg := NewConfig()
		cfg.Set("CMDLINE", Quote(tc.final))
		vs := Check(reqs, cfg)
		if tc.want == "" {
			if len(vs) != 0 {
				t.Errorf("%q: %v", tc.final, vs)
			}
			continue
		}
		if len(vs) != 1 || vs[0].Kind != Overridden || !strings.Contains(vs[0].Error(), tc.want) {
			t.Errorf("%q: violations %v, want one %q", tc.final, vs, tc.want)
		}
	}
}

// TestCheckExtraCmdlineQuoted: Linux strips double quotes from parameters,
// so a quoted mitigation parameter is refused like a bare one.
func TestCheckExtraCmdlineQuoted(t *testing.T) {
	for _, line := range []string{`"spectre_v2=on"`, `spectre_v2="on"`, `quiet "mitigations=auto" x`, `"pti"`} {
		var ce *CmdlineError
		if err := CheckExtraCmdline(line); !errors.As(err, &ce) {
			t.Errorf("CheckExtraCmdline(%q) = %v, want a CmdlineError", line, err)
		}
	}
	if err := CheckCmdline("console=ttyS0 mitigations=off", `console=ttyS0 mitigations=off "mitigations=auto"`); err == nil {
		t.Error(`a quoted "mitigations=auto" after the policy passed CheckCmdline`)
	}
}
