package ami

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/hashicorp/packer-plugin-sdk/multistep"
)

// stepPreValidate looks for an AMI of ours called ami_name in every
// target region before anything is uploaded: RegisterImage and CopyImage
// refuse a duplicate name, and finding out there costs the whole upload.
type stepPreValidate struct{}

func (s *stepPreValidate) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	c, ui, cl := bag(state)
	for _, r := range append([]string{c.RawRegion}, c.AMIRegions...) {
		ids, err := imagesNamed(ctx, cl.ec2(r), c.AMIName)
		if err != nil {
			return halt(ctx, state, fmt.Errorf("look for AMIs named %q in %s: %w", c.AMIName, r, err))
		}
		if len(ids) > 0 {
			return halt(ctx, state, fmt.Errorf("ami_name %q is already used by %s in %s: choose another name", c.AMIName, ids[0], r))
		}
	}
	ui.Say(fmt.Sprintf("AMI name %q is free in %d region(s)", c.AMIName, 1+len(c.AMIRegions)))
	return multistep.ActionContinue
}

func (s *stepPreValidate) Cleanup(multistep.StateBag) {}

// imagesNamed returns the ids of this account's AMIs called name.
func imagesNamed(ctx context.Context, client *ec2.Client, name string) ([]string, error) {
	out, err := client.DescribeImages(ctx, &ec2.DescribeImagesInput{
		Owners:  []string{"self"},
		Filters: []types.Filter{{Name: aws.String("name"), Values: []string{name}}},
	})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, im := range out.Images {
		ids = append(ids, aws.ToString(im.ImageId))
	}
	return ids, nil
}
