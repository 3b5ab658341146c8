package netboot

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/image/disk"
	"github.com/hotpath-dev/hotpath/image/manifest"
)

// built writes a disk holding efi and its manifest into a new directory,
// as image.Build does.
func built(t *testing.T, efi []byte) string {
	t.Helper()
	dir := t.TempDir()
	seed := []byte("netboot")
	l, err := disk.Write(filepath.Join(dir, "hotpath.img"), efi, disk.Options{
		DiskGUID: disk.DeriveGUID(seed, "d"), PartGUID: disk.DeriveGUID(seed, "p"), VolumeID: 7, Time: time.Unix(0, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(efi)
	m := &manifest.Manifest{Format: manifest.Format, Architecture: "amd64",
		EFI:  manifest.Blob{SHA256: hex.EncodeToString(h[:]), Size: int64(len(efi))},
		Disk: manifest.Disk{File: "hotpath.img", ESP: manifest.ESP{BootPath: "/" + disk.BootPath, BootPathOff: l.EFIStart}},
	}
	if err := m.WriteFile(filepath.Join(dir, "manifest.json")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLoadServe(t *testing.T) {
	efi := []byte("MZ" + strings.Repeat("hotpath efi ", 50000))
	im, err := Load(built(t, efi))
	if err != nil {
		t.Fatal(err)
	}
	if im.Name != "BOOTX64.EFI" || string(im.EFI) != string(efi) {
		t.Fatalf("loaded %s, %d bytes", im.Name, len(im.EFI))
	}
	srv := httptest.NewServer(im.Handler())
	defer srv.Close()
	get := func(path, rng string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	if resp, b := get("/BOOTX64.EFI", ""); resp.StatusCode != 200 || string(b) != string(efi) {
		t.Errorf("GET /BOOTX64.EFI: %s, %d bytes", resp.Status, len(b))
	}
	if resp, b := get("/BOOTX64.EFI", "bytes=2-8"); resp.StatusCode != 206 || string(b) != string(efi[2:9]) {
		t.Errorf("range: %s %q", resp.Status, b)
	}
	if resp, b := get("/boot.ipxe", ""); resp.StatusCode != 200 || !strings.HasPrefix(string(b), "#!ipxe\n") ||
		!strings.Contains(string(b), "chain "+srv.URL+"/BOOTX64.EFI") {
		t.Errorf("boot.ipxe: %s\n%s", resp.Status, b)
	}
	if resp, _ := get("/hotpath.img", ""); resp.StatusCode != 404 {
		t.Errorf("GET /hotpath.img: %s, want 404 (only the EFI binary is served)", resp.Status)
	}

	tftp := filepath.Join(t.TempDir(), "tftp")
	if err := im.WriteTFTP(tftp, "http://192.0.2.1:8000"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(tftp, "BOOTX64.EFI")); string(b) != string(efi) {
		t.Error("TFTP root: BOOTX64.EFI is not the EFI binary")
	}
	if b, _ := os.ReadFile(filepath.Join(tftp, "boot.ipxe")); !strings.Contains(string(b), "chain http://192.0.2.1:8000/BOOTX64.EFI") {
		t.Errorf("TFTP root boot.ipxe: %s", b)
	}
}

// A disk whose EFI binary is not the manifest's is refused.
func TestLoadRefusesMismatch(t *testing.T) {
	efi := []byte("MZ" + strings.Repeat("x", 9000))
	dir := built(t, efi)
	m, _ := manifest.ReadFile(filepath.Join(dir, "manifest.json"))
	f, _ := os.OpenFile(filepath.Join(dir, "hotpath.img"), os.O_WRONLY, 0)
	f.WriteAt([]byte("y"), m.Disk.ESP.BootPathOff+100)
	f.Close()
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "not from one build") {
		t.Errorf("Load of a changed disk: %v", err)
	}
	if _, err := Load(t.TempDir()); err == nil {
		t.Error("Load of an empty directory succeeded")
	}
}
