package image

import (
	"errors"
	"testing"

	kernelconfig "github.com/hotpath-dev/hotpath/kernel-config"
)

// TestCheckConfigRefusesMitigationParams: what the Packer builder validates
// a template with refuses a mitigation parameter, as Build does.
func TestCheckConfigRefusesMitigationParams(t *testing.T) {
	for _, cmdline := range []string{"spectre_v2=on", `quiet "mitigations=auto"`} {
		var ce *kernelconfig.CmdlineError
		if _, err := CheckConfig(nil, cmdline); !errors.As(err, &ce) {
			t.Errorf("CheckConfig(%q) = %v, want a CmdlineError", cmdline, err)
		}
	}
	if _, err := CheckConfig(nil, "hotpath.workload.port=9000 quiet"); err != nil {
		t.Errorf("a harmless command line: %v", err)
	}
}
