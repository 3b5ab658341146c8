package ami

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	registryimage "github.com/hashicorp/packer-plugin-sdk/packer/registry/image"
	"github.com/hotpath-dev/hotpath/packer/internal/fakeaws"
	"github.com/hotpath-dev/hotpath/packer/internal/uitest"
)

// An arm64 image becomes an arm64 AMI, its copy too, with the attributes
// every hotpath AMI has; the architecture comes from the input artifact
// whichever way it carries its manifest.
func TestPostProcessArm64(t *testing.T) {
	for _, tc := range []struct {
		name       string
		configured string
		in         func(disk string) packersdk.Artifact
	}{
		{"manifest.json among the files", "", func(disk string) packersdk.Artifact {
			return &packersdk.MockArtifact{FilesValue: []string{disk, writeManifest(t, filepath.Dir(disk), "arm64")}}
		}},
		{"manifest state", "", func(disk string) packersdk.Artifact {
			m := writeManifest(t, t.TempDir(), "arm64")
			return &packersdk.MockArtifact{FilesValue: []string{disk}, StateValues: map[string]interface{}{"manifest": m}}
		}},
		{"the builder's architecture state", "", func(disk string) packersdk.Artifact {
			return &packersdk.MockArtifact{FilesValue: []string{disk}, StateValues: map[string]interface{}{"architecture": "arm64"}}
		}},
		{"configured and agreeing", "arm64", func(disk string) packersdk.Artifact {
			return &packersdk.MockArtifact{FilesValue: []string{disk, writeManifest(t, filepath.Dir(disk), "arm64")}}
		}},
		{"configured, another builder's disk", "arm64", func(disk string) packersdk.Artifact {
			return &packersdk.MockArtifact{FilesValue: []string{disk}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fakeaws.New("AKIDPP", "secret")
			defer f.Close()
			path, _ := diskFile(t, 3*bs, []int{0, 2}, -1)
			extra := map[string]interface{}{"ami_regions": []string{"us-east-1"}}
			if tc.configured != "" {
				extra["architecture"] = tc.configured
			}
			ui := new(uitest.UI)
			a, _, _, err := newPP(t, f, extra).PostProcess(context.Background(), ui, tc.in(path))
			if err != nil {
				t.Fatalf("%v\n%s", err, ui.Text())
			}
			imgs := f.Images()
			if len(imgs) != 2 {
				t.Fatalf("%d images, want the AMI and its copy", len(imgs))
			}
			for _, im := range imgs {
				if im.Architecture != "arm64" || im.BootMode != "uefi" || !im.EnaSupport || im.SriovNetSupport != "simple" ||
					im.Imds != "v2.0" || im.Virtualization != "hvm" {
					t.Errorf("image in %s: %+v", im.Region, im)
				}
				if im.Region == "eu-west-1" && im.Params["Architecture"] != "arm64" {
					t.Errorf("RegisterImage Architecture = %q", im.Params["Architecture"])
				}
			}
			if !ui.Contains("(arm64, UEFI, ENA, IMDSv2 only)") {
				t.Errorf("UI does not name the architecture:\n%s", ui.Text())
			}
			if got := a.State("architecture"); got != "arm64" {
				t.Errorf("artifact architecture %v", got)
			}
			for _, im := range a.State(registryimage.ArtifactStateURI).([]*registryimage.Image) {
				if im.Labels["architecture"] != "arm64" {
					t.Errorf("registry image %s labels %v", im.ImageID, im.Labels)
				}
			}
		})
	}
}

// Without a manifest and without a setting the AMI is x86_64, as before
// arm64; a manifest from before the architecture field is amd64.
func TestPostProcessDefaultArchitecture(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   func(disk string) packersdk.Artifact
	}{
		{"no manifest", func(disk string) packersdk.Artifact { return &packersdk.MockArtifact{FilesValue: []string{disk}} }},
		{"manifest without architecture", func(disk string) packersdk.Artifact {
			return &packersdk.MockArtifact{FilesValue: []string{disk, writeManifest(t, filepath.Dir(disk), "")}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fakeaws.New("AKIDPP", "secret")
			defer f.Close()
			path, _ := diskFile(t, 3*bs, []int{0}, -1)
			if _, _, _, err := newPP(t, f, nil).PostProcess(context.Background(), new(uitest.UI), tc.in(path)); err != nil {
				t.Fatal(err)
			}
			if imgs := f.Images(); len(imgs) != 1 || imgs[0].Architecture != "x86_64" {
				t.Errorf("images %+v", imgs)
			}
		})
	}
}

// An architecture that disagrees with the image, or an image whose
// architecture cannot be known, stops the run before anything is
// uploaded: an AMI of the wrong architecture never boots.
func TestPostProcessArchitectureMismatch(t *testing.T) {
	for _, tc := range []struct {
		name       string
		configured string
		goarch     string // "-": a manifest.json that is listed but missing
		want       string
	}{
		{"arm64 configured, amd64 image", "arm64", "amd64",
			`architecture = "arm64", but the image is built for x86_64 (`},
		{"x86_64 configured, arm64 image", "x86_64", "arm64",
			`architecture = "x86_64", but the image is built for arm64 (`},
		{"unknown manifest architecture", "", "riscv64",
			`architecture "riscv64" has no AMI architecture (hotpath builds amd64 and arm64)`},
		{"listed manifest missing", "", "-", "the input artifact's manifest: open "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fakeaws.New("AKIDPP", "secret")
			defer f.Close()
			path, _ := diskFile(t, 3*bs, []int{0}, -1)
			m := filepath.Join(filepath.Dir(path), "manifest.json")
			if tc.goarch != "-" {
				writeManifest(t, filepath.Dir(path), tc.goarch)
			}
			extra := map[string]interface{}{}
			if tc.configured != "" {
				extra["architecture"] = tc.configured
			}
			_, _, _, err := newPP(t, f, extra).PostProcess(context.Background(), new(uitest.UI),
				&packersdk.MockArtifact{FilesValue: []string{path, m}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
			if tc.goarch != "-" && err != nil && !strings.Contains(err.Error(), m) {
				t.Errorf("err %v does not name the manifest %s", err, m)
			}
			if n := len(f.Calls()); n != 0 {
				t.Errorf("%d AWS calls before the refusal, want none", n)
			}
		})
	}
}

// The manifest the builder's artifact names must be a hotpath manifest.
func TestPostProcessForeignManifest(t *testing.T) {
	f := fakeaws.New("AKIDPP", "secret")
	defer f.Close()
	path, _ := diskFile(t, 3*bs, []int{0}, -1)
	m := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(m, []byte(`{"format":"docker/v2"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	in := &packersdk.MockArtifact{FilesValue: []string{path}, StateValues: map[string]interface{}{"manifest": m}}
	_, _, _, err := newPP(t, f, nil).PostProcess(context.Background(), new(uitest.UI), in)
	if err == nil || !strings.Contains(err.Error(), `manifest: format "docker/v2"`) {
		t.Errorf("err %v", err)
	}
}
