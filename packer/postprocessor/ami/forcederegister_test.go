package ami

import (
	"context"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/packer/internal/fakeaws"
	"github.com/hotpath-dev/hotpath/packer/internal/uitest"
)

// TestForceDeregisterCombinations: an AMI of the same name in both regions
// (each with its own snapshot), then a second build with each combination
// of force_deregister and force_delete_snapshot, against the fake that
// refuses what EC2 refuses (a duplicate name, a snapshot in use).
//   - neither: the build stops before any upload; the old AMIs and their
//     snapshots stay;
//   - force_deregister alone: the old AMIs are deregistered and their
//     snapshots KEPT (the amazon plugin's meaning: deleting them is
//     force_delete_snapshot's job), no DeleteSnapshot is sent;
//   - both: the old AMIs and their snapshots are gone.
//
// force_delete_snapshot alone is refused by the configuration
// (TestConfigErrors, "snapshot deletion alone").
func TestForceDeregisterCombinations(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		deregister, delSnapshot bool
		wantErr                 string // "" : the build succeeds
		wantImagesGone          bool
		wantSnapshotsGone       bool
		wantSay                 string
	}{
		{name: "neither", wantErr: "already used by"},
		{name: "force_deregister alone", deregister: true, wantImagesGone: true,
			wantSay: "Deregistered ami-"},
		{name: "both", deregister: true, delSnapshot: true, wantImagesGone: true, wantSnapshotsGone: true,
			wantSay: "Deregistered (and deleted the snapshots of) ami-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fakeaws.New("AKIDPP", "secret")
			defer f.Close()
			path, oldImages := firstBuild(t, f)
			oldSnaps := map[string]bool{}
			for _, im := range oldImages {
				if im.SnapshotID == "" {
					t.Fatalf("old image %s names no snapshot", im.ID)
				}
				oldSnaps[im.SnapshotID] = true
			}
			before := len(f.Calls())

			extra := map[string]interface{}{"ami_regions": []string{"us-east-1"}}
			if tc.deregister {
				extra["force_deregister"] = true
			}
			if tc.delSnapshot {
				extra["force_delete_snapshot"] = true
			}
			pp := newPP(t, f, extra)
			ui := new(uitest.UI)
			_, _, _, err := pp.PostProcess(context.Background(), ui, input(t, path))
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("second build: %v, want an error with %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Fatalf("second build: %v\n%s", err, ui.Text())
			}

			images := map[string]bool{}
			for _, im := range f.Images() {
				images[im.ID] = true
			}
			for _, im := range oldImages {
				if images[im.ID] == tc.wantImagesGone {
					t.Errorf("old AMI %s in %s: registered %v, want %v", im.ID, im.Region, images[im.ID], !tc.wantImagesGone)
				}
			}
			snaps := map[string]bool{}
			for _, sn := range f.Snapshots() {
				snaps[sn.ID] = true
			}
			for id := range oldSnaps {
				if snaps[id] == tc.wantSnapshotsGone {
					t.Errorf("old snapshot %s: present %v, want %v", id, snaps[id], !tc.wantSnapshotsGone)
				}
			}
			deletes := 0
			for _, c := range f.Calls()[before:] {
				if c.Op == "DeleteSnapshot" {
					deletes++
				}
			}
			if want := map[bool]int{true: len(oldSnaps), false: 0}[tc.wantSnapshotsGone]; tc.wantErr == "" && deletes != want {
				t.Errorf("%d DeleteSnapshot calls, want %d", deletes, want)
			}
			if tc.wantErr == "" {
				if got := len(f.Images()); got != 2 {
					t.Errorf("%d images after the second build, want the 2 new ones", got)
				}
				if n := strings.Count(ui.Text(), tc.wantSay); n != 2 {
					t.Errorf("%q said %d times, want once per region:\n%s", tc.wantSay, n, ui.Text())
				}
			}
			if tc.wantErr != "" && len(f.Images()) != 2 {
				t.Errorf("a refused build left %d images, want the 2 old ones", len(f.Images()))
			}
		})
	}
}

// firstBuild builds the disk it returns into an AMI in eu-west-1 and
// us-east-1, so that a second build finds one of the same name in each
// region, and returns the two images (checks of their removal over fewer
// would be vacuous).
func firstBuild(t *testing.T, f *fakeaws.Server) (path string, images []fakeaws.Image) {
	t.Helper()
	path, _ = diskFile(t, 3*bs, []int{0, 1, 2}, -1)
	old := newPP(t, f, map[string]interface{}{"ami_regions": []string{"us-east-1"}})
	if _, _, _, err := old.PostProcess(context.Background(), new(uitest.UI), input(t, path)); err != nil {
		t.Fatal(err)
	}
	if images = f.Images(); len(images) != 2 {
		t.Fatalf("first build: %d images, want one per region", len(images))
	}
	return path, images
}
