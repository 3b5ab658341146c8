package image

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFirmwareEntries(t *testing.T) {
	dir := t.TempDir()
	ddp := filepath.Join(dir, "intel/ice/ddp")
	if err := os.MkdirAll(ddp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ddp, "ice-1.3.36.0.pkg"), []byte("DDP"), 0o644); err != nil {
		t.Fatal(err)
	}
	// linux-firmware's layout: ice.pkg is a link to the versioned file.
	if err := os.Symlink("ice-1.3.36.0.pkg", filepath.Join(ddp, "ice.pkg")); err != nil {
		t.Fatal(err)
	}
	es, files, err := FirmwareEntries(dir)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range es {
		paths = append(paths, e.Path)
	}
	want := "/lib /lib/firmware /lib/firmware/intel /lib/firmware/intel/ice /lib/firmware/intel/ice/ddp " +
		"/lib/firmware/intel/ice/ddp/ice-1.3.36.0.pkg /lib/firmware/intel/ice/ddp/ice.pkg"
	if got := strings.Join(paths, " "); got != want {
		t.Errorf("entries %s\nwant %s", got, want)
	}
	if len(files) != 2 || files[1].Path != "/lib/firmware/intel/ice/ddp/ice.pkg" || files[1].Size != 3 ||
		files[1].SHA256 != sum([]byte("DDP")) {
		t.Errorf("manifest files %+v", files)
	}
	if _, _, err := FirmwareEntries(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no file") {
		t.Errorf("empty directory: %v, want an error", err)
	}
	if es, files, err := FirmwareEntries(""); es != nil || files != nil || err != nil {
		t.Errorf("no -firmware: %v %v %v", es, files, err)
	}
}
