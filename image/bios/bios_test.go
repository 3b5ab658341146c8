package bios

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// fakeImages are a boot.img and a core.img with GRUB's markers where Patch
// checks them and distinct bytes everywhere else.
func fakeImages(coreLen int) (boot, core []byte) {
	boot = make([]byte, sector)
	for i := range boot {
		boot[i] = byte(i*7 + 1)
	}
	boot[driveCheck], boot[driveCheck+1] = 0xeb, 0x05
	binary.LittleEndian.PutUint16(boot[510:], 0xaa55)
	core = make([]byte, coreLen)
	for i := range core {
		core[i] = byte(i*13 + 5)
	}
	binary.LittleEndian.PutUint64(core[blocklist:], 2)
	binary.LittleEndian.PutUint16(core[blocklist+8:], 0)
	binary.LittleEndian.PutUint16(core[blocklist+10:], loadSegment)
	return boot, core
}

func TestPatch(t *testing.T) {
	boot, coreImg := fakeImages(100*sector + 17)
	mbr, core, err := Patch(boot, coreImg, 34)
	if err != nil {
		t.Fatal(err)
	}
	if len(mbr) != CodeSize {
		t.Fatalf("MBR code %d bytes, want %d", len(mbr), CodeSize)
	}
	if got := binary.LittleEndian.Uint64(mbr[kernelSector:]); got != 34 {
		t.Errorf("boot.img kernel sector %d, want 34", got)
	}
	if !bytes.Equal(mbr[driveCheck:driveCheck+2], []byte{0x90, 0x90}) {
		t.Errorf("drive check % x, want two NOPs", mbr[driveCheck:driveCheck+2])
	}
	if !bytes.Equal(mbr[bpbStart:bpbEnd], make([]byte, bpbEnd-bpbStart)) {
		t.Error("BIOS parameter block space not zero")
	}
	// Everything else is boot.img's.
	for i := range mbr {
		patched := i >= bpbStart && i < bpbEnd || i >= kernelSector && i < kernelSector+8 || i == driveCheck || i == driveCheck+1
		if !patched && mbr[i] != boot[i] {
			t.Fatalf("MBR byte %#x changed: %#x, boot.img has %#x", i, mbr[i], boot[i])
		}
	}
	if len(core) != 101*sector {
		t.Fatalf("core %d bytes, want 101 whole sectors", len(core))
	}
	bl := core[blocklist:sector]
	if s, n, seg := binary.LittleEndian.Uint64(bl), binary.LittleEndian.Uint16(bl[8:]), binary.LittleEndian.Uint16(bl[10:]); s != 35 || n != 100 || seg != loadSegment {
		t.Errorf("block list start %d len %d segment %#x, want 35 100 %#x", s, n, seg, loadSegment)
	}
	if !bytes.Equal(core[sector:len(coreImg)], coreImg[sector:]) || !bytes.Equal(core[:blocklist], coreImg[:blocklist]) {
		t.Error("core image changed outside its block list")
	}
	if !bytes.Equal(core[len(coreImg):], make([]byte, len(core)-len(coreImg))) {
		t.Error("padding not zero")
	}
}

func TestPatchRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(boot, core *[]byte, lba *int64)
	}{
		{"short boot.img", func(b, _ *[]byte, _ *int64) { *b = (*b)[:400] }},
		{"no boot signature", func(b, _ *[]byte, _ *int64) { (*b)[511] = 0 }},
		{"not GRUB's drive check", func(b, _ *[]byte, _ *int64) { (*b)[driveCheck] = 0x90 }},
		{"short core", func(_, c *[]byte, _ *int64) { *c = (*c)[:sector] }},
		{"not a disk core", func(_, c *[]byte, _ *int64) { (*c)[blocklist+10] = 0 }},
		{"LBA 0", func(_, _ *[]byte, l *int64) { *l = 0 }},
	} {
		boot, core := fakeImages(4 * sector)
		lba := int64(34)
		tc.change(&boot, &core, &lba)
		if _, _, err := Patch(boot, core, lba); err == nil {
			t.Errorf("%s: Patch succeeded", tc.name)
		}
	}
}

// The real thing: grub-mkimage from Debian's grub-pc-bin makes the same
// core image twice, Build patches it, and the result fits the BIOS boot
// partition. Skipped where GRUB is not installed.
func TestMkimageReproducible(t *testing.T) {
	if _, err := os.Stat(filepath.Join(Dir, "boot.img")); err != nil {
		t.Skipf("%v: install %s (image/deps.sh build)", err, Package)
	}
	if _, err := exec.LookPath("grub-mkimage"); err != nil {
		t.Skip(err)
	}
	o := Options{KernelPath: "EFI/BOOT/BOOTX64.EFI", ESPIndex: 1, CoreLBA: 34, MaxSectors: 2014}
	a, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Core, b.Core) || !bytes.Equal(a.MBR, b.MBR) || a.CoreImgSHA256 != b.CoreImgSHA256 {
		t.Errorf("two builds differ: core %s vs %s", a.CoreImgSHA256, b.CoreImgSHA256)
	}
	if a.Version == "" || a.MkimageVersion == "" {
		t.Errorf("versions %q %q", a.Version, a.MkimageVersion)
	}
	t.Logf("%s %s: core image %d sectors, sha256 %s", a.Package, a.Version, len(a.Core)/sector, a.CoreImgSHA256)
	// The configuration is built in (compressed, so not greppable): another
	// partition number gives another core image.
	o.ESPIndex = 3
	c, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(c.Core, a.Core) {
		t.Error("another ESP partition number, the same core image")
	}
	o.MaxSectors = 10
	if _, err := Build(context.Background(), o); err == nil {
		t.Error("a core image larger than the partition was accepted")
	}
}
