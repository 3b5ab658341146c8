package rollout

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/hashicorp/packer-plugin-sdk/multistep"
)

// ssmAlias starts a launch template ImageId that names a Systems Manager
// parameter instead of an AMI (resolve:ssm:<name>), resolved by EC2 at
// each launch.
const ssmAlias = "resolve:ssm:"

// stepRollbackable runs before any change when auto_rollback is on: Auto
// Scaling refuses StartInstanceRefresh with AutoRollback when the group's
// current configuration could not be gone back to (Auto Scaling API
// Reference, RefreshPreferences.AutoRollback): a group on its launch
// template's $Latest or $Default version, or on a version whose ImageId
// is a Systems Manager parameter. Found at StartInstanceRefresh, that
// refusal would come after the parameter and the default version had
// moved; found here, nothing has changed yet, and the message says the
// two ways on. (The third case, no desired configuration, cannot happen:
// the rollout always names the new version.)
type stepRollbackable struct{}

func (s *stepRollbackable) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	c, _, cl := bag(state)
	if !*c.AutoRollback {
		return multistep.ActionContinue
	}
	for _, t := range c.Targets {
		if err := checkRollbackable(ctx, cl, t); err != nil {
			return halt(ctx, state, fmt.Errorf("%w; nothing was changed", err))
		}
	}
	return multistep.ActionContinue
}

func (s *stepRollbackable) Cleanup(multistep.StateBag) {}

// checkRollbackable reads each of the target's groups and the launch
// template version it runs, and says why auto rollback would be refused.
func checkRollbackable(ctx context.Context, cl *clients, t Target) error {
	if len(t.AutoScalingGroups) == 0 {
		return nil
	}
	as, e := cl.autoscaling(t.Region), cl.ec2(t.Region)
	for names := range slices.Chunk(t.AutoScalingGroups, 50) {
		pages := autoscaling.NewDescribeAutoScalingGroupsPaginator(as, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: names})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return fmt.Errorf("describe the Auto Scaling groups %v in %s: %w", names, t.Region, err)
			}
			for _, g := range page.AutoScalingGroups {
				if err := groupRollbackable(ctx, e, g, t.Region); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// groupRollbackable checks one group's launch template and version.
func groupRollbackable(ctx context.Context, e *ec2.Client, g astypes.AutoScalingGroup, region string) error {
	spec := g.LaunchTemplate
	if spec == nil && g.MixedInstancesPolicy != nil && g.MixedInstancesPolicy.LaunchTemplate != nil {
		spec = g.MixedInstancesPolicy.LaunchTemplate.LaunchTemplateSpecification
	}
	if spec == nil {
		return nil // a launch configuration: not one of the documented cases
	}
	name := aws.ToString(g.AutoScalingGroupName)
	ways := "either roll this once with auto_rollback = false (a failed refresh is then cancelled, not rolled back, " +
		"and the group is left mixed), after which the group runs the rollout's numbered version, whose ImageId is an AMI id, " +
		"and later rolls can roll back; or "
	switch v := aws.ToString(spec.Version); v {
	case "", "$Default", "$Latest":
		v = cmp.Or(v, "$Default") // none given: the default version
		return fmt.Errorf("Auto Scaling group %s in %s uses the %s version of its launch template: Auto Scaling rolls back "+
			"only to a numbered version and refuses auto_rollback for it (RefreshPreferences.AutoRollback); %sset the group's "+
			"launch template version to a number", name, region, v, ways)
	}
	in := &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: spec.LaunchTemplateId, Versions: []string{aws.ToString(spec.Version)}}
	if in.LaunchTemplateId == nil {
		in.LaunchTemplateName = spec.LaunchTemplateName
	}
	out, err := e.DescribeLaunchTemplateVersions(ctx, in)
	if err != nil {
		return fmt.Errorf("launch template version %s of Auto Scaling group %s in %s: %w", aws.ToString(spec.Version), name, region, err)
	}
	for _, v := range out.LaunchTemplateVersions {
		if img := aws.ToString(v.LaunchTemplateData.ImageId); strings.HasPrefix(img, ssmAlias) {
			return fmt.Errorf("Auto Scaling group %s in %s runs launch template %s version %d, whose ImageId is %s: Auto Scaling "+
				"cannot roll back to a launch template that takes its AMI from a Systems Manager parameter and refuses "+
				"auto_rollback for it (RefreshPreferences.AutoRollback); %sredeploy the fleet from deploy/fleet.yaml, which "+
				"resolves the parameter into an AMI id when the stack is deployed",
				name, region, aws.ToString(v.LaunchTemplateId), aws.ToInt64(v.VersionNumber), img, ways)
		}
	}
	return nil
}
