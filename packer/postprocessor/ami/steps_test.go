package ami

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/hotpath-dev/hotpath/packer/internal/fakeaws"
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
