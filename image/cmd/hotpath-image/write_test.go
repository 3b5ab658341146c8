package main

import (
	"bytes"
	"crypto/rand"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestWriteRefusesNonBlockTargets(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "hotpath.img")
	os.WriteFile(img, make([]byte, 4096), 0o644)
	for _, tc := range []struct{ dev, want string }{
		{img, "not a block device"},
		{"/dev/null", "not a block device"},
		{filepath.Join(dir, "missing"), "no such file"},
	} {
		err := writeCmd([]string{"-disk", img, "-device", tc.dev}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("write -device %s: %v, want %q", tc.dev, err, tc.want)
		}
	}
	if err := writeCmd([]string{"-disk", img}, io.Discard, io.Discard); err == nil {
		t.Error("write without -device succeeded")
	}
}

// On a loop device (root, losetup): the image is written and read back;
// a device smaller than the image and a mounted one are refused, and the
// mounted one is left as it was.
func TestWriteLoopDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for loop devices")
	}
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "hotpath.img")
	data := make([]byte, 8<<20)
	rand.Read(data[:1<<20]) // the rest a hole, written as zeros
	os.WriteFile(img, data, 0o644)
	loop := func(size int64) string {
		t.Helper()
		back := filepath.Join(dir, "back"+string(rune('a'+size%26)))
		f, _ := os.Create(back)
		f.Truncate(size)
		// Old contents where the image has zeros: they must be overwritten.
		f.WriteAt(bytes.Repeat([]byte{0xee}, 1<<20), 4<<20)
		f.Close()
		out, err := exec.Command("losetup", "-f", "--show", back).Output()
		if err != nil {
			t.Skipf("losetup: %v", err)
		}
		dev := strings.TrimSpace(string(out))
		t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
		return dev
	}
	dev := loop(9 << 20)
	var out bytes.Buffer
	if err := writeCmd([]string{"-disk", img, "-device", dev}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadFull(f, got)
	f.Close()
	if !bytes.Equal(got, data) {
		t.Error("the device does not hold the image")
	}
	if !strings.Contains(out.String(), "wrote and verified") {
		t.Errorf("output %q", out.String())
	}

	small := loop(7 << 20)
	if err := writeCmd([]string{"-disk", img, "-device", small}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "smaller") {
		t.Errorf("a device smaller than the image: %v", err)
	}

	// Claimed by another opener with O_EXCL (as a file system mounted in
	// another mount namespace, md, or a partitioning tool holds it) but
	// mounted nowhere this process can see: every check passes, and only
	// the exclusive open stops the write. The device keeps its contents.
	claimed := loop(10 << 20)
	holder, err := os.OpenFile(claimed, os.O_RDONLY|unix.O_EXCL, 0)
	if err != nil {
		t.Fatalf("claim %s: %v", claimed, err)
	}
	err = writeCmd([]string{"-disk", img, "-device", claimed}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "exclusively") {
		t.Errorf("a device another opener holds exclusively: %v, want the exclusive open refused", err)
	}
	old := make([]byte, 8<<20)
	if _, err := holder.ReadAt(old, 0); err != nil {
		t.Fatal(err)
	}
	holder.Close()
	if !bytes.Equal(old[:1<<20], make([]byte, 1<<20)) || !bytes.Equal(old[4<<20:5<<20], bytes.Repeat([]byte{0xee}, 1<<20)) {
		t.Error("the claimed device was written to")
	}

	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip(err)
	}
	mounted := loop(16 << 20)
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	if out, err := exec.Command("mkfs.ext4", "-q", mounted).CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext4: %v %s", err, out)
	}
	if out, err := exec.Command("mount", mounted, mnt).CombinedOutput(); err != nil {
		t.Skipf("mount: %v %s", err, out)
	}
	defer exec.Command("umount", mnt).Run()
	err = writeCmd([]string{"-disk", img, "-device", mounted}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "is mounted on "+mnt) {
		t.Errorf("a mounted device: %v", err)
	}
}
