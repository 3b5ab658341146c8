package ami

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hotpath-dev/hotpath/image/manifest"
	"github.com/hotpath-dev/hotpath/packer/internal/fakeaws"
	"github.com/hotpath-dev/hotpath/packer/internal/uitest"
)

// addBIOSBoot gives the manifest at path a BIOS boot partition, as an
// amd64 build writes it.
func addBIOSBoot(t *testing.T, path string) {
	t.Helper()
	m, err := manifest.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m.Disk.BIOSBoot = &manifest.BIOSBoot{Index: 2, Loader: "grub i386-pc", Package: "grub-pc-bin"}
	if err := m.WriteFile(path); err != nil {
		t.Fatal(err)
	}
}

// The boot mode registered follows the disk: uefi-preferred by default for
// a disk with BIOS boot code, uefi for one without (or with NitroTPM, or
// on arm64); a BIOS mode asked for a disk that cannot boot BIOS, or for
// arm64, fails before anything is uploaded; uefi is taken for any disk,
// and any mode for a disk without a manifest.
func TestBootModeFollowsTheDisk(t *testing.T) {
	for _, tc := range []struct {
		name, goarch string
		bios         bool
		extra        map[string]interface{}
		want, err    string
	}{
		{name: "dual-boot default", goarch: "amd64", bios: true, want: "uefi-preferred"},
		{name: "dual-boot asked uefi", goarch: "amd64", bios: true, extra: map[string]interface{}{"boot_mode": "uefi"}, want: "uefi"},
		{name: "dual-boot legacy", goarch: "amd64", bios: true, extra: map[string]interface{}{"boot_mode": "legacy-bios"}, want: "legacy-bios"},
		{name: "dual-boot with nitrotpm", goarch: "amd64", bios: true, extra: map[string]interface{}{"tpm_support": "v2.0"}, want: "uefi"},
		{name: "uefi-only default", goarch: "amd64", want: "uefi"},
		{name: "uefi-only asked preferred", goarch: "amd64", extra: map[string]interface{}{"boot_mode": "uefi-preferred"}, err: "cannot boot legacy BIOS"},
		{name: "uefi-only asked uefi", goarch: "amd64", extra: map[string]interface{}{"boot_mode": "uefi"}, want: "uefi"},
		{name: "arm64 default", goarch: "arm64", want: "uefi"},
		{name: "arm64 asked uefi", goarch: "arm64", extra: map[string]interface{}{"boot_mode": "uefi"}, want: "uefi"},
		{name: "arm64 asked legacy", goarch: "arm64", extra: map[string]interface{}{"boot_mode": "legacy-bios"}, err: `boot_mode = "legacy-bios": arm64 instances boot UEFI only`},
		// Another builder's disk, without a manifest: the template's word.
		{name: "no manifest, legacy", extra: map[string]interface{}{"boot_mode": "legacy-bios"}, want: "legacy-bios"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fakeaws.New("AKIDPP", "secret")
			defer f.Close()
			path, _ := diskFile(t, 3*bs, []int{0, 2}, -1)
			files := []string{path}
			if tc.goarch != "" {
				files = append(files, writeManifest(t, filepath.Dir(path), tc.goarch))
			}
			if tc.bios {
				addBIOSBoot(t, files[1])
			}
			ui := new(uitest.UI)
			_, _, _, err := newPP(t, f, tc.extra).PostProcess(context.Background(), ui, &packersdk.MockArtifact{FilesValue: files})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				if len(f.Snapshots()) != 0 || len(f.Images()) != 0 {
					t.Errorf("refused, but %d snapshots and %d images were made", len(f.Snapshots()), len(f.Images()))
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, ui.Text())
			}
			for _, im := range f.Images() {
				if im.BootMode != tc.want {
					t.Errorf("image %s in %s: BootMode %q, want %q", im.ID, im.Region, im.BootMode, tc.want)
				}
			}
		})
	}
}
