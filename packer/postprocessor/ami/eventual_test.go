package ami

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/packer/internal/eventual"
	"github.com/hotpath-dev/hotpath/packer/internal/fakeaws"
	"github.com/hotpath-dev/hotpath/packer/internal/uitest"
)

// TestEventualConsistency: the snapshot, the AMI and each copy answer
// NotFound for their first K lookups after the create. Up to Looks-1 of
// them the build waits them out and tags everything; at Looks it fails
// with the bound named, and deletes what it made (not "already gone").
func TestEventualConsistency(t *testing.T) {
	for _, tc := range []struct {
		k    int
		want string // "" success
	}{
		{1, ""},
		{eventual.Looks - 1, ""},
		{eventual.Looks, "still not found after 10 looks"},
	} {
		t.Run(fmt.Sprintf("K=%d", tc.k), func(t *testing.T) {
			f := fakeaws.New("AKIDPP", "secret")
			defer f.Close()
			f.NotFoundAfterCreate = tc.k
			path, _ := diskFile(t, 4*bs, []int{0, 3}, -1)
			pp := newPP(t, f, map[string]interface{}{"ami_regions": []string{"us-east-1", "us-west-2"}, "poll_interval": "1ms"})
			ui := new(uitest.UI)
			a, _, _, err := pp.PostProcess(context.Background(), ui, input(t, path))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("%v\n%s", err, ui.Text())
				}
				if n := len(a.(*Artifact).Amis); n != 3 {
					t.Errorf("%d AMIs", n)
				}
				for _, im := range f.Images() {
					if im.State != "available" || im.Tags["Name"] != "hotpath" {
						t.Errorf("AMI %s in %s: %s, tags %v", im.ID, im.Region, im.State, im.Tags)
					}
				}
				// described: snapshot, AMI, 2 copies; tagged: 2 copies and
				// their snapshots; k misses each
				if got := f.NotFoundAnswers(); got != 8*tc.k {
					t.Errorf("%d NotFound answers, want %d", got, 8*tc.k)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "everything created was deleted") {
				t.Fatalf("err %v\n%s", err, ui.Text())
			}
			if len(f.Images()) != 0 || len(f.Snapshots()) != 0 {
				t.Errorf("left behind: %d images, %d snapshots", len(f.Images()), len(f.Snapshots()))
			}
		})
	}
}
