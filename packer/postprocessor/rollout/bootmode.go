package rollout

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/hashicorp/packer-plugin-sdk/multistep"
)

// stepBootModes runs before any change: for each target it reads the
// AMI's boot mode and every instance type the new version will launch as
// — the type of the launch template version it is copied from, and the
// types in the overrides of each target group's mixed instances policy —
// and refuses the roll-out when one of them cannot boot the AMI (a uefi
// AMI on a .metal size, a legacy-bios AMI on Graviton): those instances
// would fail to launch and the refresh would stall, or, in a mixed group,
// Auto Scaling would launch only the other types. A version that names no
// type and a group without overrides are not checked (the types come
// from elsewhere); for overrides that choose types by attributes see
// mixedLaunches.
type stepBootModes struct{}

func (s *stepBootModes) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	c, ui, cl := bag(state)
	amis := state.Get(keyAMIs).(map[string]string)
	for _, t := range c.Targets {
		msgs, err := checkBootModes(ctx, cl, t, amis[t.Region])
		if err != nil {
			return halt(ctx, state, fmt.Errorf("launch template %s in %s: %w; nothing was changed", t.name(), t.Region, err))
		}
		for _, m := range msgs {
			ui.Say(m)
		}
	}
	return multistep.ActionContinue
}

func (s *stepBootModes) Cleanup(multistep.StateBag) {}

// launch is one instance type the new version will be launched as, and
// what launches it (for the messages).
type launch struct {
	itype, by string
}

// checkBootModes checks one target; it returns what it found to say.
func checkBootModes(ctx context.Context, cl *clients, t Target, amiID string) ([]string, error) {
	e := cl.ec2(t.Region)
	mode, err := imageBootMode(ctx, e, amiID)
	if err != nil {
		return nil, err
	}
	v, err := sourceVersion(ctx, e, t)
	if err != nil {
		return nil, err
	}
	var launches []launch
	if it := string(v.LaunchTemplateData.InstanceType); it != "" {
		launches = append(launches, launch{it, "version " + t.SourceVersion})
	}
	gl, err := groupLaunches(ctx, cl.autoscaling(t.Region), t, v, mode, amiID)
	if err != nil {
		return nil, err
	}
	launches = append(launches, gl...)
	if len(launches) == 0 {
		return nil, nil
	}
	modes, err := typeBootModes(ctx, e, launches)
	if err != nil {
		return nil, err
	}
	var msgs []string
	for _, l := range launches {
		supported := modes[l.itype]
		if !bootsWith(supported, mode) {
			return nil, fmt.Errorf("%s launches %s, which boots only %v, and AMI %s is registered boot mode %q: "+
				"its instances would not boot (register the AMI uefi-preferred, the default for a disk that boots both ways, "+
				"or choose an instance type that boots %s)", l.by, l.itype, supported, amiID, mode, mode)
		}
		msgs = append(msgs, fmt.Sprintf("Launch template %s in %s: %s launches %s, which boots %v; AMI %s is %s: compatible",
			t.name(), t.Region, l.by, l.itype, supported, amiID, mode))
	}
	return msgs, nil
}

// imageBootMode is the AMI's registered boot mode ("" when it has none).
func imageBootMode(ctx context.Context, e *ec2.Client, amiID string) (string, error) {
	im, err := e.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{amiID}})
	if err != nil {
		return "", fmt.Errorf("describe %s: %w", amiID, err)
	}
	if len(im.Images) != 1 {
		return "", fmt.Errorf("AMI %s not found", amiID)
	}
	return string(im.Images[0].BootMode), nil
}

// sourceVersion is the launch template version the new one is copied from.
func sourceVersion(ctx context.Context, e *ec2.Client, t Target) (*ec2types.LaunchTemplateVersion, error) {
	vs, err := e.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{
		LaunchTemplateId: nilIfEmpty(t.LaunchTemplateID), LaunchTemplateName: nilIfEmpty(t.LaunchTemplateName),
		Versions: []string{t.SourceVersion},
	})
	if err != nil {
		return nil, err
	}
	if len(vs.LaunchTemplateVersions) != 1 || vs.LaunchTemplateVersions[0].LaunchTemplateData == nil {
		return nil, fmt.Errorf("no version %s", t.SourceVersion)
	}
	return &vs.LaunchTemplateVersions[0], nil
}

// groupLaunches reads the target's Auto Scaling groups and returns the
// instance types their mixed instances policies launch. A group that does
// not exist is refused here, before any change, rather than when its
// refresh would start after the parameter and the template have moved.
func groupLaunches(ctx context.Context, as *autoscaling.Client, t Target, v *ec2types.LaunchTemplateVersion, mode, amiID string) ([]launch, error) {
	if len(t.AutoScalingGroups) == 0 {
		return nil, nil
	}
	found := map[string]bool{}
	var out []launch
	// DescribeAutoScalingGroups takes up to 50 names a call.
	for names := range slices.Chunk(t.AutoScalingGroups, 50) {
		pages := autoscaling.NewDescribeAutoScalingGroupsPaginator(as, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: names})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describe the Auto Scaling groups %v: %w", names, err)
			}
			for _, g := range page.AutoScalingGroups {
				found[aws.ToString(g.AutoScalingGroupName)] = true
				l, err := mixedLaunches(g, v, mode, amiID)
				if err != nil {
					return nil, err
				}
				out = append(out, l...)
			}
		}
	}
	for _, g := range t.AutoScalingGroups {
		if !found[g] {
			return nil, fmt.Errorf("Auto Scaling group %s not found", g)
		}
	}
	return out, nil
}

// mixedLaunches returns the instance types a group's mixed instances
// policy overrides name (LaunchTemplate.Overrides[].InstanceType; they
// replace the launch template's own type). An override with a launch
// template of its own that is not the target's launches that template's
// AMI, which this roll-out does not change: it is left alone.
//
// An override may instead choose types by attributes (InstanceRequirements):
// EC2 resolves them to types at each launch, and the set changes as AWS
// adds types, so no check made now would hold. Every type boots a
// uefi-preferred AMI (and one without a boot mode), so those pass; a uefi
// or legacy-bios AMI is refused, because attributes select x86 bare-metal
// and accelerated sizes (P4, DL1, …: legacy BIOS only) unless the
// requirements exclude them, and even BareMetal "excluded" leaves the
// accelerated ones in. The message says to register uefi-preferred or to
// list the types.
func mixedLaunches(g astypes.AutoScalingGroup, v *ec2types.LaunchTemplateVersion, mode, amiID string) ([]launch, error) {
	mp := g.MixedInstancesPolicy
	if mp == nil || mp.LaunchTemplate == nil {
		return nil, nil
	}
	name := aws.ToString(g.AutoScalingGroupName)
	var out []launch
	for i, o := range mp.LaunchTemplate.Overrides {
		if s := o.LaunchTemplateSpecification; s != nil && !sameTemplate(s, v) {
			continue
		}
		by := fmt.Sprintf("group %s's mixed instances policy (override %d)", name, i+1)
		switch {
		case o.InstanceType != nil:
			out = append(out, launch{aws.ToString(o.InstanceType), by})
		case o.InstanceRequirements != nil && mode != "" && mode != "uefi-preferred":
			return nil, fmt.Errorf("%s chooses instance types by attributes (InstanceRequirements), which EC2 resolves at each launch "+
				"and may resolve to a type that cannot boot AMI %s, registered boot mode %q (x86 bare-metal and accelerated sizes boot only legacy-bios, "+
				"Graviton only uefi): register the AMI uefi-preferred, which every type boots, or list the instance types in the overrides", by, amiID, mode)
		}
	}
	return out, nil
}

// sameTemplate says whether an override's launch template is the one the
// version belongs to.
func sameTemplate(s *astypes.LaunchTemplateSpecification, v *ec2types.LaunchTemplateVersion) bool {
	if id := aws.ToString(s.LaunchTemplateId); id != "" {
		return id == aws.ToString(v.LaunchTemplateId)
	}
	return aws.ToString(s.LaunchTemplateName) == aws.ToString(v.LaunchTemplateName)
}

// typeBootModes asks EC2 for the supported boot modes of every type in
// launches, in one call.
func typeBootModes(ctx context.Context, e *ec2.Client, launches []launch) (map[string][]string, error) {
	var types []ec2types.InstanceType
	for _, l := range launches {
		if !slices.Contains(types, ec2types.InstanceType(l.itype)) {
			types = append(types, ec2types.InstanceType(l.itype))
		}
	}
	it, err := e.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: types})
	if err != nil {
		return nil, fmt.Errorf("instance types %v: %w", types, err)
	}
	modes := map[string][]string{}
	for _, info := range it.InstanceTypes {
		var supported []string
		for _, m := range info.SupportedBootModes {
			supported = append(supported, string(m))
		}
		modes[string(info.InstanceType)] = supported
	}
	for _, ty := range types {
		if _, ok := modes[string(ty)]; !ok {
			return nil, fmt.Errorf("instance type %s not found", ty)
		}
	}
	return modes, nil
}

// bootsWith says whether a type with the supported boot modes launches an
// AMI of boot mode ami. uefi-preferred takes either; an AMI without a boot
// mode boots the type's default, which every type has.
func bootsWith(supported []string, ami string) bool {
	if ami == "" || ami == "uefi-preferred" {
		return len(supported) > 0
	}
	return slices.Contains(supported, ami)
}
