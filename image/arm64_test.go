package image

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/hotpath-dev/hotpath/image/cpio"
	"github.com/hotpath-dev/hotpath/image/gobuild"
	"github.com/hotpath-dev/hotpath/image/manifest"
	kernelconfig "github.com/hotpath-dev/hotpath/kernel-config"
)

// An arm64 image: the kernel is asked for arm64, the programs are arm64
// executables, the ESP holds BOOTAA64.EFI (and no BOOTX64.EFI), and the
// manifest says arm64.
func TestBuildArm64(t *testing.T) {
	mod := fixtures(t)
	var asked string
	standIn := standInKernel(t)
	o := options(t, mod, func(ctx context.Context, ko kernelconfig.Options) (*kernelconfig.Result, error) {
		asked = ko.Arch
		return standIn(ctx, ko)
	})
	o.Arch = "aarch64" // the kbuild spelling is accepted and recorded as GOARCH
	r, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r.Summary())
	if asked != "arm64" || r.M.Architecture != "arm64" {
		t.Errorf("kernel asked for %q, manifest architecture %q; want arm64", asked, r.M.Architecture)
	}
	if r.M.Disk.ESP.BootPath != "/EFI/BOOT/BOOTAA64.EFI" || r.M.Go.GOARM64 == "" || r.M.Go.GOAMD64 != "" ||
		!strings.Contains(r.M.Go.Env, "GOARCH=arm64") {
		t.Errorf("manifest: boot path %q, go %+v", r.M.Disk.ESP.BootPath, r.M.Go)
	}
	if !strings.Contains(r.Summary(), "BOOTAA64.EFI") {
		t.Errorf("summary does not name BOOTAA64.EFI:\n%s", r.Summary())
	}
	efi, err := os.ReadFile(r.BzImage)
	if err != nil {
		t.Fatal(err)
	}
	d, err := diskfs.Open(r.Disk, diskfs.WithOpenMode(diskfs.ReadOnly))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	fs, err := d.GetFilesystem(1)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fs.OpenFile("/EFI/BOOT/BOOTAA64.EFI", os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f)
	if !bytes.Equal(got, efi) {
		t.Fatal("BOOTAA64.EFI is not the kernel")
	}
	if _, err := fs.OpenFile("/EFI/BOOT/BOOTX64.EFI", os.O_RDONLY); err == nil {
		t.Error("an arm64 disk holds BOOTX64.EFI")
	}
	// The programs in the initramfs are arm64 executables.
	recs, err := cpio.Read(bytes.NewReader(efi[standInInitramfs:]))
	if err != nil {
		t.Fatal(err)
	}
	var checked []string
	for _, rec := range recs {
		if rec.Name != "init" && rec.Name != "workload" {
			continue
		}
		checked = append(checked, rec.Name)
		e, err := elf.NewFile(bytes.NewReader(rec.Data))
		if err != nil {
			t.Fatalf("%s: %v", rec.Name, err)
		}
		if e.Machine != elf.EM_AARCH64 {
			t.Errorf("/%s is for %s, want EM_AARCH64", rec.Name, e.Machine)
		}
	}
	if want := []string{"init", "workload"}; !slices.Equal(checked, want) {
		t.Errorf("programs in the initramfs %q, want %q", checked, want)
	}
	m, err := manifest.ReadFile(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if m.Architecture != "arm64" {
		t.Errorf("manifest.json architecture %q", m.Architecture)
	}
}

// The architectures do not mix: a prebuilt amd64 workload is refused for
// an arm64 image (and the reverse) naming both, and a kernel for the wrong
// machine is refused before it is written as the boot loader.
func TestArm64Refusals(t *testing.T) {
	mod := fixtures(t)
	ctx := context.Background()
	bins := map[string]string{}
	for _, goarch := range []string{"amd64", "arm64"} {
		bins[goarch] = filepath.Join(t.TempDir(), "workload-"+goarch)
		if err := gobuild.Build(ctx, gobuild.Options{Dir: mod, Package: "./workload", Output: bins[goarch], Arch: goarch}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ image, binary, want string }{
		{"arm64", "amd64", "it is for EM_X86_64 (ELFCLASS64), the image is linux/arm64; rebuild it with GOARCH=arm64, or build a linux/amd64 image (-arch amd64)"},
		{"amd64", "arm64", "it is for EM_AARCH64 (ELFCLASS64), the image is linux/amd64; rebuild it with GOARCH=amd64, or build a linux/arm64 image (-arch arm64)"},
	} {
		o := options(t, mod, standInKernel(t))
		o.Arch, o.Workload = tc.image, Program{Binary: bins[tc.binary]}
		_, err := Build(ctx, o)
		if err == nil || !errors.Is(err, gobuild.ErrNotStatic) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s workload in an %s image: %v\nwant %q", tc.binary, tc.image, err, tc.want)
		}
		// The right one is accepted.
		o.Workload = Program{Binary: bins[tc.image]}
		if _, err := Build(ctx, o); err != nil {
			t.Errorf("%s workload in an %s image: %v", tc.image, tc.image, err)
		}
	}

	standIn := standInKernel(t)
	o := options(t, mod, func(ctx context.Context, ko kernelconfig.Options) (*kernelconfig.Result, error) {
		ko.Arch = "amd64" // a builder that ignores the architecture
		return standIn(ctx, ko)
	})
	o.Arch = "arm64"
	if _, err := Build(ctx, o); err == nil || !strings.Contains(err.Error(), "EFI binary for machine 0x8664, want arm64 (0xaa64)") {
		t.Errorf("x86-64 kernel in an arm64 image: %v", err)
	}
	o.Arch = "riscv64"
	if _, err := Build(ctx, o); err == nil || !strings.Contains(err.Error(), `architecture "riscv64"`) {
		t.Errorf("unknown architecture: %v", err)
	}
}
