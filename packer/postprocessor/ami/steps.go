package ami

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"github.com/hashicorp/packer-plugin-sdk/multistep"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hotpath-dev/hotpath/packer/ebsupload"
	"github.com/hotpath-dev/hotpath/packer/internal/eventual"
)

// State bag keys.
const (
	keyConfig     = "config"
	keyUI         = "ui"
	keyClients    = "clients"
	keyImagePath  = "image_path"
	keySnapshotID = "snapshot_id"
	keyAMIs       = "amis"      // map[region]ami id
	keySnapshots  = "snapshots" // map[region]snapshot id
	keyError      = "error"
	keyLeftovers  = "leftovers" // []string: what clean-up could not delete
	keyCooldown   = "cooldown"  // map[region]time: AMIs whose protection outlives the build (stepProtect)
)

// The root device of the AMI. /dev/xvda is what Amazon Linux uses; on
// Nitro the volume shows up as NVMe whatever the name, and the EFI
// firmware finds the ESP by its partition type, so the name only has to
// be consistent between RegisterImage and the mapping.
const rootDevice = "/dev/xvda"

// cleanupTimeout bounds each clean-up call: clean-up runs after a cancel,
// so it has its own context.
const cleanupTimeout = 2 * time.Minute

// errCancelled is the error of a cancelled run: a cancel surfaces in the
// steps as whatever error the interrupted call returned ("context
// canceled"), which is not what the user should read.
var errCancelled = errors.New("cancelled")

func halt(ctx context.Context, state multistep.StateBag, err error) multistep.StepAction {
	if ctx.Err() != nil {
		state.Put(keyError, errCancelled)
		state.Get(keyUI).(packersdk.Ui).Say("Cancelled; deleting what was created...")
		return multistep.ActionHalt
	}
	state.Put(keyError, err)
	state.Get(keyUI).(packersdk.Ui).Error(err.Error())
	return multistep.ActionHalt
}

// leftover records something a clean-up could not delete, for the final
// error message.
func leftover(state multistep.StateBag, what string) {
	l, _ := state.Get(keyLeftovers).([]string)
	state.Put(keyLeftovers, append(l, what))
}

func failed(state multistep.StateBag) bool {
	_, cancelled := state.GetOk(multistep.StateCancelled)
	_, halted := state.GetOk(multistep.StateHalted)
	return cancelled || halted
}

func bag(state multistep.StateBag) (*Config, packersdk.Ui, *clients) {
	return state.Get(keyConfig).(*Config), state.Get(keyUI).(packersdk.Ui), state.Get(keyClients).(*clients)
}

// stepUpload writes the disk image into a new snapshot with the EBS direct
// APIs and waits for the snapshot to complete.
type stepUpload struct {
	progressEvery time.Duration
}

func (s *stepUpload) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	c, ui, cl := bag(state)
	path := state.Get(keyImagePath).(string)
	fi, err := os.Stat(path)
	if err != nil {
		return halt(ctx, state, fmt.Errorf("disk image: %w", err))
	}
	vol := c.VolumeSize
	if vol == 0 {
		vol = ebsupload.RoundUpGiB(fi.Size())
	}
	enc := "unencrypted, holes and zero blocks skipped"
	if c.EncryptBoot {
		enc = "encrypted, every block written"
	}
	ui.Say(fmt.Sprintf("Uploading %s (%s) into a new %d GiB EBS snapshot in %s (%s, %d workers)...",
		path, mib(fi.Size()), vol, c.RawRegion, enc, c.UploadWorkers))

	pr := newProgress(ui, s.progressEvery)
	res, err := ebsupload.Upload(ctx, cl.ebs, ebsupload.Options{
		Path:          path,
		VolumeSizeGiB: c.VolumeSize,
		Description:   "hotpath " + c.AMIName,
		Tags:          c.SnapshotTags,
		Encrypted:     c.EncryptBoot,
		KMSKeyARN:     c.KMSKeyID,
		Timeout:       c.SnapshotTimeout,
		Workers:       c.UploadWorkers,
		Attempts:      c.UploadAttempts,
		Progress:      pr.update,
		OnStart: func(id string) {
			state.Put(keySnapshotID, id)
			state.Put(keySnapshots, map[string]string{c.RawRegion: id})
			ui.Say("Started snapshot " + id)
		},
	})
	if err != nil {
		return halt(ctx, state, fmt.Errorf("upload: %w", err))
	}
	pr.final()
	ui.Say(fmt.Sprintf("Snapshot %s: %d of %d blocks written (%d skipped), aggregate SHA-256 %s",
		res.SnapshotID, res.Sent, res.Blocks, res.Blocks-res.Sent, res.Checksum))

	ui.Say("Waiting for snapshot " + res.SnapshotID + " to complete...")
	if err := waitSnapshot(ctx, cl.ec2(c.RawRegion), res.SnapshotID, c); err != nil {
		return halt(ctx, state, err)
	}
	return multistep.ActionContinue
}

// waitSnapshot waits until the snapshot is completed. A snapshot can end
// in state error instead (EC2 API Reference, Snapshot: State is pending,
// completed, error, recoverable or recovering; StateMessage gives the
// reason of an error), and the SDK's waiter then only says it
// "transitioned to Failure": the snapshot is read once more for its state
// and message.
func waitSnapshot(ctx context.Context, client *ec2.Client, id string, c *Config) error {
	w := ec2.NewSnapshotCompletedWaiter(client, func(o *ec2.SnapshotCompletedWaiterOptions) {
		o.MinDelay, o.MaxDelay = c.PollInterval, 4*c.PollInterval
		o.Retryable = eventual.Retryable(notFound, o.Retryable) // just created by StartSnapshot
	})
	err := w.Wait(ctx, &ec2.DescribeSnapshotsInput{SnapshotIds: []string{id}}, c.WaitTimeout)
	if err == nil || ctx.Err() != nil {
		return err
	}
	out, derr := client.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{SnapshotIds: []string{id}})
	if derr == nil && len(out.Snapshots) == 1 && out.Snapshots[0].State == types.SnapshotStateError {
		return fmt.Errorf("snapshot %s ended in state error (%s): EBS did not complete it; the build has to upload again",
			id, aws.ToString(out.Snapshots[0].StateMessage))
	}
	return fmt.Errorf("wait for snapshot %s: %w", id, err)
}

func (s *stepUpload) Cleanup(state multistep.StateBag) {
	id, ok := state.GetOk(keySnapshotID)
	if !ok || !failed(state) {
		return
	}
	c, ui, cl := bag(state)
	if _, kept := cooldownUntil(state, c.RawRegion); kept {
		return // the AMI that still uses it is kept, and said so
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	ui.Say(fmt.Sprintf("Deleting snapshot %s (the build failed or was cancelled)...", id))
	if _, err := cl.ec2(c.RawRegion).DeleteSnapshot(ctx, &ec2.DeleteSnapshotInput{SnapshotId: aws.String(id.(string))}); err != nil {
		ui.Error(fmt.Sprintf("Error deleting snapshot %s, delete it by hand: %s", id, err))
		leftover(state, fmt.Sprintf("snapshot %s in %s", id, c.RawRegion))
		return
	}
	ui.Say(fmt.Sprintf("Deleted snapshot %s", id))
}

// stepRegister registers the AMI from the snapshot and waits until it is
// available.
type stepRegister struct{}

func (s *stepRegister) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	c, ui, cl := bag(state)
	snap := state.Get(keySnapshotID).(string)
	in := &ec2.RegisterImageInput{
		Name:               aws.String(c.AMIName),
		Architecture:       types.ArchitectureValues(c.Architecture),
		VirtualizationType: aws.String("hvm"),
		RootDeviceName:     aws.String(rootDevice),
		BlockDeviceMappings: []types.BlockDeviceMapping{{
			DeviceName: aws.String(rootDevice),
			Ebs: &types.EbsBlockDevice{
				SnapshotId:          aws.String(snap),
				VolumeType:          types.VolumeTypeGp3,
				DeleteOnTermination: aws.Bool(true),
			},
		}},
		EnaSupport:      aws.Bool(true),
		SriovNetSupport: aws.String("simple"),
		BootMode:        types.BootModeValues(c.BootMode),
		ImdsSupport:     types.ImdsSupportValuesV20,
	}
	if c.TPMSupport != "" {
		in.TpmSupport = types.TpmSupportValues(c.TPMSupport)
	}
	if c.uefiData != "" {
		in.UefiData = aws.String(c.uefiData)
	}
	if c.VolumeSize > 0 {
		in.BlockDeviceMappings[0].Ebs.VolumeSize = aws.Int32(int32(c.VolumeSize))
	}
	if c.AMIDescription != "" {
		in.Description = aws.String(c.AMIDescription)
	}
	if len(c.Tags) > 0 {
		in.TagSpecifications = []types.TagSpecification{{ResourceType: types.ResourceTypeImage, Tags: ec2Tags(c.Tags)}}
	}
	tpm := ""
	if c.TPMSupport != "" {
		tpm = ", NitroTPM " + c.TPMSupport
	}
	if c.uefiData != "" {
		tpm += ", UEFI variables (Secure Boot keys)"
	}
	ui.Say(fmt.Sprintf("Registering AMI %q from %s (%s, %s, ENA, IMDSv2 only%s)...", c.AMIName, snap, c.Architecture, bootModeLabel(c.BootMode), tpm))
	out, err := cl.ec2(c.RawRegion).RegisterImage(ctx, in)
	if err != nil {
		return halt(ctx, state, fmt.Errorf("RegisterImage: %w", err))
	}
	id := aws.ToString(out.ImageId)
	state.Put(keyAMIs, map[string]string{c.RawRegion: id})
	ui.Say("Registered " + id + "; waiting for it to become available...")
	if err := waitAvailable(ctx, cl.ec2(c.RawRegion), id, c); err != nil {
		return halt(ctx, state, err)
	}
	ui.Say(fmt.Sprintf("AMI %s is available in %s", id, c.RawRegion))
	return multistep.ActionContinue
}

func (s *stepRegister) Cleanup(state multistep.StateBag) {
	if !failed(state) {
		return
	}
	amis, ok := state.GetOk(keyAMIs)
	if !ok {
		return
	}
	c, ui, cl := bag(state)
	id := amis.(map[string]string)[c.RawRegion]
	if keepProtected(state, ui, c.RawRegion, id) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	ui.Say(fmt.Sprintf("Deregistering AMI %s (the build failed or was cancelled)...", id))
	if _, err := cl.ec2(c.RawRegion).DeregisterImage(ctx, &ec2.DeregisterImageInput{ImageId: aws.String(id)}); err != nil {
		ui.Error(fmt.Sprintf("Error deregistering AMI %s, deregister it by hand: %s", id, err))
		leftover(state, fmt.Sprintf("AMI %s in %s", id, c.RawRegion))
		return
	}
	ui.Say("Deregistered AMI " + id)
}

func waitAvailable(ctx context.Context, client *ec2.Client, id string, c *Config) error {
	w := ec2.NewImageAvailableWaiter(client, func(o *ec2.ImageAvailableWaiterOptions) {
		o.MinDelay, o.MaxDelay = c.PollInterval, 4*c.PollInterval
		o.Retryable = eventual.Retryable(notFound, o.Retryable) // just registered or copied
	})
	if err := w.Wait(ctx, &ec2.DescribeImagesInput{ImageIds: []string{id}}, c.WaitTimeout); err != nil {
		return fmt.Errorf("wait for AMI %s: %w", id, err)
	}
	return nil
}

// stepCopy copies the AMI to ami_regions, tags the copies and their
// snapshots, and waits for them.
type stepCopy struct{}

func (s *stepCopy) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	c, ui, cl := bag(state)
	if len(c.AMIRegions) == 0 {
		return multistep.ActionContinue
	}
	amis := state.Get(keyAMIs).(map[string]string)
	snaps := state.Get(keySnapshots).(map[string]string)
	src := amis[c.RawRegion]
	// Start every copy first: they proceed in parallel on AWS's side.
	for _, r := range c.AMIRegions {
		ui.Say(fmt.Sprintf("Copying %s to %s...", src, r))
		in := &ec2.CopyImageInput{
			Name:          aws.String(c.AMIName),
			SourceImageId: aws.String(src),
			SourceRegion:  aws.String(c.RawRegion),
		}
		if c.AMIDescription != "" {
			in.Description = aws.String(c.AMIDescription)
		}
		if c.EncryptBoot {
			// KMS keys are regional: a copy is encrypted with its
			// region's key from region_kms_key_ids, else with that
			// region's AWS managed key.
			in.Encrypted = aws.Bool(true)
			if k := c.RegionKMSKeyIDs[r]; k != "" {
				in.KmsKeyId = aws.String(k)
			}
		}
		out, err := cl.ec2(r).CopyImage(ctx, in)
		if err != nil {
			return halt(ctx, state, fmt.Errorf("CopyImage to %s: %w", r, err))
		}
		amis[r] = aws.ToString(out.ImageId)
		ui.Say(fmt.Sprintf("%s: %s", r, amis[r]))
	}
	for _, r := range c.AMIRegions {
		if err := waitAvailable(ctx, cl.ec2(r), amis[r], c); err != nil {
			return halt(ctx, state, err)
		}
		var snap string
		err := eventual.Do(ctx, c.PollInterval, notFound, func() (err error) {
			snap, _, err = imageSnapshot(ctx, cl.ec2(r), amis[r])
			return err
		})
		if err == nil && snap == "" {
			err = fmt.Errorf("AMI %s is available but names no snapshot", amis[r])
		}
		if err != nil {
			return halt(ctx, state, err)
		}
		snaps[r] = snap
		if err := tag(ctx, cl.ec2(r), amis[r], c.Tags, c.PollInterval); err != nil {
			return halt(ctx, state, err)
		}
		if err := tag(ctx, cl.ec2(r), snap, c.SnapshotTags, c.PollInterval); err != nil {
			return halt(ctx, state, err)
		}
		ui.Say(fmt.Sprintf("AMI %s is available in %s", amis[r], r))
	}
	return multistep.ActionContinue
}

func (s *stepCopy) Cleanup(state multistep.StateBag) {
	if !failed(state) {
		return
	}
	c, ui, cl := bag(state)
	amis, ok := state.GetOk(keyAMIs)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	for _, r := range c.AMIRegions {
		id, ok := amis.(map[string]string)[r]
		if !ok || keepProtected(state, ui, r, id) {
			continue
		}
		ui.Say(fmt.Sprintf("Deleting the copy %s in %s and its snapshot (the build failed or was cancelled)...", id, r))
		if err := deleteImage(ctx, cl.ec2(r), id, c.PollInterval, true); err != nil {
			ui.Error(fmt.Sprintf("Error deleting %s in %s, delete it and its snapshot by hand: %s", id, r, err))
			leftover(state, fmt.Sprintf("AMI %s and its snapshot in %s", id, r))
			continue
		}
		ui.Say(fmt.Sprintf("Deleted %s in %s", id, r))
	}
}

// stepLaunchPermissions grants launch permission on every AMI to
// ami_users, ami_groups, ami_org_arns and ami_ou_arns, and create-volume
// permission on every snapshot to snapshot_users and snapshot_groups.
type stepLaunchPermissions struct{}

func (s *stepLaunchPermissions) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	c, ui, cl := bag(state)
	var perms []types.LaunchPermission
	for _, u := range c.AMIUsers {
		perms = append(perms, types.LaunchPermission{UserId: aws.String(u)})
	}
	for _, g := range c.AMIGroups {
		perms = append(perms, types.LaunchPermission{Group: types.PermissionGroup(g)})
	}
	for _, o := range c.AMIOrgArns {
		perms = append(perms, types.LaunchPermission{OrganizationArn: aws.String(o)})
	}
	for _, o := range c.AMIOuArns {
		perms = append(perms, types.LaunchPermission{OrganizationalUnitArn: aws.String(o)})
	}
	var vperms []types.CreateVolumePermission
	for _, u := range c.SnapshotUsers {
		vperms = append(vperms, types.CreateVolumePermission{UserId: aws.String(u)})
	}
	for _, g := range c.SnapshotGroups {
		vperms = append(vperms, types.CreateVolumePermission{Group: types.PermissionGroup(g)})
	}
	amis := state.Get(keyAMIs).(map[string]string)
	snaps := state.Get(keySnapshots).(map[string]string)
	for _, r := range sortedRegions(amis) {
		if len(perms) > 0 {
			ui.Say(fmt.Sprintf("Granting launch permission on %s in %s...", amis[r], r))
			_, err := cl.ec2(r).ModifyImageAttribute(ctx, &ec2.ModifyImageAttributeInput{
				ImageId:          aws.String(amis[r]),
				LaunchPermission: &types.LaunchPermissionModifications{Add: perms},
			})
			if err != nil {
				return halt(ctx, state, fmt.Errorf("launch permissions on %s in %s: %w", amis[r], r, err))
			}
		}
		if len(vperms) > 0 {
			ui.Say(fmt.Sprintf("Granting create-volume permission on %s in %s...", snaps[r], r))
			_, err := cl.ec2(r).ModifySnapshotAttribute(ctx, &ec2.ModifySnapshotAttributeInput{
				SnapshotId:             aws.String(snaps[r]),
				Attribute:              types.SnapshotAttributeNameCreateVolumePermission,
				CreateVolumePermission: &types.CreateVolumePermissionModifications{Add: vperms},
			})
			if err != nil {
				return halt(ctx, state, fmt.Errorf("create-volume permissions on %s in %s: %w", snaps[r], r, err))
			}
		}
		if c.DeprecateAt != "" {
			t, _ := time.Parse(time.RFC3339, c.DeprecateAt)
			if _, err := cl.ec2(r).EnableImageDeprecation(ctx, &ec2.EnableImageDeprecationInput{
				ImageId: aws.String(amis[r]), DeprecateAt: aws.Time(t.UTC().Truncate(time.Minute)),
			}); err != nil {
				return halt(ctx, state, fmt.Errorf("deprecation of %s in %s: %w", amis[r], r, err))
			}
			ui.Say(fmt.Sprintf("%s in %s is deprecated from %s", amis[r], r, c.DeprecateAt))
		}
	}
	return multistep.ActionContinue
}

func (s *stepLaunchPermissions) Cleanup(multistep.StateBag) {}

// stepProtect turns deregistration protection on, last, so that no later
// step can fail with protected AMIs to clean up; a failure or cancel that
// still lands here turns it off again before the AMIs are deleted.
//
// With cooldown that cannot work: EC2 keeps the protection for 24 hours
// after it is disabled (EC2 API Reference,
// EnableImageDeregistrationProtection, WithCooldown; the disable answers
// "disabled-until-<time>"). Those AMIs, and their snapshots, are then
// kept, and the build's error names each with the time after which it
// can be deregistered, instead of a deregistration that is bound to fail.
type stepProtect struct{ protected map[string]string }

func (s *stepProtect) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	c, ui, cl := bag(state)
	if !c.DeregistrationProtection.Enabled {
		return multistep.ActionContinue
	}
	s.protected = map[string]string{}
	amis := state.Get(keyAMIs).(map[string]string)
	for _, r := range sortedRegions(amis) {
		if _, err := cl.ec2(r).EnableImageDeregistrationProtection(ctx, &ec2.EnableImageDeregistrationProtectionInput{
			ImageId: aws.String(amis[r]), WithCooldown: aws.Bool(c.DeregistrationProtection.WithCooldown),
		}); err != nil {
			return halt(ctx, state, fmt.Errorf("deregistration protection of %s in %s: %w", amis[r], r, err))
		}
		s.protected[r] = amis[r]
		ui.Say(fmt.Sprintf("%s in %s is protected against deregistration", amis[r], r))
	}
	return multistep.ActionContinue
}

func (s *stepProtect) Cleanup(state multistep.StateBag) {
	if !failed(state) || len(s.protected) == 0 {
		return
	}
	_, ui, cl := bag(state)
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	kept := map[string]string{}
	for _, r := range sortedRegions(s.protected) {
		out, err := cl.ec2(r).DisableImageDeregistrationProtection(ctx, &ec2.DisableImageDeregistrationProtectionInput{ImageId: aws.String(s.protected[r])})
		if err != nil {
			ui.Error(fmt.Sprintf("Error removing the deregistration protection of %s in %s: %s", s.protected[r], r, err))
			continue
		}
		if until, ok := strings.CutPrefix(aws.ToString(out.Return), "disabled-until-"); ok {
			kept[r] = until
		}
	}
	state.Put(keyCooldown, kept)
}

// cooldownUntil says whether the region's AMI is under a protection
// cooldown, and until when.
func cooldownUntil(state multistep.StateBag, region string) (string, bool) {
	kept, _ := state.Get(keyCooldown).(map[string]string)
	until, ok := kept[region]
	return until, ok
}

// keepProtected reports (and records as a leftover) an AMI that its
// protection's cooldown keeps from being deregistered, and says whether
// it is one.
func keepProtected(state multistep.StateBag, ui packersdk.Ui, region, id string) bool {
	until, ok := cooldownUntil(state, region)
	if !ok {
		return false
	}
	what := fmt.Sprintf("AMI %s and its snapshot in %s: deregistration protection with cooldown holds until %s; deregister the AMI and delete its snapshot after that", id, region, until)
	ui.Error("Keeping " + what)
	leftover(state, what)
	return true
}

func ec2Tags(m map[string]string) []types.Tag {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tags := make([]types.Tag, 0, len(keys))
	for _, k := range keys {
		tags = append(tags, types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return tags
}

// tag tags a resource the build created; CreateTags right after a create
// may answer that it does not exist (eventual consistency), retried.
func tag(ctx context.Context, client *ec2.Client, id string, m map[string]string, poll time.Duration) error {
	if len(m) == 0 {
		return nil
	}
	if err := eventual.Do(ctx, poll, notFound, func() error {
		_, err := client.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: ec2Tags(m)})
		return err
	}); err != nil {
		return fmt.Errorf("tag %s: %w", id, err)
	}
	return nil
}

// imageSnapshot returns the snapshot behind an AMI's root device and
// the AMI's state. While a copy is pending, EC2 leaves the snapshot id out
// of the answer: the snapshot is then "".
func imageSnapshot(ctx context.Context, client *ec2.Client, id string) (snap string, state types.ImageState, err error) {
	out, err := client.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{id}})
	if err != nil {
		return "", "", fmt.Errorf("describe %s: %w", id, err)
	}
	for _, im := range out.Images {
		if snaps := ebsSnapshots(im); len(snaps) > 0 {
			return snaps[0], im.State, nil
		}
		if im.State == types.ImageStatePending {
			return "", im.State, nil
		}
		return "", im.State, fmt.Errorf("AMI %s has no EBS snapshot", id)
	}
	return "", "", fmt.Errorf("describe %s: no such image", id)
}

// copySnapshotAttempts bounds the search for a pending copy's snapshot.
const copySnapshotAttempts = 5

// deleteImage deregisters an AMI and deletes its snapshot. An AMI that is
// already gone is not an error. A copy that is still pending does not
// name its snapshot yet: the snapshot EC2 creates for it is found by the
// description EC2 gives it ("Copied for DestinationAmi <id> ..."),
// searched a bounded number of times poll apart after the copy is
// deregistered (which stops it).
//
// fresh says the AMI was created moments ago (the clean-up of a failed
// build): EC2 may then still answer that it does not exist (eventual
// consistency), so "not found" is looked at again, a bounded number of
// times, before the AMI counts as gone; taken at its word, it would leave
// the copy and its snapshot behind.
func deleteImage(ctx context.Context, client *ec2.Client, id string, poll time.Duration, fresh bool) error {
	var snap string
	describe := func() (err error) {
		snap, _, err = imageSnapshot(ctx, client, id)
		return err
	}
	err := describe()
	if fresh && notFound(err) {
		err = eventual.Do(ctx, poll, notFound, describe)
	}
	if notFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := client.DeregisterImage(ctx, &ec2.DeregisterImageInput{ImageId: aws.String(id)}); err != nil && !notFound(err) {
		return fmt.Errorf("deregister %s: %w", id, err)
	}
	snaps := []string{snap}
	if snap == "" {
		snaps, err = copySnapshots(ctx, client, id, poll)
		if err != nil {
			return err
		}
	}
	for _, sn := range snaps {
		if _, err := client.DeleteSnapshot(ctx, &ec2.DeleteSnapshotInput{SnapshotId: aws.String(sn)}); err != nil && !notFound(err) {
			return fmt.Errorf("delete snapshot %s: %w", sn, err)
		}
	}
	return nil
}

// copySnapshots finds the snapshots EC2 created for the copy id.
func copySnapshots(ctx context.Context, client *ec2.Client, id string, poll time.Duration) ([]string, error) {
	in := &ec2.DescribeSnapshotsInput{
		OwnerIds: []string{"self"},
		Filters:  []types.Filter{{Name: aws.String("description"), Values: []string{"Copied for DestinationAmi " + id + " *"}}},
	}
	for i := 0; ; i++ {
		out, err := client.DescribeSnapshots(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("find the snapshot of the pending copy %s: %w", id, err)
		}
		if len(out.Snapshots) > 0 {
			var ids []string
			for _, sn := range out.Snapshots {
				ids = append(ids, aws.ToString(sn.SnapshotId))
			}
			return ids, nil
		}
		if i+1 == copySnapshotAttempts {
			return nil, fmt.Errorf("the pending copy %s was deregistered, but no snapshot \"Copied for DestinationAmi %s ...\" appeared in %d looks; check for one by hand", id, id, copySnapshotAttempts)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}

func notFound(err error) bool {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "InvalidAMIID.NotFound", "InvalidAMIID.Unavailable", "InvalidSnapshot.NotFound":
			return true
		}
	}
	return false
}

func sortedRegions(m map[string]string) []string {
	rs := make([]string, 0, len(m))
	for r := range m {
		rs = append(rs, r)
	}
	sort.Strings(rs)
	return rs
}
