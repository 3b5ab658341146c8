package disk

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/partition/gpt"
)

// standIn is a stand-in for the EFI binary: the layout does not care what
// the bytes are, only that they come back unchanged. It has zero runs, as
// real PE images do, to exercise the sparse writer.
func standIn(n int) []byte {
	b := make([]byte, n)
	copy(b, "MZ")
	for i := 4096; i < n; i++ {
		if (i/8192)%3 != 0 {
			b[i] = byte(i ^ i>>8)
		}
	}
	return b
}

func opts(seed string) Options {
	return Options{
		DiskGUID: DeriveGUID([]byte(seed), "disk"),
		PartGUID: DeriveGUID([]byte(seed), "esp"),
		VolumeID: DeriveVolumeID([]byte(seed)),
		Time:     time.Unix(1700000000, 0),
	}
}

func TestLayoutReadBack(t *testing.T) {
	efi := standIn(5<<20 + 4321)
	name := filepath.Join(t.TempDir(), "hotpath.img")
	o := opts("a")
	l, err := Write(name, efi, o)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != GiB || l.Size != GiB {
		t.Errorf("size %d (layout %d), want 1 GiB", st.Size(), l.Size)
	}
	// Sparse: allocation is about the EFI binary, not the virtual size.
	alloc := st.Sys().(*syscall.Stat_t).Blocks * 512
	if alloc > int64(len(efi))+2*MiB {
		t.Errorf("allocated %d bytes for a %d-byte EFI binary: not sparse", alloc, len(efi))
	}
	t.Logf("virtual %d, allocated %d, EFI %d", st.Size(), alloc, len(efi))

	d, err := diskfs.Open(name, diskfs.WithOpenMode(diskfs.ReadOnly))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pt, err := d.GetPartitionTable()
	if err != nil {
		t.Fatal(err)
	}
	table, ok := pt.(*gpt.Table)
	if !ok {
		t.Fatalf("partition table is %T, want GPT", pt)
	}
	if !strings.EqualFold(table.GUID, o.DiskGUID) {
		t.Errorf("disk GUID %s, want %s", table.GUID, o.DiskGUID)
	}
	if len(table.Partitions) != 1 {
		t.Fatalf("%d partitions", len(table.Partitions))
	}
	p := table.Partitions[0]
	if p.Type != gpt.EFISystemPartition || !strings.EqualFold(string(p.Type), "C12A7328-F81F-11D2-BA4B-00A0C93EC93B") {
		t.Errorf("partition type %s, want the ESP type", p.Type)
	}
	if !strings.EqualFold(p.GUID, o.PartGUID) {
		t.Errorf("partition GUID %s, want %s", p.GUID, o.PartGUID)
	}
	if int64(p.Start)*512 != l.ESPStart || int64(p.Size) != l.ESPSize {
		t.Errorf("partition at %d+%d, layout says %d+%d", p.Start*512, p.Size, l.ESPStart, l.ESPSize)
	}
	fs, err := d.GetFilesystem(1)
	if err != nil {
		t.Fatalf("ESP file system: %v", err)
	}
	f, err := fs.OpenFile("/EFI/BOOT/BOOTX64.EFI", os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, efi) {
		t.Errorf("BOOTX64.EFI: read %d bytes, not the %d written", len(got), len(efi))
	}

	// sgdisk (Debian gdisk), when installed, must find the GPT sound.
	if _, err := exec.LookPath("sgdisk"); err == nil {
		out, err := exec.Command("sgdisk", "-v", name).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "No problems found") {
			t.Errorf("sgdisk -v: %v\n%s", err, out)
		}
	}
}

func TestReproducible(t *testing.T) {
	dir := t.TempDir()
	efi := standIn(1 << 20)
	sum := func(name string, o Options, efi []byte) string {
		t.Helper()
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
	a := sum("a.img", opts("x"), efi)
	if b := sum("b.img", opts("x"), efi); a != b {
		t.Fatalf("same inputs, different disks: %s %s", a, b)
	}
	if a == sum("c.img", opts("y"), efi) {
		t.Fatal("other identifiers, same disk")
	}
	efi2 := append([]byte(nil), efi...)
	efi2[len(efi2)-1] ^= 1
	if a == sum("d.img", opts("x"), efi2) {
		t.Fatal("other EFI binary, same disk")
	}
}

func TestHashMatchesPlainSHA256(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sparse")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(10 * MiB)
	f.WriteAt([]byte("data in the middle"), 3*MiB+17)
	f.WriteAt([]byte("at the end"), 10*MiB-10)
	f.Close()
	b, _ := os.ReadFile(p)
	want := sha256.Sum256(b)
	d, err := Hash(p)
	if err != nil {
		t.Fatal(err)
	}
	if d.SHA256 != hex.EncodeToString(want[:]) || d.Size != 10*MiB {
		t.Errorf("Hash = %+v, want sha %x", d, want)
	}
}

func TestSizes(t *testing.T) {
	for _, tc := range []struct {
		efi, minSize, wantESP, wantDisk int64
	}{
		{efi: 1, wantESP: 64 * MiB, wantDisk: GiB},
		{efi: 16 * MiB, wantESP: 64 * MiB, wantDisk: GiB},
		{efi: 40*MiB + 1, wantESP: 81 * MiB, wantDisk: GiB},
		{efi: 1, minSize: 3*GiB - 5, wantESP: 64 * MiB, wantDisk: 3 * GiB},
	} {
		if got := ESPSize(tc.efi); got != tc.wantESP {
			t.Errorf("ESPSize(%d) = %d, want %d", tc.efi, got, tc.wantESP)
		}
		if tc.efi > 1<<20 {
			continue // sizes above are checked without writing big files
		}
		o := opts("s")
		o.MinSize = tc.minSize
		l, err := Write(filepath.Join(t.TempDir(), "d.img"), standIn(int(tc.efi)), o)
		if err != nil {
			t.Fatal(err)
		}
		if l.Size != tc.wantDisk {
			t.Errorf("efi %d min %d: disk %d, want %d", tc.efi, tc.minSize, l.Size, tc.wantDisk)
		}
	}
}

func TestDeriveGUID(t *testing.T) {
	a := DeriveGUID([]byte("seed"), "disk")
	if a != DeriveGUID([]byte("seed"), "disk") {
		t.Fatal("not a function of its inputs")
	}
	if a == DeriveGUID([]byte("seed"), "esp") || a == DeriveGUID([]byte("seed2"), "disk") {
		t.Fatal("collisions between purposes or seeds")
	}
	if len(a) != 36 || a[14] != '8' || !strings.ContainsRune("89AB", rune(a[19])) {
		t.Errorf("%s is not a version-8 RFC 4122 UUID", a)
	}
}

func TestRefused(t *testing.T) {
	dir := t.TempDir()
	if _, err := Write(filepath.Join(dir, "x"), nil, opts("a")); err == nil {
		t.Error("empty EFI binary accepted")
	}
	if _, err := Write(filepath.Join(dir, "x"), []byte("x"), Options{}); err == nil || !strings.Contains(err.Error(), "GUID") {
		t.Errorf("missing GUIDs: %v", err)
	}
}
