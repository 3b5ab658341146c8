package e2e

import "testing"

func TestBuiltCmdline(t *testing.T) {
	const built = "console=ttyS0,115200n8 mitigations=off panic=10"
	for _, tc := range []struct {
		cmdline string
		want    bool
	}{
		{built, true}, // UEFI
		{built + " BOOT_IMAGE=/EFI/BOOT/BOOTX64.EFI", true}, // GRUB under BIOS
		{built + " BOOT_IMAGE=/EFI/BOOT/BOOTX64.EFI quiet", false},
		{built + " BOOT_IMAGE=/vmlinuz", false},
		{"BOOT_IMAGE=/EFI/BOOT/BOOTX64.EFI " + built, false},
		{built + " quiet", false},
		{"console=ttyS0,115200n8 mitigations=off", false},
		{built + "BOOT_IMAGE=/EFI/BOOT/BOOTX64.EFI", false},
	} {
		if got := BuiltCmdline(tc.cmdline, built); got != tc.want {
			t.Errorf("BuiltCmdline(%q) = %v, want %v", tc.cmdline, got, tc.want)
		}
	}
}
