package image

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/hotpath-dev/hotpath/image/bios"
	"github.com/hotpath-dev/hotpath/image/disk"
)

// An amd64 build lays GRUB's boot code where the manifest says, with the
// hashes it records; UEFIOnly leaves it out, and changes nothing else of
// the ESP. Needs grub-pc-bin (image/deps.sh build).
func TestBuildBIOSBoot(t *testing.T) {
	if _, err := os.Stat(bios.Dir + "/boot.img"); err != nil {
		t.Skipf("%v: install %s", err, bios.Package)
	}
	mod := fixtures(t)
	o := options(t, mod, standInKernel(t))
	r, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	bb := r.M.Disk.BIOSBoot
	if bb == nil {
		t.Fatal("no bios_boot in an amd64 manifest")
	}
	raw, err := os.ReadFile(r.Disk)
	if err != nil {
		t.Fatal(err)
	}
	if sum(raw[:bios.CodeSize]) != bb.MBRCodeSHA256 {
		t.Error("the MBR's boot code is not what the manifest hashed")
	}
	core := raw[bb.Start : bb.Start+bb.Size]
	n := bytes.LastIndexFunc(core, func(r rune) bool { return r != 0 }) + 1
	n = (n + 511) / 512 * 512
	if sum(core[:n]) != bb.CoreSHA256 {
		t.Error("the BIOS boot partition does not hold the core image the manifest hashed")
	}
	if bb.Index != disk.BIOSBootIndex || bb.TypeGUID != disk.BIOSBootType || bb.Package != bios.Package || bb.Version == "" || bb.CoreImgSHA256 == "" {
		t.Errorf("bios_boot: %+v", bb)
	}

	o2 := options(t, mod, standInKernel(t))
	o2.UEFIOnly = true
	u, err := Build(context.Background(), o2)
	if err != nil {
		t.Fatal(err)
	}
	if u.M.Disk.BIOSBoot != nil || u.DiskSHA256 == r.DiskSHA256 {
		t.Errorf("UEFIOnly: bios_boot %+v, disk %s (dual-boot %s)", u.M.Disk.BIOSBoot, u.DiskSHA256, r.DiskSHA256)
	}
	if u.M.Disk.ESP != r.M.Disk.ESP || u.EFISHA256 != r.EFISHA256 {
		t.Errorf("the ESP differs with and without BIOS boot code:\n%+v\n%+v", u.M.Disk.ESP, r.M.Disk.ESP)
	}
}
