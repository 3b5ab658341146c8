package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/image/machine"
	"github.com/hotpath-dev/hotpath/image/manifest"
)

// -firmware bios boots QEMU's SeaBIOS: no pflash drives, the disk still
// attached read-only; uefi keeps OVMF.
func TestQEMUArgsFirmware(t *testing.T) {
	for _, tc := range []struct {
		fw     string
		pflash bool
	}{{"uefi", true}, {"bios", false}} {
		v := vm{Machine: machine.AMD64, Firmware: tc.fw, Disk: "d.img", OVMFCode: "c.fd", OVMFVars: "v.fd", Accel: "tcg", CPUs: 1, MemoryMiB: 256,
			HostAddr: "127.0.0.1", HostPort: 8080, GuestPort: 8080}
		args := strings.Join(qemuArgs(v), " ")
		if strings.Contains(args, "if=pflash") != tc.pflash {
			t.Errorf("-firmware %s: pflash %v in %s", tc.fw, !tc.pflash, args)
		}
		if !strings.Contains(args, "readonly=on,file=d.img") {
			t.Errorf("-firmware %s: disk not attached read-only: %s", tc.fw, args)
		}
	}
}

func TestCheckFirmware(t *testing.T) {
	dir := t.TempDir()
	disk := filepath.Join(dir, "hotpath.img")
	os.WriteFile(disk, nil, 0o644)
	m := &manifest.Manifest{Format: manifest.Format, Architecture: "amd64"}
	m.WriteFile(filepath.Join(dir, "manifest.json"))
	for _, tc := range []struct {
		name string
		v    vm
		ok   bool
	}{
		{"uefi", vm{Machine: machine.AMD64, Firmware: "uefi", Disk: disk}, true},
		{"bios on arm64", vm{Machine: machine.ARM64, Firmware: "bios", Disk: disk}, false},
		{"unknown", vm{Machine: machine.AMD64, Firmware: "coreboot", Disk: disk}, false},
		{"bios, UEFI-only disk", vm{Machine: machine.AMD64, Firmware: "bios", Disk: disk}, false},
		{"bios, no manifest", vm{Machine: machine.AMD64, Firmware: "bios", Disk: filepath.Join(t.TempDir(), "x.img")}, true},
	} {
		if err := tc.v.checkFirmware(); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	m.Disk.BIOSBoot = &manifest.BIOSBoot{Index: 2}
	m.WriteFile(filepath.Join(dir, "manifest.json"))
	if err := (&vm{Machine: machine.AMD64, Firmware: "bios", Disk: disk}).checkFirmware(); err != nil {
		t.Errorf("bios, dual-boot disk: %v", err)
	}
}
