package rollout

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/hotpath-dev/hotpath/packer/internal/fakeaws"
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
			fl.unchanged(t)
		})
	}
}

// unchanged checks that a refused roll-out changed nothing: no new
// version, the parameter and the groups as they were.
func (fl *fleet) unchanged(t *testing.T) {
	t.Helper()
	if lt := fl.f.LaunchTemplates()[fl.lt]; len(lt.Images) != 1 || lt.Default != 1 {
		t.Errorf("launch template changed: %+v", lt)
	}
	if pm, _ := fl.f.Parameter("eu-west-1", param); pm.Value != fl.old {
		t.Errorf("parameter %s = %s, want the old AMI", param, pm.Value)
	}
	for _, g := range []string{"web-a", "web-b"} {
		if g := fl.f.GroupState("eu-west-1", g); len(g.Refreshes) != 0 {
			t.Errorf("a refresh of %s was started: %+v", g.Name, g.Refreshes)
		}
	}
}

// A group with a mixed instances policy launches the types its overrides
// name, whatever the launch template says: the roll-out refuses, before
// any change, a policy that lists one type the AMI's boot mode cannot
// boot, naming the group, the type and both boot modes. An override with
// a launch template of its own (another AMI) is not this roll-out's; one
// that chooses types by attributes passes only a uefi-preferred AMI.
func TestRolloutMixedInstances(t *testing.T) {
	metal := func(other string) fakeaws.Override {
		return fakeaws.Override{InstanceType: "c5n.metal", TemplateID: other}
	}
	reqs := func(bare string) fakeaws.Override {
		return fakeaws.Override{Requirements: &fakeaws.InstanceRequirements{VCPUMin: 4, MemoryMiBMin: 8192, BareMetal: bare}}
	}
	virt := fakeaws.Override{InstanceType: "c6in.xlarge"}
	for _, tc := range []struct {
		name      string
		mode      string
		overrides func(otherLT string) []fakeaws.Override
		want      []string // in the refusal; none: the roll-out succeeds
	}{
		{"metal in the overrides", "uefi", func(string) []fakeaws.Override { return []fakeaws.Override{virt, metal("")} },
			[]string{"group web-b's mixed instances policy (override 2) launches c5n.metal", "boots only [legacy-bios]", `boot mode "uefi"`}},
		{"metal, uefi-preferred", "uefi-preferred", func(string) []fakeaws.Override { return []fakeaws.Override{virt, metal("")} }, nil},
		{"virtualized only", "uefi", func(string) []fakeaws.Override { return []fakeaws.Override{virt, {InstanceType: "c7i.xlarge"}} }, nil},
		{"graviton, legacy-bios", "legacy-bios", func(string) []fakeaws.Override { return []fakeaws.Override{{InstanceType: "c7gn.xlarge"}} },
			[]string{"launches c7gn.xlarge", "boots only [uefi]", `boot mode "legacy-bios"`}},
		{"metal of another template", "uefi", func(o string) []fakeaws.Override { return []fakeaws.Override{virt, metal(o)} }, nil},
		{"metal after another template's", "uefi", func(o string) []fakeaws.Override { return []fakeaws.Override{metal(o), metal("")} },
			[]string{"(override 2) launches c5n.metal"}},
		{"metal of this template, named", "uefi", func(string) []fakeaws.Override { return []fakeaws.Override{metal("this")} },
			[]string{"launches c5n.metal"}},
		{"attributes, uefi", "uefi", func(string) []fakeaws.Override { return []fakeaws.Override{reqs("excluded")} },
			[]string{"web-b", "InstanceRequirements", "uefi-preferred"}},
		{"attributes, legacy-bios", "legacy-bios", func(string) []fakeaws.Override { return []fakeaws.Override{reqs("")} },
			[]string{"InstanceRequirements"}},
		{"attributes, uefi-preferred", "uefi-preferred", func(string) []fakeaws.Override { return []fakeaws.Override{reqs("included")} }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fl := newFleet(t)
			fl.f.SetImageBootMode(fl.new, tc.mode)
			other := fl.f.AddLaunchTemplate("eu-west-1", "hotpath-metal", fl.old)
			ov := tc.overrides(other)
			for i := range ov {
				if ov[i].TemplateID == "this" {
					ov[i].TemplateID = fl.lt
				}
			}
			fl.f.SetMixedInstancesPolicy("eu-west-1", "web-b", fakeaws.MixedInstancesPolicy{Overrides: ov})
			ui := new(uitest.UI)
			_, _, _, err := fl.pp(t, nil).PostProcess(context.Background(), ui, fl.input())
			if tc.want == nil {
				if err != nil {
					t.Fatalf("%v\n%s", err, ui.Text())
				}
				if g := fl.f.GroupState("eu-west-1", "web-b"); len(g.Refreshes) != 1 {
					t.Errorf("group web-b: %d refreshes, want 1", len(g.Refreshes))
				}
				return
			}
			if err == nil {
				t.Fatalf("the roll-out succeeded, want a refusal\n%s", ui.Text())
			}
			for _, w := range append(tc.want, "nothing was changed") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			fl.unchanged(t)
		})
	}
}

// A target group that does not exist is refused before any change, not
// when its refresh would start after the parameter and the template moved.
func TestRolloutGroupNotFound(t *testing.T) {
	fl := newFleet(t)
	_, _, _, err := fl.pp(t, map[string]interface{}{"target": []map[string]interface{}{{
		"launch_template_name": "hotpath", "set_default_version": true, "auto_scaling_groups": []string{"web-a", "web-c"},
	}}}).PostProcess(context.Background(), new(uitest.UI), fl.input())
	if err == nil || !strings.Contains(err.Error(), "Auto Scaling group web-c not found") || !strings.HasSuffix(err.Error(), "; nothing was changed") {
		t.Fatalf("error %v, want web-c not found", err)
	}
	fl.unchanged(t)
}

// More than 50 target groups are described 50 at a time (the API's
// limit, which the fake enforces), and each is found.
func TestRolloutManyGroups(t *testing.T) {
	fl := newFleet(t)
	groups := []string{"web-a", "web-b"}
	for i := range 53 {
		g := fmt.Sprintf("web-%02d", i)
		fl.f.AddGroup("eu-west-1", g, fl.lt, "1", 1)
		groups = append(groups, g)
	}
	fl.f.SetMixedInstancesPolicy("eu-west-1", "web-52", fakeaws.MixedInstancesPolicy{Overrides: []fakeaws.Override{{InstanceType: "c5n.metal"}}})
	fl.f.SetImageBootMode(fl.new, "uefi")
	_, _, _, err := fl.pp(t, map[string]interface{}{"target": []map[string]interface{}{{
		"launch_template_name": "hotpath", "auto_scaling_groups": groups,
	}}}).PostProcess(context.Background(), new(uitest.UI), fl.input())
	if err == nil || !strings.Contains(err.Error(), "group web-52's mixed instances policy (override 1) launches c5n.metal") {
		t.Fatalf("error %v, want web-52 (in the second call) refused", err)
	}
	fl.unchanged(t)
}

// TestSameTemplate: an override's launch template is the target's when
// its id matches, or, given by name only, its name does.
func TestSameTemplate(t *testing.T) {
	v := &ec2types.LaunchTemplateVersion{LaunchTemplateId: aws.String("lt-0a"), LaunchTemplateName: aws.String("hotpath")}
	for _, tc := range []struct {
		id, name string
		want     bool
	}{
		{"lt-0a", "", true},
		{"lt-0b", "hotpath", false}, // the id decides
		{"", "hotpath", true},
		{"", "hotpath-metal", false},
	} {
		s := &astypes.LaunchTemplateSpecification{LaunchTemplateId: nilIfEmpty(tc.id), LaunchTemplateName: nilIfEmpty(tc.name)}
		if got := sameTemplate(s, v); got != tc.want {
			t.Errorf("override's template id %q name %q: same %v, want %v", tc.id, tc.name, got, tc.want)
		}
	}
}

// TestBootsWith: a uefi or legacy-bios AMI needs a type that boots that
// mode; a uefi-preferred AMI, or one without a boot mode, boots on any
// type that boots at all.
func TestBootsWith(t *testing.T) {
	for _, tc := range []struct {
		supported []string
		ami       string
		want      bool
	}{
		{[]string{"legacy-bios"}, "uefi", false},
		{[]string{"legacy-bios", "uefi"}, "uefi", true},
		{[]string{"uefi"}, "legacy-bios", false},
		{[]string{"legacy-bios"}, "uefi-preferred", true},
		{[]string{"uefi"}, "", true},
		{nil, "uefi-preferred", false},
		{nil, "", false},
	} {
		if got := bootsWith(tc.supported, tc.ami); got != tc.want {
			t.Errorf("type booting %v, AMI %q: %v, want %v", tc.supported, tc.ami, got, tc.want)
		}
	}
}
