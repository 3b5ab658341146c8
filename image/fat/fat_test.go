package fat

import (
	"bytes"
	"crypto/sha256"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/fat32"
)

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>9)
	}
	// A run of zeros in the middle, as EFI binaries have.
	for i := n / 3; i < n/3+20000 && i < n; i++ {
		b[i] = 0
	}
	return b
}

func writeVolume(t *testing.T, files []File, o Options) (string, *Layout) {
	t.Helper()
	name := filepath.Join(t.TempDir(), "esp.img")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(o.Size); err != nil {
		t.Fatal(err)
	}
	l, err := Write(f, 0, files, o)
	if err != nil {
		t.Fatal(err)
	}
	return name, l
}

func TestReadBack(t *testing.T) {
	efi := payload(3<<20 + 123)
	notes := []byte("hello\n")
	o := Options{Size: 64 << 20, VolumeID: 0xC0FFEE42, Label: "HOTPATH", Time: time.Date(2024, 5, 6, 7, 8, 10, 0, time.UTC)}
	name, l := writeVolume(t, []File{
		{Path: "EFI/BOOT/BOOTX64.EFI", Data: efi},
		{Path: "NOTES.TXT", Data: notes},
		{Path: "EMPTY", Data: nil},
	}, o)
	if l.Clusters < minClusters {
		t.Fatalf("%d clusters", l.Clusters)
	}

	// Read it back with an independent implementation.
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fs, err := fat32.Read(file.New(f, true), o.Size, 0, 512)
	if err != nil {
		t.Fatalf("go-diskfs cannot read the volume: %v", err)
	}
	for p, want := range map[string][]byte{"/EFI/BOOT/BOOTX64.EFI": efi, "/NOTES.TXT": notes} {
		rf, err := fs.OpenFile(p, os.O_RDONLY)
		if err != nil {
			t.Fatalf("open %s: %v", p, err)
		}
		got, err := io.ReadAll(rf)
		if err != nil {
			t.Fatalf("read %s: %v", p, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: got %d bytes (sha %x), want %d bytes (sha %x)", p, len(got), sha256.Sum256(got), len(want), sha256.Sum256(want))
		}
	}
	// An empty file has start cluster 0 (fatgen103); go-diskfs cannot open
	// such a file, so only its directory entry is checked.
	if fi, err := fs.Stat("EMPTY"); err != nil || fi.Size() != 0 {
		t.Errorf("EMPTY: %v %v", fi, err)
	}
	if got := strings.TrimSpace(fs.Label()); got != "HOTPATH" {
		t.Errorf("label %q", got)
	}
	fi, err := fs.Stat("EFI/BOOT/BOOTX64.EFI")
	if err != nil {
		t.Fatal(err)
	}
	if !fi.ModTime().Equal(o.Time) {
		t.Errorf("mtime %v, want %v", fi.ModTime(), o.Time)
	}

	// dosfstools' checker, when installed, must find nothing to repair.
	if _, err := exec.LookPath("fsck.fat"); err == nil {
		out, err := exec.Command("fsck.fat", "-n", "-v", name).CombinedOutput()
		if err != nil {
			t.Fatalf("fsck.fat: %v\n%s", err, out)
		}
	} else {
		t.Log("fsck.fat not installed (Debian dosfstools); skipping its check")
	}
}

func TestDeterministicAndSparse(t *testing.T) {
	files := []File{{Path: "EFI/BOOT/BOOTX64.EFI", Data: payload(1 << 20)}}
	o := Options{Size: 40 << 20, VolumeID: 1, Time: time.Unix(0, 0)}
	a, _ := writeVolume(t, files, o)
	b, _ := writeVolume(t, files, o)
	ba, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ba, bb) {
		t.Fatal("two volumes from the same input differ")
	}
	o.VolumeID = 2
	c, _ := writeVolume(t, files, o)
	bc, _ := os.ReadFile(c)
	if bytes.Equal(ba, bc) {
		t.Fatal("volume id does not reach the volume")
	}
	// Epoch 0 is before 1980: clamped to 1980-01-01, not wrapped.
	d, tod := stamp(time.Unix(0, 0))
	if d != 1<<5|1 || tod != 0 {
		t.Errorf("stamp(epoch) = %#x %#x", d, tod)
	}
}

func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []File
		size  int64
		want  string
	}{
		{"long name", []File{{Path: "EFI/BOOT/bootx64.efi"}}, 64 << 20, "8.3"},
		{"too long", []File{{Path: "ABCDEFGHIJ.EFI"}}, 64 << 20, "8.3"},
		{"absolute", []File{{Path: "/EFI"}}, 64 << 20, "bad path"},
		{"twice", []File{{Path: "A"}, {Path: "A"}}, 64 << 20, "twice"},
		{"file as dir", []File{{Path: "A"}, {Path: "A/B"}}, 64 << 20, "twice"},
		{"too small for FAT32", []File{{Path: "A"}}, 16 << 20, "FAT32 needs"},
		{"does not fit", []File{{Path: "A", Data: make([]byte, 40<<20)}}, 36 << 20, "files need"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Write(discard{}, 0, tc.files, Options{Size: tc.size})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

type discard struct{}

func (discard) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }
