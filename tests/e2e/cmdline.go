package e2e

import (
	"github.com/hotpath-dev/hotpath/image/bios"
	"github.com/hotpath-dev/hotpath/image/disk"
)

// BuiltCmdline says whether cmdline, the guest's /proc/cmdline, is the
// command line built into the EFI binary (built, the manifest's): exactly
// it when UEFI started the binary, or it followed by the one word GRUB's
// linux loader passes when the disk booted through legacy BIOS
// (bios.BootImageArg of the ESP's boot path). Any other word, or that
// word anywhere else, is a difference.
func BuiltCmdline(cmdline, built string) bool {
	return cmdline == built || cmdline == built+" "+bios.BootImageArg(disk.BootPath)
}
