package image

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckCPUs(t *testing.T) {
	for _, tc := range []struct {
		cpus, cmdline string
		nr            int
		err           string
	}{
		{"all", "", 64, ""},
		{"0-3", "", 0, ""},
		{"0-63", "", 64, ""},
		{"0-64", "", 64, "cpu 64 does not exist on any machine"},
		{"64,0-3", "", 64, "cpu 64 does not exist on any machine"}, // in workload order, not sorted
		{"0-7", "hotpath.x=1 maxcpus=4", 0, "never online with maxcpus=4"},
		{"0-3", "nr_cpus=4", 256, ""},
		{"2,9", "nr_cpus=8", 256, "cpu 9 is never online with nr_cpus=8"},
	} {
		err := checkCPUs(tc.cpus, tc.cmdline, tc.nr)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("checkCPUs(%q, %q, %d) = %v, want %q", tc.cpus, tc.cmdline, tc.nr, err, tc.err)
		}
	}
}

func TestKernelNRCPUs(t *testing.T) {
	p := filepath.Join(t.TempDir(), ".config")
	os.WriteFile(p, []byte("CONFIG_SMP=y\nCONFIG_NR_CPUS=256\n# CONFIG_X is not set\n"), 0o644)
	if n, err := kernelNRCPUs(p); n != 256 || err != nil {
		t.Errorf("kernelNRCPUs = %d, %v", n, err)
	}
	// The project's own fragment, which the build merges.
	if n, err := kernelNRCPUs("../kernel-config/fragments/base.config"); err != nil || n < 64 {
		t.Errorf("base.config NR_CPUS %d, %v", n, err)
	}
}
