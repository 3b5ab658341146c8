package rollout

import (
	"context"
	"strings"
	"testing"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hotpath-dev/hotpath/packer/internal/uitest"
)

// TestRolloutRefusesIrreversibleGroup: with auto_rollback on, a group
// that Auto Scaling could not roll back — on $Default, or on a version
// whose ImageId is resolve:ssm: — stops the roll-out before anything
// changes, with a message naming the way on; rolled once with
// auto_rollback = false, the group runs the roll-out's numbered version
// (an AMI id) and the next roll, with auto_rollback, goes through.
func TestRolloutRefusesIrreversibleGroup(t *testing.T) {
	for _, tc := range []struct {
		name, image, version string
		says                 []string
	}{
		{"group on $Default", "", "$Default", []string{"Auto Scaling group web-a in eu-west-1 uses the $Default version of its launch template",
			"auto_rollback = false", "set the group's launch template version to a number", "nothing was changed"}},
		{"launch template uses an SSM parameter", "resolve:ssm:" + param, "1", []string{
			"Auto Scaling group web-a in eu-west-1 runs launch template", "whose ImageId is resolve:ssm:" + param,
			"auto_rollback = false", "redeploy the fleet from deploy/fleet.yaml", "nothing was changed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fl := newFleet(t)
			img := fl.old
			if tc.image != "" {
				img = tc.image
			}
			lt := fl.f.AddLaunchTemplate("eu-west-1", "other", img)
			fl.f.AddGroup("eu-west-1", "web-a", lt, tc.version, 4) // replaces newFleet's web-a
			targets := []map[string]interface{}{{"launch_template_id": lt, "set_default_version": true, "auto_scaling_groups": []string{"web-a"}}}
			ui := new(uitest.UI)
			_, _, _, err := fl.pp(t, map[string]interface{}{"target": targets}).PostProcess(context.Background(), ui, fl.input())
			if err == nil {
				t.Fatal("the roll-out went ahead")
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not say %q: %v", s, err)
				}
			}
			if pm, _ := fl.f.Parameter("eu-west-1", param); pm.Value != fl.old || len(pm.History) != 1 {
				t.Errorf("parameter changed: %+v", pm)
			}
			if n := len(fl.f.LaunchTemplates()[lt].Images); n != 1 {
				t.Errorf("%d launch template versions, want 1", n)
			}
			if n := fl.f.CountCalls("StartInstanceRefresh", 0); n != 0 {
				t.Errorf("%d StartInstanceRefresh calls", n)
			}

			// The way on: once without auto rollback, then with it.
			if _, _, _, err := fl.pp(t, map[string]interface{}{"target": targets, "auto_rollback": false}).PostProcess(context.Background(), ui, fl.input()); err != nil {
				t.Fatalf("without auto_rollback: %v", err)
			}
			if g := fl.f.GroupState("eu-west-1", "web-a"); g.Version != "2" {
				t.Fatalf("the group runs version %s after the roll, want 2", g.Version)
			}
			newer := fl.f.AddImage("eu-west-1", "hotpath 3")
			in := &packersdk.MockArtifact{BuilderIdValue: "hotpath.post-processor.ami", IdValue: "eu-west-1:" + newer}
			if _, _, _, err := fl.pp(t, map[string]interface{}{"target": targets}).PostProcess(context.Background(), ui, in); err != nil {
				t.Fatalf("the next roll, with auto_rollback: %v", err)
			}
			if g := fl.f.GroupState("eu-west-1", "web-a"); g.Version != "3" || !g.Refreshes[1].AutoRollback || g.Refreshes[1].Status != "Successful" {
				t.Errorf("after the next roll: %+v", g)
			}
		})
	}
}
