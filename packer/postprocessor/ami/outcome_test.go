package ami

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/packer-plugin-sdk/multistep"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hotpath-dev/hotpath/packer/ebsupload"
	"github.com/hotpath-dev/hotpath/packer/internal/uitest"
)

// TestOutcome: the error Packer shows after a run says what went wrong
// (the step's error, which it wraps, or "cancelled", also for a cancel
// that came between two steps and so left no error), then what the
// clean-up left behind or that it deleted everything.
func TestOutcome(t *testing.T) {
	denied := errors.New("RegisterImage: UnauthorizedOperation")
	for _, tc := range []struct {
		name      string
		err       error // keyError, if not nil
		cancelled bool
		left      []string
		want      string // "": no error
	}{
		{"success", nil, false, nil, ""},
		{"failed", denied, false, nil, "RegisterImage: UnauthorizedOperation; everything created was deleted"},
		{"failed, leftovers", denied, false, []string{"snapshot snap-1 in eu-west-1", "AMI ami-2 in us-east-1"},
			"RegisterImage: UnauthorizedOperation; left behind, delete by hand: snapshot snap-1 in eu-west-1, AMI ami-2 in us-east-1"},
		{"cancelled in a step", errCancelled, true, nil, "cancelled; everything created was deleted"},
		{"cancelled between steps", nil, true, nil, "cancelled; everything created was deleted"},
		{"cancelled, leftovers", nil, true, []string{"snapshot snap-1 in eu-west-1"}, "cancelled; left behind, delete by hand: snapshot snap-1 in eu-west-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := new(multistep.BasicStateBag)
			if tc.err != nil {
				state.Put(keyError, tc.err)
			}
			if tc.cancelled {
				state.Put(multistep.StateCancelled, true)
			}
			for _, l := range tc.left {
				leftover(state, l)
			}
			err := outcome(state)
			switch {
			case tc.want == "" && err != nil, tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("error %v, want %q", err, tc.want)
			case tc.err == denied && tc.left == nil && !errors.Is(err, denied):
				t.Errorf("error %v does not wrap the step's error", err)
			}
		})
	}
}

// TestDiskImage: image_path wins over the input artifact; otherwise the
// artifact's disk_image state, then its first .img or .raw file; what is
// found must be a regular file.
func TestDiskImage(t *testing.T) {
	dir := t.TempDir()
	file := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("disk"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	given, state, img, raw := file("given.img"), file("state.img"), file("files.img"), file("FILES.RAW")
	art := func(disk string, files ...string) packersdk.Artifact {
		return &packersdk.MockArtifact{FilesValue: files, StateValues: map[string]interface{}{"disk_image": disk}}
	}
	for _, tc := range []struct {
		name     string
		override string
		in       packersdk.Artifact
		want     string // the path, or with err a part of the error
		err      bool
	}{
		{"image_path over the artifact", given, art(state, img), given, false},
		{"image_path without an artifact", given, nil, given, false},
		{"the artifact's disk_image", "", art(state, img), state, false},
		{"the artifact's .img", "", art("", filepath.Join(dir, "manifest.json"), img, raw), img, false},
		{"the artifact's .RAW", "", art("", raw), raw, false},
		{"no artifact", "", nil, errNoImage.Error(), true},
		{"no disk in the artifact", "", art("", filepath.Join(dir, "manifest.json")), errNoImage.Error(), true},
		{"missing", filepath.Join(dir, "gone.img"), nil, "disk image: stat ", true},
		{"a directory", dir, nil, "is not a regular file", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := diskImage(tc.override, tc.in)
			switch {
			case tc.err && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %q, %v; want an error with %q", got, err, tc.want)
			case !tc.err && (err != nil || got != tc.want):
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestProgress: the upload's progress line comes at most every
// progressEvery (5 s when unset), never for the last block (the final
// line follows it), and once more at the end if there was progress.
func TestProgress(t *testing.T) {
	for _, tc := range []struct {
		name           string
		every          time.Duration
		updates, lines int
	}{
		{"every update", time.Nanosecond, 4, 4},
		{"default, 5s", 0, 4, 1},
		{"an hour", time.Hour, 4, 1},
		{"no progress", time.Nanosecond, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ui := new(uitest.UI)
			p := newProgress(ui, tc.every)
			for done := 1; done <= tc.updates; done++ {
				time.Sleep(time.Millisecond)
				p.update(ebsupload.Progress{Done: done, Total: 4, Sent: done, BytesSent: int64(done) * bs, Elapsed: time.Duration(done) * time.Second})
			}
			p.final()
			n := len(ui.Lines())
			if n != tc.lines || n > 0 && !strings.HasPrefix(ui.Lines()[n-1], "say: blocks 4/4 (100.0%), 4 written, 0.5 MiB/s, ETA 0s") {
				t.Errorf("%d lines, want %d ending with the final one:\n%s", n, tc.lines, ui.Text())
			}
		})
	}
}

// TestFormatProgress: the progress line's share, throughput and ETA
// (from the share of blocks done so far), at the edges too: nothing done
// yet, no time elapsed, all done, an image of no blocks.
func TestFormatProgress(t *testing.T) {
	for _, tc := range []struct {
		p    ebsupload.Progress
		want string
	}{
		{ebsupload.Progress{Done: 1, Total: 4, Sent: 1, BytesSent: 1 << 20, Elapsed: 2 * time.Second}, "blocks 1/4 (25.0%), 1 written, 0.5 MiB/s, ETA 6s"},
		{ebsupload.Progress{Done: 3, Total: 4, Sent: 2, BytesSent: 6 << 20, Elapsed: 3 * time.Second}, "blocks 3/4 (75.0%), 2 written, 2.0 MiB/s, ETA 1s"},
		{ebsupload.Progress{Done: 0, Total: 4, Elapsed: time.Second}, "blocks 0/4 (0.0%), 0 written, 0.0 MiB/s, ETA -"},
		{ebsupload.Progress{Done: 1, Total: 4, Sent: 1, BytesSent: 1 << 20}, "blocks 1/4 (25.0%), 1 written, 0.0 MiB/s, ETA 0s"},
		{ebsupload.Progress{Done: 4, Total: 4, Sent: 3, BytesSent: 3 << 20, Elapsed: 3 * time.Second}, "blocks 4/4 (100.0%), 3 written, 1.0 MiB/s, ETA 0s"},
		{ebsupload.Progress{}, "blocks 0/0 (0.0%), 0 written, 0.0 MiB/s, ETA 0s"},
	} {
		if got := formatProgress(tc.p); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.p, got, tc.want)
		}
	}
	if got := mib(3<<20 + 1<<19); got != "3.5 MiB" {
		t.Errorf("mib: %q", got)
	}
}
