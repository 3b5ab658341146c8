package rollout

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/hashicorp/packer-plugin-sdk/multistep"
)

// stepBootModes runs before any change: for each target it reads the
// AMI's boot mode and the instance type of the launch template version the
// new version is copied from, and refuses the roll-out when that type
// cannot boot the AMI (a uefi AMI on a .metal size, a legacy-bios AMI on
// Graviton): the new instances would fail to launch and the refresh would
// stall. A version that names no instance type (the group chooses, e.g. a
// mixed instances policy) is not checked.
type stepBootModes struct{}

func (s *stepBootModes) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	c, ui, cl := bag(state)
	amis := state.Get(keyAMIs).(map[string]string)
	for _, t := range c.Targets {
		msg, err := checkBootMode(ctx, cl.ec2(t.Region), t, amis[t.Region])
		if err != nil {
			return halt(ctx, state, fmt.Errorf("launch template %s in %s: %w; nothing was changed", t.name(), t.Region, err))
		}
		if msg != "" {
			ui.Say(msg)
		}
	}
	return multistep.ActionContinue
}

func (s *stepBootModes) Cleanup(multistep.StateBag) {}

// checkBootMode checks one target; it returns what it found to say.
func checkBootMode(ctx context.Context, e *ec2.Client, t Target, amiID string) (string, error) {
	im, err := e.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{amiID}})
	if err != nil {
		return "", fmt.Errorf("describe %s: %w", amiID, err)
	}
	if len(im.Images) != 1 {
		return "", fmt.Errorf("AMI %s not found", amiID)
	}
	mode := string(im.Images[0].BootMode)
	vs, err := e.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{
		LaunchTemplateId: nilIfEmpty(t.LaunchTemplateID), LaunchTemplateName: nilIfEmpty(t.LaunchTemplateName),
		Versions: []string{t.SourceVersion},
	})
	if err != nil {
		return "", err
	}
	if len(vs.LaunchTemplateVersions) != 1 || vs.LaunchTemplateVersions[0].LaunchTemplateData == nil {
		return "", fmt.Errorf("no version %s", t.SourceVersion)
	}
	itype := string(vs.LaunchTemplateVersions[0].LaunchTemplateData.InstanceType)
	if itype == "" {
		return "", nil
	}
	it, err := e.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(itype)}})
	if err != nil {
		return "", fmt.Errorf("instance type %s: %w", itype, err)
	}
	if len(it.InstanceTypes) != 1 {
		return "", fmt.Errorf("instance type %s not found", itype)
	}
	var supported []string
	for _, m := range it.InstanceTypes[0].SupportedBootModes {
		supported = append(supported, string(m))
	}
	if !bootsWith(supported, mode) {
		return "", fmt.Errorf("version %s launches %s, which boots only %v, and AMI %s is registered boot mode %q: "+
			"its instances would not boot (register the AMI uefi-preferred, the default for a disk that boots both ways, "+
			"or choose an instance type that boots %s)", t.SourceVersion, itype, supported, amiID, mode, mode)
	}
	return fmt.Sprintf("Launch template %s in %s: %s boots %v, AMI %s is %s: compatible", t.name(), t.Region, itype, supported, amiID, mode), nil
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
