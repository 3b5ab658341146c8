package ami

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/hotpath-dev/hotpath/packer/internal/fakeaws"
	"github.com/hotpath-dev/hotpath/packer/internal/uitest"
)

// TestCopySnapshots: the snapshot of a deregistered pending copy is
// looked for copySnapshotAttempts times, poll apart, and then given up
// on with a message that says to check by hand; one that is there is
// found at the first look.
func TestCopySnapshots(t *testing.T) {
	f := fakeaws.New("AKIDPP", "secret")
	defer f.Close()
	f.CopyPendingPolls = 1 << 20
	src := f.AddImage("eu-west-1", "hotpath 1")
	ac := &AccessConfig{RawRegion: "eu-west-1", AccessKey: f.AccessKey, SecretKey: f.SecretKey, CustomEndpointEC2: f.URL, MaxRetries: 1}
	cl, err := newClients(context.Background(), ac, fastRetries())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	copied, err := cl.ec2("us-east-1").CopyImage(ctx, &ec2.CopyImageInput{Name: aws.String("hotpath 1"), SourceImageId: aws.String(src), SourceRegion: aws.String("eu-west-1")})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id    string
		found int    // snapshots found
		looks int    // DescribeSnapshots calls
		err   string // part of the error
	}{
		{*copied.ImageId, 1, 1, ""},
		{"ami-00000000000000bad", 0, copySnapshotAttempts, "no snapshot \"Copied for DestinationAmi ami-00000000000000bad ...\" appeared in 5 looks"},
	} {
		before := f.CountCalls("DescribeSnapshots", 0)
		ids, err := copySnapshots(ctx, cl.ec2("us-east-1"), tc.id, time.Millisecond)
		if len(ids) != tc.found || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: snapshots %v, err %v; want %d, %q", tc.id, ids, err, tc.found, tc.err)
		}
		if n := f.CountCalls("DescribeSnapshots", 0) - before; n != tc.looks {
			t.Errorf("%s: %d looks, want %d", tc.id, n, tc.looks)
		}
	}
}

// TestPostProcessCleanupGoesOn: a clean-up call that fails leaves its
// resource behind, named in the error, and the clean-up goes on with the
// others: a copy whose deregistration is refused does not keep the next
// copy, an AMI whose protection cannot be removed does not keep the next
// region's protection on.
func TestPostProcessCleanupGoesOn(t *testing.T) {
	denied := fakeaws.Fault{Status: 403, Code: "UnauthorizedOperation", Message: "You are not authorized"}
	for _, tc := range []struct {
		name  string
		extra map[string]interface{}
		arm   func(f *fakeaws.Server)
		left  string // the region of the one AMI left
	}{
		{"a copy's deregistration refused", map[string]interface{}{"ami_users": []string{"111122223333"}}, func(f *fakeaws.Server) {
			f.FailAlways("ModifyImageAttribute", denied)
			f.Inject("DeregisterImage", denied)
		}, "us-east-1"},
		{"a protection not removed", map[string]interface{}{"deregistration_protection": map[string]interface{}{"enabled": true}}, func(f *fakeaws.Server) {
			enabled := 0
			f.OnCall = func(op string, status int) {
				if op == "EnableImageDeregistrationProtection" && status == 200 {
					if enabled++; enabled == 2 {
						f.Inject(op, denied)
					}
				}
			}
			f.Inject("DisableImageDeregistrationProtection", denied)
		}, "eu-west-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fakeaws.New("AKIDPP", "secret")
			defer f.Close()
			path, _ := diskFile(t, 3*bs, []int{0, 1, 2}, -1)
			tc.arm(f)
			tc.extra["ami_regions"] = []string{"us-east-1", "us-west-2"}
			ui := new(uitest.UI)
			_, _, _, err := newPP(t, f, tc.extra).PostProcess(context.Background(), ui, input(t, path))
			imgs := f.Images()
			if len(imgs) != 1 || imgs[0].Region != tc.left {
				t.Fatalf("images left %+v, want one in %s\n%s", imgs, tc.left, ui.Text())
			}
			if err == nil || !strings.Contains(err.Error(), "left behind, delete by hand: ") || !strings.Contains(err.Error(), imgs[0].ID) {
				t.Errorf("err %v does not name %s as left behind", err, imgs[0].ID)
			}
		})
	}
}
