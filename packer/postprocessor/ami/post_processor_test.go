package ami

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	registryimage "github.com/hashicorp/packer-plugin-sdk/packer/registry/image"
	"github.com/hotpath-dev/hotpath/image/manifest"
	"github.com/hotpath-dev/hotpath/packer/internal/fakeaws"
	"github.com/hotpath-dev/hotpath/packer/internal/uitest"
)

const bs = fakeaws.BlockSize

// diskFile writes a sparse test disk: data blocks at the given block
// indexes (and a zero-filled but allocated block at zeroAt), size bytes
// long. It returns the path and the sha256 of the whole file.
func diskFile(t *testing.T, size int64, dataAt []int, zeroAt int) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hotpath.img")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	buf := make([]byte, bs)
	for _, i := range dataAt {
		for j := range buf {
			buf[j] = byte(rng.Uint32())
		}
		buf[0] = 0xff
		if _, err := f.WriteAt(buf[:min(int64(bs), size-int64(i)*bs)], int64(i)*bs); err != nil {
			t.Fatal(err)
		}
	}
	if zeroAt >= 0 {
		if _, err := f.WriteAt(make([]byte, bs), int64(zeroAt)*bs); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return path, hex.EncodeToString(sum[:])
}

func fastRetries() awsconfig.LoadOptionsFunc {
	return awsconfig.WithRetryer(func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 4
			o.MaxBackoff = 5 * time.Millisecond
			o.RateLimiter = ratelimit.None
		})
	})
}

// newPP configures a post-processor against the fake the way a template
// would, with extra settings on top.
func newPP(t *testing.T, f *fakeaws.Server, extra map[string]interface{}) *PostProcessor {
	t.Helper()
	raw := map[string]interface{}{
		"region":              "eu-west-1",
		"ami_name":            "hotpath test",
		"ami_description":     "tuned appliance",
		"access_key":          f.AccessKey,
		"secret_key":          "secret",
		"custom_endpoint_ec2": f.URL,
		"custom_endpoint_ebs": f.URL,
		"poll_interval":       "5ms",
		"upload_workers":      4,
		"tags":                map[string]string{"Name": "hotpath", "Team": "perf"},
		"snapshot_tags":       map[string]string{"Name": "hotpath-root"},
	}
	for k, v := range extra {
		raw[k] = v
	}
	pp := &PostProcessor{loadOptions: []func(*awsconfig.LoadOptions) error{fastRetries()}, progressEvery: time.Nanosecond}
	if err := pp.Configure(raw); err != nil {
		t.Fatal(err)
	}
	return pp
}

// input is the image builder's output as another builder (or artifice)
// hands it on: the disk and an amd64 manifest.json next to it, of a disk
// that boots both ways (BIOS boot code, as every amd64 build has).
func input(t *testing.T, path string) packersdk.Artifact {
	t.Helper()
	m := writeManifest(t, filepath.Dir(path), "amd64")
	addBIOSBoot(t, m)
	return &packersdk.MockArtifact{FilesValue: []string{path, m}}
}

// writeManifest writes a manifest.json for the given architecture (Go's
// name) into dir and returns its path.
func writeManifest(t *testing.T, dir, goarch string) string {
	t.Helper()
	p := filepath.Join(dir, "manifest.json")
	m := &manifest.Manifest{Format: manifest.Format, Architecture: goarch}
	if err := m.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPostProcess(t *testing.T) {
	f := fakeaws.New("AKIDPP", "secret")
	defer f.Close()
	size := int64(3*bs + 1000)
	path, sum := diskFile(t, size, []int{0, 2, 3}, 1)
	pp := newPP(t, f, map[string]interface{}{
		"ami_regions": []string{"us-east-1", "ap-southeast-2"},
		"ami_users":   []string{"111122223333"},
		"ami_groups":  []string{"all"},
	})
	ui := new(uitest.UI)
	a, keep, force, err := pp.PostProcess(context.Background(), ui, input(t, path))
	if err != nil {
		t.Fatalf("%v\n%s", err, ui.Text())
	}
	if !keep || force {
		t.Errorf("keep %v force %v: the disk image is kept by default, overridable", keep, force)
	}
	t.Logf("UI:\n%s", ui.Text())
	art := a.(*Artifact)
	if art.BuilderId() != BuilderID || len(art.Amis) != 3 {
		t.Fatalf("artifact %s %v", art.BuilderId(), art.Amis)
	}
	if !strings.HasPrefix(art.Id(), "ap-southeast-2:ami-") || !strings.Contains(art.String(), "eu-west-1: ami-") {
		t.Errorf("Id %q String %q", art.Id(), art.String())
	}

	snap := art.Snapshots["eu-west-1"]
	got, err := f.SnapshotSHA256(snap, size)
	if err != nil {
		t.Fatal(err)
	}
	if got != sum {
		t.Errorf("snapshot reassembled from the uploaded blocks: sha256 %s, disk image %s", got, sum)
	}
	// Unencrypted: the hole and the zero block are skipped.
	if n := f.CountCalls("PutSnapshotBlock", 201); n != 3 {
		t.Errorf("%d blocks written, want the 3 data blocks", n)
	}

	imgs := f.Images()
	if len(imgs) != 3 {
		t.Fatalf("%d images", len(imgs))
	}
	for _, im := range imgs {
		if im.ID != art.Amis[im.Region] {
			t.Errorf("image %s in %s not in the artifact %v", im.ID, im.Region, art.Amis)
		}
		if im.State != "available" || im.Description != "tuned appliance" || im.Tags["Team"] != "perf" || strings.Join(im.LaunchUsers, ",") != "111122223333" || strings.Join(im.LaunchGroups, ",") != "all" {
			t.Errorf("image %+v", im)
		}
		if im.Region != "eu-west-1" && (im.SourceImageID != art.Amis["eu-west-1"] || im.SourceRegion != "eu-west-1") {
			t.Errorf("copy %s comes from %s/%s", im.ID, im.SourceRegion, im.SourceImageID)
		}
	}
	var reg fakeaws.Image
	for _, im := range imgs {
		if im.Region == "eu-west-1" {
			reg = im
		}
	}
	for k, want := range map[string]string{
		"Name":                                         "hotpath test",
		"Description":                                  "tuned appliance",
		"Architecture":                                 "x86_64",
		"VirtualizationType":                           "hvm",
		"RootDeviceName":                               "/dev/xvda",
		"BlockDeviceMapping.1.DeviceName":              "/dev/xvda",
		"BlockDeviceMapping.1.Ebs.SnapshotId":          snap,
		"BlockDeviceMapping.1.Ebs.VolumeType":          "gp3",
		"BlockDeviceMapping.1.Ebs.DeleteOnTermination": "true",
		"EnaSupport":                                   "true",
		"SriovNetSupport":                              "simple",
		"BootMode":                                     "uefi-preferred",
		"ImdsSupport":                                  "v2.0",
		"TagSpecification.1.ResourceType":              "image",
	} {
		if got := reg.Params[k]; got != want {
			t.Errorf("RegisterImage %s = %q, want %q", k, got, want)
		}
	}
	for _, sn := range f.Snapshots() {
		if sn.Tags["Name"] != "hotpath-root" {
			t.Errorf("snapshot %s in %s tags %v", sn.ID, sn.Region, sn.Tags)
		}
	}
	for _, want := range []string{"blocks 4/4 (100.0%), 3 written", "MiB/s", "ETA", "AMI " + art.Amis["us-east-1"] + " is available in us-east-1",
		`AMI name "hotpath test" is free in 3 region(s)`, "into a new 1 GiB EBS snapshot in eu-west-1",
		"Snapshot " + snap + ": 3 of 4 blocks written (1 skipped), aggregate SHA-256 "} {
		if !ui.Contains(want) {
			t.Errorf("UI does not say %q:\n%s", want, ui.Text())
		}
	}

	// Destroy removes everything again.
	if err := a.Destroy(); err != nil {
		t.Fatal(err)
	}
	if n, m := len(f.Images()), len(f.Snapshots()); n != 0 || m != 0 {
		t.Errorf("after Destroy: %d images, %d snapshots", n, m)
	}
}

func TestPostProcessEncrypted(t *testing.T) {
	f := fakeaws.New("AKIDPP", "secret")
	defer f.Close()
	size := int64(6 * bs)
	path, sum := diskFile(t, size, []int{0, 4}, 2)
	key := "arn:aws:kms:eu-west-1:123456789012:key/0f0f0f0f-1234-5678-9abc-0123456789ab"
	pp := newPP(t, f, map[string]interface{}{"encrypt_boot": true, "kms_key_id": key, "volume_size": 4})
	ui := new(uitest.UI)
	a, _, _, err := pp.PostProcess(context.Background(), ui, input(t, path))
	if err != nil {
		t.Fatalf("%v\n%s", err, ui.Text())
	}
	if n := f.CountCalls("PutSnapshotBlock", 201); n != 6 {
		t.Errorf("%d blocks written, want all 6 (encrypted uploads send zeros and holes)", n)
	}
	sn := f.Snapshots()[0]
	if !sn.Encrypted || sn.KmsKeyArn != key || sn.VolumeSize != 4 {
		t.Errorf("snapshot %+v", sn)
	}
	if got, _ := f.SnapshotSHA256(a.(*Artifact).Snapshots["eu-west-1"], size); got != sum {
		t.Errorf("sha256 %s, want %s", got, sum)
	}
	if im := f.Images()[0]; im.VolumeSize != 4 {
		t.Errorf("image volume %d GiB, want 4", im.VolumeSize)
	}
}

// Throttling and server errors on every operation are retried and the
// AMI still gets made.
func TestPostProcessRetries(t *testing.T) {
	f := fakeaws.New("AKIDPP", "secret")
	defer f.Close()
	size := int64(8 * bs)
	path, sum := diskFile(t, size, []int{0, 1, 2, 3, 4, 5, 6, 7}, -1)
	throttle := fakeaws.Fault{Status: 429, Code: "RequestThrottledException", Message: "slow down"}
	f.Inject("StartSnapshot", fakeaws.Fault{Status: 503})
	f.Inject("PutSnapshotBlock", throttle, throttle, throttle, throttle, // more than the SDK's 4 attempts
		fakeaws.Fault{Status: 400, Code: "ThrottlingException", Message: "Rate exceeded"},
		fakeaws.Fault{Status: 503}, fakeaws.Fault{Status: 500, Code: "InternalServerException", Message: "x"})
	f.Inject("CompleteSnapshot", fakeaws.Fault{Status: 503})
	f.Inject("DescribeSnapshots", fakeaws.Fault{Status: 503, Code: "Unavailable", Message: "x"})
	f.Inject("RegisterImage", fakeaws.Fault{Status: 503, Code: "RequestLimitExceeded", Message: "Request limit exceeded."},
		fakeaws.Fault{Status: 500, Code: "InternalError", Message: "x"})
	f.Inject("DescribeImages", fakeaws.Fault{Status: 503, Code: "RequestLimitExceeded", Message: "x"})
	pp := newPP(t, f, map[string]interface{}{"upload_attempts": 3})
	ui := new(uitest.UI)
	a, _, _, err := pp.PostProcess(context.Background(), ui, input(t, path))
	if err != nil {
		t.Fatalf("%v\n%s", err, ui.Text())
	}
	if got, _ := f.SnapshotSHA256(a.(*Artifact).Snapshots["eu-west-1"], size); got != sum {
		t.Errorf("sha256 %s, want %s", got, sum)
	}
	failed := 0
	for _, c := range f.Calls() {
		if c.Status >= 400 {
			failed++
		}
	}
	// Besides the injected faults, the fake's eventual consistency
	// answers NotFound right after each create (retried too).
	if failed != 13+f.NotFoundAnswers() || f.NotFoundAnswers() == 0 {
		t.Errorf("%d failed calls answered, want the 13 injected and the %d NotFound after a create", failed, f.NotFoundAnswers())
	}
	if len(f.Images()) != 1 || len(f.Snapshots()) != 1 {
		t.Errorf("%d images, %d snapshots: retries must not duplicate", len(f.Images()), len(f.Snapshots()))
	}
}

// A failure at any point after StartSnapshot leaves nothing behind, and
// the user is told what was deleted.
func TestPostProcessFailureCleansUp(t *testing.T) {
	denied := fakeaws.Fault{Status: 403, Code: "UnauthorizedOperation", Message: "You are not authorized"}
	for _, tc := range []struct {
		op      string
		fault   fakeaws.Fault
		regions []string
		says    []string
	}{
		{"PutSnapshotBlock", fakeaws.Fault{Status: 403, Code: "AccessDeniedException", Message: "no"}, nil,
			[]string{"Deleted snapshot snap-"}},
		{"CompleteSnapshot", fakeaws.Fault{Status: 400, Code: "ValidationException", Message: "bad", Reason: "INVALID_PARAMETER_VALUE"}, nil,
			[]string{"Deleted snapshot snap-"}},
		{"DescribeSnapshots", denied, nil, []string{"Deleted snapshot snap-"}},
		{"RegisterImage", fakeaws.Fault{Status: 400, Code: "InvalidParameterValue", Message: "bad"}, nil,
			[]string{"Deleted snapshot snap-"}},
		{"CopyImage", denied, []string{"us-east-1"}, []string{"Deregistered AMI ami-", "Deleted snapshot snap-"}},
		{"CreateTags", denied, []string{"us-east-1"}, []string{"Deleted ami-", "in us-east-1", "Deregistered AMI ami-", "Deleted snapshot snap-"}},
		{"ModifyImageAttribute", denied, []string{"us-east-1", "us-west-2"}, []string{"Deleted ami-", "Deregistered AMI ami-", "Deleted snapshot snap-"}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			f := fakeaws.New("AKIDPP", "secret")
			defer f.Close()
			path, _ := diskFile(t, 3*bs, []int{0, 1, 2}, -1)
			f.FailAlways(tc.op, tc.fault)
			pp := newPP(t, f, map[string]interface{}{"ami_regions": tc.regions, "ami_users": []string{"111122223333"}})
			ui := new(uitest.UI)
			a, _, _, err := pp.PostProcess(context.Background(), ui, input(t, path))
			if err == nil {
				t.Fatalf("no error; artifact %v", a)
			}
			if f.CountCalls(tc.op, tc.fault.Status) == 0 {
				t.Fatalf("%s was never called:\n%s", tc.op, ui.Text())
			}
			if n, m := len(f.Images()), len(f.Snapshots()); n != 0 || m != 0 {
				t.Errorf("left behind: %v images, %v snapshots\n%s", f.Images(), f.Snapshots(), ui.Text())
			}
			t.Logf("UI:\n%s", ui.Text())
			for _, s := range tc.says {
				if !ui.Contains(s) {
					t.Errorf("UI does not say %q:\n%s", s, ui.Text())
				}
			}
		})
	}
}

// Cancelling mid-upload (Packer's Ctrl-C) deletes the snapshot.
func TestPostProcessCancel(t *testing.T) {
	f := fakeaws.New("AKIDPP", "secret")
	defer f.Close()
	path, _ := diskFile(t, 8*bs, []int{0, 1, 2, 3, 4, 5, 6, 7}, -1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.OnPut = func(string, int32) { cancel() }
	pp := newPP(t, f, map[string]interface{}{"upload_workers": 1})
	ui := new(uitest.UI)
	if _, _, _, err := pp.PostProcess(ctx, ui, input(t, path)); err == nil {
		t.Fatal("no error after cancel")
	}
	if n := len(f.Snapshots()); n != 0 {
		t.Errorf("%d snapshots left after cancel\n%s", n, ui.Text())
	}
	if !ui.Contains("Deleted snapshot") {
		t.Errorf("UI does not report the clean-up:\n%s", ui.Text())
	}
}

func TestPostProcessNoImage(t *testing.T) {
	f := fakeaws.New("AKIDPP", "secret")
	defer f.Close()
	pp := newPP(t, f, nil)
	_, _, _, err := pp.PostProcess(context.Background(), new(uitest.UI), &packersdk.MockArtifact{FilesValue: []string{"/x/manifest.json"}})
	if err != errNoImage {
		t.Errorf("err %v, want %v", err, errNoImage)
	}
	if len(f.Calls()) != 0 {
		t.Errorf("AWS called without an image: %v", f.Calls())
	}
}

// A cancel while the copies are still pending (EC2 names a copy's
// snapshot only once it is available) deletes the copy and the snapshot
// EC2 made for it, and says "cancelled", not "context canceled".
func TestPostProcessCancelPendingCopy(t *testing.T) {
	f := fakeaws.New("AKIDPP", "secret")
	defer f.Close()
	f.CopyPendingPolls = 1 << 20 // the copies never finish
	path, _ := diskFile(t, 3*bs, []int{0, 1, 2}, -1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	copies := 0
	f.OnCall = func(op string, status int) {
		if op == "CopyImage" && status == 200 {
			copies++
		}
		if op == "DescribeImages" && copies == 2 {
			cancel()
		}
	}
	pp := newPP(t, f, map[string]interface{}{"ami_regions": []string{"us-east-1", "us-west-2"}})
	ui := new(uitest.UI)
	_, _, _, err := pp.PostProcess(ctx, ui, input(t, path))
	t.Logf("UI:\n%s", ui.Text())
	if err == nil || err.Error() != "cancelled; everything created was deleted" {
		t.Errorf("err %v", err)
	}
	if ui.Contains("context canceled") {
		t.Errorf("UI shows the context error")
	}
	if n, m := len(f.Images()), len(f.Snapshots()); n != 0 || m != 0 {
		t.Errorf("left behind: %+v images, %d snapshots", f.Images(), m)
	}
	for _, r := range []string{"us-east-1", "us-west-2"} {
		if !ui.Contains("Deleted ami-") || !ui.Contains("in "+r) {
			t.Errorf("UI does not report deleting the copy in %s", r)
		}
	}
}

// An AMI name already taken in any target region stops the run before
// anything is uploaded.
func TestPostProcessDuplicateNameEarly(t *testing.T) {
	f := fakeaws.New("AKIDPP", "secret")
	defer f.Close()
	path, _ := diskFile(t, 3*bs, []int{0, 1, 2}, -1)
	// A first run takes the name in eu-west-1 and us-east-1.
	if _, _, _, err := newPP(t, f, map[string]interface{}{"ami_regions": []string{"us-east-1"}}).PostProcess(context.Background(), new(uitest.UI), input(t, path)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ region, copyTo string }{{"eu-west-1", "ap-south-1"}, {"ap-south-1", "us-east-1"}} {
		starts := f.CountCalls("StartSnapshot", 0)
		ui := new(uitest.UI)
		_, _, _, err := newPP(t, f, map[string]interface{}{"region": tc.region, "ami_regions": []string{tc.copyTo}}).PostProcess(context.Background(), ui, input(t, path))
		if err == nil || !strings.Contains(err.Error(), `ami_name "hotpath test" is already used by ami-`) {
			t.Errorf("%s: err %v", tc.region, err)
		}
		if n := f.CountCalls("StartSnapshot", 0) - starts; n != 0 {
			t.Errorf("%s: %d uploads started despite the duplicate name", tc.region, n)
		}
	}
}

// Encrypted copies use their region's key from region_kms_key_ids.
func TestPostProcessRegionKMSKeys(t *testing.T) {
	f := fakeaws.New("AKIDPP", "secret")
	defer f.Close()
	path, _ := diskFile(t, 3*bs, []int{0, 1, 2}, -1)
	keys := map[string]string{
		"eu-west-1": "arn:aws:kms:eu-west-1:123456789012:key/0f0f0f0f-1234-5678-9abc-0123456789ab",
		"us-east-1": "arn:aws:kms:us-east-1:123456789012:key/1f0f0f0f-1234-5678-9abc-0123456789ab",
	}
	pp := newPP(t, f, map[string]interface{}{
		"encrypt_boot": true, "region_kms_key_ids": keys, "ami_regions": []string{"us-east-1"}, "ami_users": []string{"111122223333"},
	})
	ui := new(uitest.UI)
	if _, _, _, err := pp.PostProcess(context.Background(), ui, input(t, path)); err != nil {
		t.Fatalf("%v\n%s", err, ui.Text())
	}
	regions := map[string]int{}
	for _, sn := range f.Snapshots() {
		regions[sn.Region]++
		if !sn.Encrypted || sn.KmsKeyArn != keys[sn.Region] {
			t.Errorf("snapshot %s in %s: encrypted %v with %q, want %q", sn.ID, sn.Region, sn.Encrypted, sn.KmsKeyArn, keys[sn.Region])
		}
	}
	// The loop above judges every snapshot: there must be one in each region.
	if regions["eu-west-1"] == 0 || regions["us-east-1"] == 0 {
		t.Errorf("snapshots per region %v, want the AMI's in both", regions)
	}
}

// A template written for the amazon plugin: its keys do what they do
// there, checked on the fake's side.
func TestPostProcessAmazonKeys(t *testing.T) {
	f := fakeaws.New("AKIDPP", "secret")
	defer f.Close()
	// An AMI of the same name exists in both regions; force_deregister
	// with force_delete_snapshot replaces it.
	path, oldImages := firstBuild(t, f)
	before := len(f.Calls())
	org := "arn:aws:organizations::123456789012:organization/o-abcdefghij"
	ou := "arn:aws:organizations::123456789012:ou/o-abcdefghij/ou-ab12-cdefgh34"
	deprecate := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Minute)
	pp := newPP(t, f, map[string]interface{}{
		"ami_regions":               []string{"us-east-1"},
		"force_deregister":          true,
		"force_delete_snapshot":     true,
		"assume_role":               map[string]interface{}{"role_arn": "arn:aws:iam::123456789012:role/hotpath-builder", "external_id": "ext-1", "session_name": "ci"},
		"custom_endpoint_sts":       f.URL,
		"snapshot_users":            []string{"111122223333"},
		"ami_org_arns":              []string{org},
		"ami_ou_arns":               []string{ou},
		"deprecate_at":              deprecate.Format(time.RFC3339),
		"deregistration_protection": map[string]interface{}{"enabled": true},
		"tag":                       []map[string]string{{"key": "cost-center", "value": "42"}},
		"snapshot_tag":              []map[string]string{{"key": "backup", "value": "no"}},
		"boot_mode":                 "uefi",
		"imds_support":              "v2.0",
		"ena_support":               true,
		"sriov_support":             true,
		"tpm_support":               "v2.0",
		"architecture":              "x86_64",
	})
	ui := new(uitest.UI)
	a, _, _, err := pp.PostProcess(context.Background(), ui, input(t, path))
	t.Logf("UI:\n%s", ui.Text())
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range oldImages {
		for _, now := range f.Images() {
			if now.ID == im.ID {
				t.Errorf("old AMI %s not deregistered", im.ID)
			}
		}
		for _, sn := range f.Snapshots() {
			if sn.ID == im.SnapshotID {
				t.Errorf("old snapshot %s not deleted", sn.ID)
			}
		}
	}
	imgs := f.Images()
	if len(imgs) != 2 {
		t.Fatalf("%d images", len(imgs))
	}
	for _, im := range imgs {
		if im.Tpm != "v2.0" || !im.Protected || im.DeprecateAt != deprecate.Format("2006-01-02T15:04:05.000Z") ||
			strings.Join(im.LaunchOrgs, ",") != org || strings.Join(im.LaunchOUs, ",") != ou || im.Tags["cost-center"] != "42" || im.Tags["Name"] != "hotpath" {
			t.Errorf("image %+v", im)
		}
	}
	if len(f.Snapshots()) != 2 {
		t.Errorf("%d snapshots, want the new AMIs' 2 (the old ones deleted)", len(f.Snapshots()))
	}
	for _, sn := range f.Snapshots() {
		if strings.Join(sn.VolumeUsers, ",") != "111122223333" || sn.Tags["backup"] != "no" {
			t.Errorf("snapshot %s: volume users %v, tags %v", sn.ID, sn.VolumeUsers, sn.Tags)
		}
	}
	// Every call after AssumeRole was signed with the role's credentials.
	assumed := f.AssumedRoles()
	if len(assumed) != 1 {
		t.Fatalf("assumed roles %v", assumed)
	}
	for k, v := range assumed {
		if v != "arn:aws:iam::123456789012:role/hotpath-builder ci ext-1" {
			t.Errorf("assumed %s", v)
		}
		for _, c := range f.Calls()[before:] {
			if c.Op != "AssumeRole" && c.Key != k {
				t.Errorf("%s signed with %s, not the role's %s", c.Op, c.Key, k)
			}
		}
	}
	// A protected AMI cannot be deregistered: Destroy says so.
	if err := a.Destroy(); err == nil || !strings.Contains(err.Error(), "deregistration protection") {
		t.Errorf("Destroy of protected AMIs: %v", err)
	}
}

// The HCP Packer registry metadata: the AMI registered from the disk has
// no source image (the disk is no image id; its sha256 and the snapshot
// are labels), each copy's source is that AMI.
func TestRegistryMetadata(t *testing.T) {
	f := fakeaws.New("AKIDPP", "secret")
	defer f.Close()
	path, _ := diskFile(t, 3*bs, []int{0, 1, 2}, -1)
	in := &packersdk.MockArtifact{FilesValue: []string{path}, StateValues: map[string]interface{}{"disk_sha256": "d15c"}}
	a, _, _, err := newPP(t, f, map[string]interface{}{"ami_regions": []string{"us-east-1"}}).PostProcess(context.Background(), new(uitest.UI), in)
	if err != nil {
		t.Fatal(err)
	}
	imgs, ok := a.State(registryimage.ArtifactStateURI).([]*registryimage.Image)
	if !ok || len(imgs) != 2 {
		t.Fatalf("registry images %#v", a.State(registryimage.ArtifactStateURI))
	}
	amis := a.State("amis").(map[string]string)
	snaps := a.State("snapshots").(map[string]string)
	for _, im := range imgs {
		want := ""
		if im.ProviderRegion == "us-east-1" {
			want = amis["eu-west-1"]
		}
		if im.ImageID != amis[im.ProviderRegion] || im.SourceImageID != want || strings.HasPrefix(im.SourceImageID, "/") ||
			im.Labels["disk_sha256"] != "d15c" || im.Labels["snapshot_id"] != snaps[im.ProviderRegion] {
			t.Errorf("registry image %+v", im)
		}
	}
}

// TestPostProcessSnapshotError: a snapshot EBS does not complete ends in
// state error; the build says so, with the snapshot's status message,
// and deletes it.
func TestPostProcessSnapshotError(t *testing.T) {
	f := fakeaws.New("AKIDPP", "secret")
	defer f.Close()
	f.CompleteError = "the snapshot could not be completed: internal error"
	path, _ := diskFile(t, 3*bs, []int{0, 1, 2}, -1)
	ui := new(uitest.UI)
	_, _, _, err := newPP(t, f, nil).PostProcess(context.Background(), ui, input(t, path))
	t.Logf("UI:\n%s", ui.Text())
	if err == nil || !strings.Contains(err.Error(), "ended in state error (the snapshot could not be completed: internal error)") {
		t.Fatalf("err %v", err)
	}
	if n, m := len(f.Images()), len(f.Snapshots()); n != 0 || m != 0 {
		t.Errorf("left behind: %v images, %v snapshots", f.Images(), f.Snapshots())
	}
	if n := f.CountCalls("RegisterImage", 0); n != 0 {
		t.Errorf("RegisterImage called with a snapshot in state error")
	}
}

// TestPostProcessProtectionCooldown: protection enabled with cooldown
// holds for 24 hours after it is disabled. When the protection of the
// second region (in sorted order) fails, the first region's AMI (the
// registered one, or a copy) cannot be deregistered in clean-up: the
// plugin keeps it and its snapshot and names the time after which they
// can go, instead of deregistrations bound to fail; every AMI that was
// never protected is deleted, whatever its place among ami_regions.
func TestPostProcessProtectionCooldown(t *testing.T) {
	for _, tc := range []struct {
		region string
		copies []string
	}{
		{"eu-west-1", []string{"us-east-1"}},
		{"us-east-1", []string{"eu-west-1", "us-west-2"}},
	} {
		t.Run(tc.region, func(t *testing.T) {
			f := fakeaws.New("AKIDPP", "secret")
			defer f.Close()
			path, _ := diskFile(t, 3*bs, []int{0, 1, 2}, -1)
			f.OnCall = func(op string, status int) {
				if op == "EnableImageDeregistrationProtection" && status == 200 {
					f.Inject(op, fakeaws.Fault{Status: 403, Code: "UnauthorizedOperation", Message: "You are not authorized"})
				}
			}
			pp := newPP(t, f, map[string]interface{}{
				"region":                    tc.region,
				"ami_regions":               tc.copies,
				"deregistration_protection": map[string]interface{}{"enabled": true, "with_cooldown": true},
			})
			ui := new(uitest.UI)
			_, _, _, err := pp.PostProcess(context.Background(), ui, input(t, path))
			t.Logf("UI:\n%s", ui.Text())
			if err == nil || !strings.Contains(err.Error(), "deregistration protection with cooldown holds until") {
				t.Fatalf("err %v", err)
			}
			if n := f.CountCalls("DeregisterImage", 400); n != 0 {
				t.Errorf("%d deregistrations refused: clean-up tried an AMI under cooldown", n)
			}
			imgs := f.Images()
			if len(imgs) != 1 || imgs[0].Region != "eu-west-1" || imgs[0].ProtectedUntil.IsZero() {
				t.Fatalf("images left %+v, want the protected eu-west-1 AMI only", imgs)
			}
			if !strings.Contains(err.Error(), "AMI "+imgs[0].ID+" and its snapshot in eu-west-1") {
				t.Errorf("err %v does not name %s", err, imgs[0].ID)
			}
			snaps := f.Snapshots()
			if len(snaps) != 1 || snaps[0].ID != imgs[0].SnapshotID {
				t.Errorf("snapshots left %+v, want only %s's", snaps, imgs[0].ID)
			}
		})
	}
}

// TestPostProcessClockSkew: with the build machine's clock 10 minutes
// off AWS's, every first request of each client is refused
// RequestTimeTooSkewed; the plugin's SDK configuration keeps the SDK's
// clock-skew correction (from the Date of that answer), so the build
// still succeeds.
func TestPostProcessClockSkew(t *testing.T) {
	f := fakeaws.New("AKIDPP", "secret")
	defer f.Close()
	f.SetClock(func() time.Time { return time.Now().Add(10 * time.Minute) })
	path, _ := diskFile(t, 3*bs, []int{0, 1, 2}, -1)
	ui := new(uitest.UI)
	if _, _, _, err := newPP(t, f, nil).PostProcess(context.Background(), ui, input(t, path)); err != nil {
		t.Fatalf("%v\n%s", err, ui.Text())
	}
	if n := f.CountCalls("sigv4:RequestTimeTooSkewed", 403); n == 0 {
		t.Error("no request was refused for clock skew: the fake's clock did not count")
	}
	if imgs := f.Images(); len(imgs) != 1 || imgs[0].State != "available" {
		t.Errorf("images %+v", imgs)
	}
}
