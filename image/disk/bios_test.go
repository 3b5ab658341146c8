package disk

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/partition/gpt"
)

// biosBoot is stand-in boot code: the layout does not care what it is,
// only where it lands.
func biosBoot(seed string) *BIOSBoot {
	mbr := bytes.Repeat([]byte{0xfa, 0xeb}, 220)
	core := make([]byte, 277*sector)
	for i := range core {
		core[i] = byte(i*31 + 3)
	}
	return &BIOSBoot{MBR: mbr, Core: core, PartGUID: DeriveGUID([]byte(seed), "bios")}
}

// With BIOS boot code the disk gains partition 2 before the ESP, the MBR
// its code, and nothing else changes: the ESP's bytes, place and number
// are those of the UEFI-only disk, and the protective MBR entry survives.
func TestBIOSBootLayout(t *testing.T) {
	dir := t.TempDir()
	efi := standIn(3<<20 + 99)
	uefiOnly, both := filepath.Join(dir, "uefi.img"), filepath.Join(dir, "both.img")
	lu, err := Write(uefiOnly, efi, opts("a"))
	if err != nil {
		t.Fatal(err)
	}
	o := opts("a")
	o.BIOS = biosBoot("a")
	lb, err := Write(both, efi, o)
	if err != nil {
		t.Fatal(err)
	}
	if lb.ESPStart != lu.ESPStart || lb.ESPSize != lu.ESPSize || lb.EFIStart != lu.EFIStart {
		t.Errorf("ESP moved: %+v vs %+v", lb, lu)
	}
	if lb.BIOSStart != BIOSBootLBA*sector || lb.BIOSSize != BIOSBootSectors*sector || lu.BIOSStart != 0 {
		t.Errorf("BIOS boot partition %d+%d (UEFI-only %d)", lb.BIOSStart, lb.BIOSSize, lu.BIOSStart)
	}
	a, _ := os.ReadFile(uefiOnly)
	b, _ := os.ReadFile(both)
	if !bytes.Equal(a[lu.ESPStart:lu.ESPStart+lu.ESPSize], b[lb.ESPStart:lb.ESPStart+lb.ESPSize]) {
		t.Error("the ESP's bytes differ between the UEFI-only and the dual-boot disk")
	}
	if !bytes.Equal(b[:440], o.BIOS.MBR) {
		t.Error("MBR boot code not at LBA 0")
	}
	if !bytes.Equal(b[446:512], a[446:512]) || b[450] != 0xee || b[446] != 0 {
		t.Errorf("protective MBR entry changed: % x", b[446:462])
	}
	if !bytes.Equal(b[BIOSBootLBA*sector:BIOSBootLBA*sector+len(o.BIOS.Core)], o.BIOS.Core) {
		t.Error("core image not at the BIOS boot partition's start")
	}

	d, err := diskfs.Open(both, diskfs.WithOpenMode(diskfs.ReadOnly))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pt, err := d.GetPartitionTable()
	if err != nil {
		t.Fatal(err)
	}
	parts := pt.(*gpt.Table).Partitions
	if len(parts) != 2 {
		t.Fatalf("%d partitions, want ESP and BIOS boot", len(parts))
	}
	for _, p := range parts {
		switch p.Index {
		case 1:
			if p.Type != gpt.EFISystemPartition {
				t.Errorf("partition 1 is %s", p.Type)
			}
		case BIOSBootIndex:
			if p.Type != gpt.BIOSBoot || p.Start != BIOSBootLBA || p.End != espStartLBA-1 || !strings.EqualFold(p.GUID, o.BIOS.PartGUID) {
				t.Errorf("BIOS boot partition %+v", p)
			}
		default:
			t.Errorf("unexpected partition %d", p.Index)
		}
	}
	if _, err := exec.LookPath("sgdisk"); err == nil {
		out, err := exec.Command("sgdisk", "-v", both).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "No problems found") {
			t.Errorf("sgdisk -v: %v\n%s", err, out)
		}
	}
	if _, err := exec.LookPath("fsck.fat"); err == nil {
		// fsck.fat reads a file system image; cut the ESP out.
		esp := filepath.Join(dir, "esp")
		os.WriteFile(esp, b[lb.ESPStart:lb.ESPStart+lb.ESPSize], 0o644)
		if out, err := exec.Command("fsck.fat", "-n", esp).CombinedOutput(); err != nil {
			t.Errorf("fsck.fat -n: %v\n%s", err, out)
		}
	}
}

func TestBIOSBootReproducible(t *testing.T) {
	dir := t.TempDir()
	efi := standIn(1 << 20)
	sum := func(name string, bb *BIOSBoot) string {
		t.Helper()
		o := opts("x")
		o.BIOS = bb
		p := filepath.Join(dir, name)
		if _, err := Write(p, efi, o); err != nil {
			t.Fatal(err)
		}
		d, err := Hash(p)
		if err != nil {
			t.Fatal(err)
		}
		return d.SHA256
	}
	a := sum("a.img", biosBoot("x"))
	if b := sum("b.img", biosBoot("x")); a != b {
		t.Fatalf("same inputs, different disks: %s %s", a, b)
	}
	other := biosBoot("x")
	other.Core[1000] ^= 1
	if a == sum("c.img", other) {
		t.Error("other core image, same disk")
	}
	if a == sum("d.img", nil) {
		t.Error("with and without BIOS boot code, same disk")
	}
}

func TestBIOSBootRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*BIOSBoot)
	}{
		{"MBR code over the disk signature", func(b *BIOSBoot) { b.MBR = make([]byte, 446) }},
		{"no MBR code", func(b *BIOSBoot) { b.MBR = nil }},
		{"core larger than the partition", func(b *BIOSBoot) { b.Core = make([]byte, BIOSBootSectors*sector+1) }},
		{"no GUID", func(b *BIOSBoot) { b.PartGUID = "" }},
	} {
		o := opts("r")
		o.BIOS = biosBoot("r")
		tc.change(o.BIOS)
		if _, err := Write(filepath.Join(t.TempDir(), "x.img"), standIn(4096), o); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}
