package ami

import (
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// TestEBSSnapshots: the snapshots force_deregister deletes and the one a
// registered AMI is checked by are those of its EBS mappings only. An AMI
// of the same name made elsewhere may have instance-store mappings (no
// Ebs) or an empty EBS volume (no SnapshotId), in any position.
func TestEBSSnapshots(t *testing.T) {
	ephemeral := types.BlockDeviceMapping{DeviceName: aws.String("/dev/sdb"), VirtualName: aws.String("ephemeral0")}
	empty := types.BlockDeviceMapping{DeviceName: aws.String("/dev/sdc"), Ebs: &types.EbsBlockDevice{VolumeSize: aws.Int32(8)}}
	ebs := func(dev, snap string) types.BlockDeviceMapping {
		return types.BlockDeviceMapping{DeviceName: aws.String(dev), Ebs: &types.EbsBlockDevice{SnapshotId: aws.String(snap)}}
	}
	tests := []struct {
		name string
		maps []types.BlockDeviceMapping
		want []string
	}{
		{"none", nil, nil},
		{"root", []types.BlockDeviceMapping{ebs("/dev/xvda", "snap-1")}, []string{"snap-1"}},
		{"instance store first", []types.BlockDeviceMapping{ephemeral, ebs("/dev/xvda", "snap-1")}, []string{"snap-1"}},
		{"empty volume first", []types.BlockDeviceMapping{empty, ebs("/dev/xvda", "snap-1")}, []string{"snap-1"}},
		{"only instance store and empty", []types.BlockDeviceMapping{ephemeral, empty}, nil},
		{"two, in order", []types.BlockDeviceMapping{ebs("/dev/xvda", "snap-1"), ephemeral, ebs("/dev/xvdb", "snap-2")}, []string{"snap-1", "snap-2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ebsSnapshots(types.Image{BlockDeviceMappings: tc.maps})
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ebsSnapshots = %q, want %q", got, tc.want)
			}
		})
	}
}
