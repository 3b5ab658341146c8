package image

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"

	"github.com/hotpath-dev/hotpath/image/cpio"
	"github.com/hotpath-dev/hotpath/image/manifest"
)

// FirmwarePath is where firmware files go in the initramfs: the first
// directory the kernel's firmware loader searches (fw_path in
// drivers/base/firmware_loader/main.c), and the loader waits for the
// initramfs to be unpacked before it looks, so built-in drivers find
// their files at probe time (ice: intel/ice/ddp/ice.pkg).
const FirmwarePath = "/lib/firmware"

// FirmwareEntries are the initramfs entries of every regular file under
// dir, at FirmwarePath/<path under dir>, with the directories leading to
// them, sorted; and the files as the manifest records them. Firmware such
// as ice's DDP package is redistributable but not open source, so hotpath
// ships none: the user gives the directory (-firmware DIR). Symbolic
// links are followed, so a directory laid out like linux-firmware's
// (ice.pkg -> ice-1.3.36.0.pkg) works; anything else (a device node) is an
// error.
func FirmwareEntries(dir string) ([]cpio.Entry, []manifest.Entry, error) {
	if dir == "" {
		return nil, nil, nil
	}
	var es []cpio.Entry
	dirs := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		st, err := os.Stat(p) // follows a symbolic link
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		in := path.Join(FirmwarePath, filepath.ToSlash(rel))
		for d := path.Dir(in); d != "/" && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
		es = append(es, cpio.Entry{Path: in, Kind: cpio.File, Perm: 0o644, Data: data})
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("firmware: %w", err)
	}
	if len(es) == 0 {
		return nil, nil, fmt.Errorf("firmware: no file under %s", dir)
	}
	files := listing(es)
	for d := range dirs {
		es = append(es, cpio.Entry{Path: d, Kind: cpio.Dir, Perm: 0o755})
	}
	sort.Slice(es, func(i, j int) bool { return es[i].Path < es[j].Path })
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return es, files, nil
}
