package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hotpath-dev/hotpath/image/disk"
	"golang.org/x/sys/unix"
)

// target is a block device checked for writing: what it is and what the
// kernel says uses it.
type target struct {
	Path         string
	Major, Minor uint32
	Size         int64
}

// mountinfo and sysBlock are where the kernel says what is mounted and
// which block devices are partitions of which; tests replace them.
var (
	mountinfo = "/proc/self/mountinfo"
	swaps     = "/proc/swaps"
	sysBlock  = "/sys/dev/block"
)

// writeCmd writes a built disk onto a block device (a server's disk, from
// a rescue system) and reads it back to verify it: the same bytes as dd,
// with the checks dd does not make.
func writeCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("write", flag.ContinueOnError)
	fs.SetOutput(stderr)
	img := fs.String("disk", "out/hotpath.img", "the disk `image` to write")
	dev := fs.String("device", "", "the block `device` to overwrite, e.g. /dev/nvme0n1 or /dev/sda (the whole disk, not a partition)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: hotpath-image write -device /dev/X [-disk out/hotpath.img]\n\nOverwrites the whole block device with the image, then reads it back and compares SHA-256.\nRefuses anything but a block device, a device that is mounted, used as swap or held by\nanother device (LVM, md), a partition, and a device smaller than the image.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dev == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("-device is required, and nothing else")
	}
	t, err := checkTarget(*dev)
	if err != nil {
		return err
	}
	d, err := disk.Hash(*img)
	if err != nil {
		return err
	}
	if d.Size > t.Size {
		return fmt.Errorf("%s is %d bytes, smaller than the %d-byte image", t.Path, t.Size, d.Size)
	}
	fmt.Fprintf(stderr, "write: %s (%d bytes, sha256 %s) -> %s (%d bytes)\n", *img, d.Size, d.SHA256, t.Path, t.Size)
	// O_EXCL on a block device: the kernel refuses it while the device is
	// mounted or claimed, closing the gap after the checks above.
	f, err := os.OpenFile(t.Path, os.O_RDWR|unix.O_EXCL, 0)
	if err != nil {
		return fmt.Errorf("open %s exclusively: %w (mounted or in use?)", t.Path, err)
	}
	defer f.Close()
	if err := copyImage(f, *img, d.Size); err != nil {
		return fmt.Errorf("write %s: %w", t.Path, err)
	}
	got, err := readBack(f, d.Size)
	if err != nil {
		return fmt.Errorf("verify %s: %w", t.Path, err)
	}
	if got != d.SHA256 {
		return fmt.Errorf("verify %s: read back sha256 %s, the image is %s: the device did not keep what was written", t.Path, got, d.SHA256)
	}
	fmt.Fprintf(stdout, "wrote and verified %s: %d bytes, sha256 %s\n", t.Path, d.Size, got)
	return nil
}

// checkTarget refuses a path that is not a whole, unused block device.
func checkTarget(path string) (*target, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, fmt.Errorf("-device %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return nil, fmt.Errorf("-device %s is not a block device (use dd to write into a file)", path)
	}
	t := &target{Path: path, Major: unix.Major(uint64(st.Rdev)), Minor: unix.Minor(uint64(st.Rdev))}
	id := fmt.Sprintf("%d:%d", t.Major, t.Minor)
	if _, err := os.Stat(filepath.Join(sysBlock, id, "partition")); err == nil {
		return nil, fmt.Errorf("-device %s is a partition: give the whole disk (the image has its own partition table)", path)
	}
	if err := checkUnused(t, id); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("-device %s: size: %w", path, err)
	}
	t.Size = n
	return t, nil
}

// checkUnused refuses a device that is mounted, or a partition of which
// is, that is swap, or that another block device holds (LVM, md, dm-crypt).
func checkUnused(t *target, id string) error {
	parts := map[string]bool{id: true}
	name := filepath.Base(mustEval(filepath.Join(sysBlock, id)))
	if ents, err := os.ReadDir(filepath.Join(sysBlock, id)); err == nil {
		for _, e := range ents {
			if b, err := os.ReadFile(filepath.Join(sysBlock, id, e.Name(), "dev")); err == nil && strings.HasPrefix(e.Name(), name) {
				parts[strings.TrimSpace(string(b))] = true
			}
			if h, _ := os.ReadDir(filepath.Join(sysBlock, id, e.Name(), "holders")); len(h) > 0 {
				return fmt.Errorf("-device %s: partition %s is held by %s (LVM, md or dm-crypt): release it first", t.Path, e.Name(), h[0].Name())
			}
		}
	}
	if h, _ := os.ReadDir(filepath.Join(sysBlock, id, "holders")); len(h) > 0 {
		return fmt.Errorf("-device %s is held by %s (LVM, md or dm-crypt): release it first", t.Path, h[0].Name())
	}
	mi, err := os.Open(mountinfo)
	if err != nil {
		return fmt.Errorf("cannot tell whether %s is mounted: %w", t.Path, err)
	}
	defer mi.Close()
	sc := bufio.NewScanner(mi)
	for sc.Scan() {
		// mountinfo: id parent major:minor root mountpoint ...
		f := strings.Fields(sc.Text())
		if len(f) > 4 && parts[f[2]] {
			return fmt.Errorf("-device %s: %s (device %s) is mounted on %s: unmount it first", t.Path, name, f[2], f[4])
		}
	}
	if b, err := os.ReadFile(swaps); err == nil {
		for _, line := range strings.Split(string(b), "\n")[1:] {
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(filepath.Base(f[0]), name) {
				return fmt.Errorf("-device %s: %s is swap: swapoff first", t.Path, f[0])
			}
		}
	}
	return sc.Err()
}

func mustEval(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// copyImage writes every byte of the image, holes as zeros (the device
// holds old data there), and syncs.
func copyImage(dst *os.File, img string, size int64) error {
	src, err := os.Open(img)
	if err != nil {
		return err
	}
	defer src.Close()
	if _, err := dst.Seek(0, io.SeekStart); err != nil {
		return err
	}
	buf := make([]byte, 4<<20)
	if n, err := io.CopyBuffer(dst, io.LimitReader(src, size), buf); err != nil {
		return err
	} else if n != size {
		return fmt.Errorf("wrote %d of %d bytes", n, size)
	}
	return dst.Sync()
}

// readBack hashes the first n bytes of the device after dropping its
// cached pages, so that the bytes come from the device, not from memory.
func readBack(f *os.File, n int64) (string, error) {
	if err := unix.IoctlSetInt(int(f.Fd()), unix.BLKFLSBUF, 0); err != nil {
		return "", fmt.Errorf("flush the buffer cache: %w", err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, n)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
