package vm

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The QEMU arguments of each boot mode: SeaBIOS has no pflash, HTTP boot
// has the firmware and a NIC with the boot file but no disk.
func TestArgsBootModes(t *testing.T) {
	tftp := t.TempDir()
	if err := os.WriteFile(filepath.Join(tftp, "BOOTX64.EFI"), []byte("MZ"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		cfg         Config
		want, never []string
	}{
		{"uefi disk", Config{Disk: "d.img"},
			[]string{"if=pflash", "file=d.img"}, []string{"bootfile="}},
		{"bios disk", Config{Disk: "d.img", Firmware: "bios"},
			[]string{"file=d.img", "virtio-blk-pci"}, []string{"if=pflash"}},
		{"http boot", Config{UserNet: &UserNet{BootFile: "http://10.0.2.2:8000/x.efi", HostFwd: []string{"tcp:127.0.0.1:8080-:8080"}}},
			[]string{"if=pflash", "user,id=net0,ipv6-net=" + UserNetPrefix6 + ",bootfile=http://10.0.2.2:8000/x.efi,hostfwd=tcp:127.0.0.1:8080-:8080", "bootindex=0",
				"name=opt/org.tianocore/IPv4PXESupport,string=n"},
			[]string{"virtio-blk-pci", "-kernel", "tap,"}},
		{"pxe", Config{UserNet: &UserNet{TFTPDir: tftp, BootFile: "BOOTX64.EFI"}},
			[]string{"if=pflash", "user,id=net0,ipv6-net=" + UserNetPrefix6 + ",tftp=" + tftp + ",bootfile=BOOTX64.EFI", "bootindex=0",
				"name=opt/org.tianocore/IPv6PXESupport,string=n"},
			[]string{"virtio-blk-pci", "-kernel", "IPv4PXESupport"}},
		{"make run's network without egress", Config{Disk: "d.img", UserNet: &UserNet{Restrict: true, HostFwd: []string{"tcp:127.0.0.1:8080-:8080"}}},
			[]string{"file=d.img", "user,id=net0,ipv6-net=" + UserNetPrefix6 + ",restrict=on,hostfwd=tcp:127.0.0.1:8080-:8080"},
			[]string{"bootfile=", "tap,", "romfile=,bootindex=0"}},
	} {
		tc.cfg.CPUs, tc.cfg.MemoryMB, tc.cfg.Accel = 1, 256, "tcg"
		if err := tc.cfg.checkBootMode(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		args := strings.Join(tc.cfg.Args("vars.fd", "qmp.sock"), " ")
		for _, w := range tc.want {
			if !strings.Contains(args, w) {
				t.Errorf("%s: no %q in %s", tc.name, w, args)
			}
		}
		for _, w := range tc.never {
			if strings.Contains(args, w) {
				t.Errorf("%s: %q in %s", tc.name, w, args)
			}
		}
	}
}

func TestCheckBootModeRefuses(t *testing.T) {
	tftp := t.TempDir()
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"bios on arm64", Config{Disk: "d", Firmware: "bios", Arch: "arm64"}},
		{"bios without a disk", Config{Firmware: "bios", UserNet: &UserNet{BootFile: "http://x/y"}}},
		{"unknown firmware", Config{Disk: "d", Firmware: "coreboot"}},
		{"two NICs", Config{Disk: "d", Tap: "tap0", UserNet: &UserNet{}}},
		{"boot file not a URL", Config{UserNet: &UserNet{BootFile: "BOOTX64.EFI"}}},
		{"pxe boot file not in the TFTP root", Config{UserNet: &UserNet{TFTPDir: tftp, BootFile: "BOOTX64.EFI"}}},
		{"pxe boot file a URL", Config{UserNet: &UserNet{TFTPDir: tftp, BootFile: "http://10.0.2.2/BOOTX64.EFI"}}},
		{"comma in the TFTP root", Config{UserNet: &UserNet{TFTPDir: tftp + ",x", BootFile: "BOOTX64.EFI"}}},
	} {
		if err := tc.cfg.checkBootMode(); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	if !slices.Contains((&UserNet{}).args(), "user,id=net0,ipv6-net="+UserNetPrefix6) {
		t.Error("a UserNet without boot file or forwards is not plain user networking")
	}
}
