package rollout

import (
	"context"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/packer/internal/uitest"
)

// The roll-out checks, before any change, that the launch template's
// instance type boots the AMI's boot mode: a uefi AMI is refused for a
// .metal size (legacy BIOS only) and a legacy-bios AMI for Graviton;
// uefi-preferred goes everywhere an x86 type goes.
func TestRolloutBootModes(t *testing.T) {
	for _, tc := range []struct {
		itype, mode string
		ok          bool
	}{
		{"c5n.metal", "uefi", false},
		{"c7i.metal-48xl", "uefi", false},
		{"c5n.metal", "uefi-preferred", true},
		{"c5n.metal", "legacy-bios", true},
		{"c6in.xlarge", "uefi", true},
		{"c7gn.xlarge", "legacy-bios", false},
		{"c7gn.xlarge", "uefi", true},
		{"", "uefi", true}, // the version names no type: not checked
	} {
		t.Run(tc.itype+"/"+tc.mode, func(t *testing.T) {
			fl := newFleet(t)
			fl.f.SetImageBootMode(fl.new, tc.mode)
			if tc.itype != "" {
				fl.f.SetInstanceType(fl.lt, 1, tc.itype)
			}
			ui := new(uitest.UI)
			_, _, _, err := fl.pp(t, nil).PostProcess(context.Background(), ui, fl.input())
			if tc.ok {
				if err != nil {
					t.Fatalf("%v\n%s", err, ui.Text())
				}
				if lt := fl.f.LaunchTemplates()[fl.lt]; tc.itype != "" && lt.InstanceTypes[len(lt.InstanceTypes)-1] != tc.itype {
					t.Errorf("the new version launches %q, not the source's %s", lt.InstanceTypes[len(lt.InstanceTypes)-1], tc.itype)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.itype) || !strings.Contains(err.Error(), "nothing was changed") {
				t.Fatalf("error %v, want a refusal naming %s", err, tc.itype)
			}
			// Nothing changed: no new version, the parameter and the
			// groups as they were.
			if lt := fl.f.LaunchTemplates()[fl.lt]; len(lt.Images) != 1 || lt.Default != 1 {
				t.Errorf("launch template changed: %+v", lt)
			}
			if pm, _ := fl.f.Parameter("eu-west-1", param); pm.Value != fl.old {
				t.Errorf("parameter %s = %s, want the old AMI", param, pm.Value)
			}
			if g := fl.f.GroupState("eu-west-1", "web-a"); len(g.Refreshes) != 0 {
				t.Errorf("a refresh was started: %+v", g.Refreshes)
			}
		})
	}
}
