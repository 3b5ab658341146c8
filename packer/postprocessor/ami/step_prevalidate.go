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
		if len(ids) > 0 && !c.ForceDeregister {
			return halt(ctx, state, fmt.Errorf("ami_name %q is already used by %s in %s: choose another name or set force_deregister", c.AMIName, ids[0], r))
		}
		for _, id := range ids {
			if err := forceDeregister(ctx, cl.ec2(r), id, c.ForceDeleteSnapshot); err != nil {
				return halt(ctx, state, fmt.Errorf("force_deregister %s in %s: %w", id, r, err))
			}
			what := "Deregistered"
			if c.ForceDeleteSnapshot {
				what = "Deregistered (and deleted the snapshots of)"
			}
			ui.Say(fmt.Sprintf("%s %s in %s, which had the name %q (force_deregister)", what, id, r, c.AMIName))
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

// forceDeregister deregisters an existing AMI and, with snapshots, deletes
// the EBS snapshots it referred to.
func forceDeregister(ctx context.Context, client *ec2.Client, id string, snapshots bool) error {
	out, err := client.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{id}})
	if err != nil {
		return err
	}
	var snaps []string
	for _, im := range out.Images {
		snaps = append(snaps, ebsSnapshots(im)...)
	}
	if _, err := client.DeregisterImage(ctx, &ec2.DeregisterImageInput{ImageId: aws.String(id)}); err != nil {
		return err
	}
	if !snapshots {
		return nil
	}
	for _, sn := range snaps {
		if _, err := client.DeleteSnapshot(ctx, &ec2.DeleteSnapshotInput{SnapshotId: aws.String(sn)}); err != nil && !notFound(err) {
			return fmt.Errorf("delete snapshot %s: %w", sn, err)
		}
	}
	return nil
}

// ebsSnapshots returns the EBS snapshots an AMI's block device mappings
// name, in their order. An instance-store mapping (VirtualName, Ebs nil)
// and an EBS mapping without a snapshot (an empty volume) name none: an
// AMI of the same name made by another tool may have either.
func ebsSnapshots(im types.Image) []string {
	var snaps []string
	for _, m := range im.BlockDeviceMappings {
		if m.Ebs != nil && m.Ebs.SnapshotId != nil {
			snaps = append(snaps, *m.Ebs.SnapshotId)
		}
	}
	return snaps
}
