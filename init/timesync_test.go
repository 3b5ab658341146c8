package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/report"
)

// TestTimeSyncOutsideEC2: by default a boot whose DMI is not EC2's asks
// no time server and logs no time-sync failure; off is off anywhere.
func TestTimeSyncOutsideEC2(t *testing.T) {
	for _, tc := range []struct {
		ntp, vendor, reason string
	}{
		{"auto", "QEMU", "time.ntp=auto and not EC2"},
		{"off", "Amazon EC2", "time.ntp=off"},
	} {
		t.Run(tc.ntp, func(t *testing.T) {
			m, out := testMachine(t, fakeSys(t, "0-1", "0-1"), map[string]string{"time.ntp": tc.ntp})
			m.inst = newInstance(nil)
			m.inst.root = t.TempDir()
			dmi := filepath.Join(m.inst.root, "sys/class/dmi/id")
			os.MkdirAll(dmi, 0o755)
			os.WriteFile(filepath.Join(dmi, "sys_vendor"), []byte(tc.vendor+"\n"), 0o644)
			var r report.Step
			for _, s := range timeSyncSteps(m) {
				r = m.run(s)
			}
			if r.Status != report.Skipped || !strings.Contains(r.Reason, tc.reason) {
				t.Errorf("time-sync: %+v, want skipped with %q", r, tc.reason)
			}
			if m.inst.sync != nil {
				t.Error("a syncer was started")
			}
			// The step's own line, skipped, is the only mention.
			for _, l := range strings.Split(out.String(), "\n") {
				if strings.Contains(l, "time-sync") && !strings.Contains(l, "step time-sync: skipped: ") {
					t.Errorf("time-sync logged %q", l)
				}
			}
		})
	}
}
