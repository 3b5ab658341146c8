// Package bios makes the appliance's disk bootable by a legacy BIOS as well
// as by UEFI: GRUB's i386-pc boot code in the protective MBR and GRUB's
// core image in a GPT BIOS boot partition, which loads the very same kernel
// file from the EFI system partition. An x86 EFI-stub kernel is also a
// bzImage, so one file, \EFI\BOOT\BOOTX64.EFI, is booted either way; its
// built-in initramfs and command line come with it.
//
// # Why GRUB and not SYSLINUX
//
// Both are in Debian. GRUB (grub-pc-bin) was chosen because:
//
//   - It leaves the ESP alone. SYSLINUX boots from a FAT file system by
//     putting ldlinux.sys (and ldlinux.c32) into it and rewriting the
//     volume boot record with the sector list of ldlinux.sys, which only
//     its installer (or a reimplementation of it) can do, after our FAT
//     writer has finished. GRUB's core image lives in its own partition
//     and its boot sector is a 440-byte block with two fields to fill in
//     (Patch), so the FAT the UEFI path boots stays byte for byte what
//     package fat wrote.
//   - It is maintained: GRUB 2.06 gets Debian security updates; SYSLINUX's
//     last release is 6.03 (2014) and Debian ships a 2019 snapshot of an
//     unreleased 6.04.
//   - grub-mkimage is deterministic (same modules and configuration, same
//     bytes: checked by TestMkimageReproducible), so the disk stays a
//     function of its inputs.
//
// The cost: GRUB's linux loader prepends BOOT_IMAGE=<path> to the command
// line it passes, so /proc/cmdline under BIOS ends in
// "BOOT_IMAGE=/EFI/BOOT/BOOTX64.EFI" after the built-in words; nothing the
// init reads changes (it reads hotpath.* words only).
//
// The protective MBR's single 0xEE entry stays non-active, as the UEFI
// specification requires; a few old BIOSes refuse a disk with no active
// MBR partition, and a few UEFI firmwares refuse a GPT disk whose
// protective entry is active, so hotpath follows the specification.
package bios

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Debian's packages that provide the loader.
const (
	// Package holds boot.img, the i386-pc modules and the images
	// grub-mkimage assembles (Dir).
	Package = "grub-pc-bin"
	// MkimagePackage holds grub-mkimage.
	MkimagePackage = "grub-common"
	// Dir is where Package installs the i386-pc files.
	Dir = "/usr/lib/grub/i386-pc"
)

// Modules are built into the core image, in this order (grub-mkimage adds
// their dependencies): the BIOS disk driver, the GPT and FAT readers, the
// Linux loader and boot command, and the serial terminal, so that an error
// reaches the serial console EC2's get-console-output reads.
var Modules = []string{"biosdisk", "part_gpt", "fat", "linux", "boot", "serial", "terminal"}

// Offsets in GRUB 2's boot.img and diskboot.img (grub-core/boot/i386/pc/
// boot.S and diskboot.S, include/grub/i386/pc/boot.h), stable since 2.00.
const (
	sector = 512
	// CodeSize is the part of the MBR the boot code occupies: everything
	// before the disk signature (440) and the partition table (446).
	CodeSize = 440
	// bpbStart..bpbEnd is the BIOS parameter block space boot.img skips
	// over; grub-install keeps the disk's own bytes there.
	bpbStart, bpbEnd = 0x03, 0x5a
	// kernelSector is the 64-bit LBA of core.img's first sector.
	kernelSector = 0x5c
	// driveCheck is a 2-byte jump over the code that trusts the BIOS's
	// boot drive number only when it looks like a hard disk; grub-install
	// turns it into two NOPs for a hard disk (a few BIOSes pass 0x00).
	driveCheck = 0x66
	// blocklist is diskboot.img's first (and, for a contiguous core,
	// only) block list entry: start LBA (8 bytes), sector count (2),
	// load segment (2), in the last 12 bytes of its sector.
	blocklist = sector - 12
	// loadSegment is where diskboot loads the rest of core.img:
	// GRUB_BOOT_I386_PC_KERNEL_SEG (0x800) plus one sector.
	loadSegment = 0x820
)

// Config is the configuration built into the core image for a kernel at
// kernelPath (relative to the ESP's root) on partition espIndex of the
// boot disk. GRUB's rescue parser runs it before anything else; a kernel
// that boots never returns to it.
func Config(kernelPath string, espIndex int) string {
	return fmt.Sprintf(`serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial console
set root=(hd0,gpt%d)
linux /%s
boot
`, espIndex, strings.TrimPrefix(kernelPath, "/"))
}

// BootImageArg is the word GRUB's linux command passes to a kernel it
// loads from kernelPath: the kernel appends it to its built-in command
// line, so it is the one difference between /proc/cmdline under BIOS and
// under UEFI (whose stub passes nothing of its own).
func BootImageArg(kernelPath string) string {
	return "BOOT_IMAGE=/" + strings.TrimPrefix(kernelPath, "/")
}

// Options says where the loader will sit and what it loads.
type Options struct {
	// KernelPath is the kernel's path in the ESP, e.g. EFI/BOOT/BOOTX64.EFI.
	KernelPath string
	// ESPIndex is the ESP's GPT partition number.
	ESPIndex int
	// CoreLBA is the first sector of the BIOS boot partition, where the
	// core image is written; MaxSectors is the partition's size.
	CoreLBA, MaxSectors int64
	// Dir is the i386-pc directory; "" means Dir.
	Dir string
	// Mkimage is the grub-mkimage command; "" means from PATH.
	Mkimage string
	// Version returns a Debian package's installed version; nil means
	// dpkg-query.
	Version func(ctx context.Context, pkg string) (string, error)
}

// Loader is the BIOS boot code, patched for its place on one disk.
type Loader struct {
	// MBR is the MBR's first CodeSize bytes; Core is the core image padded
	// to whole sectors, to be written at CoreLBA.
	MBR, Core []byte
	CoreLBA   int64
	// Config is the configuration built into Core.
	Config string
	// Modules are the GRUB modules named to grub-mkimage.
	Modules []string
	// Package and Version identify grub-pc-bin; MkimageVersion is
	// grub-common's.
	Package, Version, MkimageVersion string
	// BootImgSHA256 is boot.img as installed, CoreImgSHA256 the core image
	// as grub-mkimage made it (both before patching).
	BootImgSHA256, CoreImgSHA256 string
}

// Build makes the core image with grub-mkimage, reads boot.img and patches
// both for o.CoreLBA. It needs Package and MkimagePackage installed
// (image/deps.sh build).
func Build(ctx context.Context, o Options) (*Loader, error) {
	if o.Dir == "" {
		o.Dir = Dir
	}
	if o.Mkimage == "" {
		o.Mkimage = "grub-mkimage"
	}
	if o.Version == nil {
		o.Version = dpkgVersion
	}
	bootImg, err := os.ReadFile(filepath.Join(o.Dir, "boot.img"))
	if err != nil {
		return nil, fmt.Errorf("bios: %w (install %s: image/deps.sh build)", err, Package)
	}
	work, err := os.MkdirTemp("", "hotpath-bios-")
	if err != nil {
		return nil, fmt.Errorf("bios: %w", err)
	}
	defer os.RemoveAll(work)
	cfg := Config(o.KernelPath, o.ESPIndex)
	cfgPath, corePath := filepath.Join(work, "embed.cfg"), filepath.Join(work, "core.img")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, fmt.Errorf("bios: %w", err)
	}
	args := append([]string{"-O", "i386-pc", "-d", o.Dir, "-o", corePath, "-c", cfgPath, "-p", fmt.Sprintf("(hd0,gpt%d)/", o.ESPIndex)}, Modules...)
	if out, err := exec.CommandContext(ctx, o.Mkimage, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("bios: %s %s: %w: %s (install %s: image/deps.sh build)", o.Mkimage, strings.Join(args, " "), err, bytes.TrimSpace(out), MkimagePackage)
	}
	coreImg, err := os.ReadFile(corePath)
	if err != nil {
		return nil, fmt.Errorf("bios: %w", err)
	}
	mbr, core, err := Patch(bootImg, coreImg, o.CoreLBA)
	if err != nil {
		return nil, err
	}
	if n := int64(len(core)) / sector; o.MaxSectors > 0 && n > o.MaxSectors {
		return nil, fmt.Errorf("bios: core image of %d sectors does not fit the %d-sector BIOS boot partition", n, o.MaxSectors)
	}
	l := &Loader{
		MBR: mbr, Core: core, CoreLBA: o.CoreLBA, Config: cfg, Modules: Modules, Package: Package,
		BootImgSHA256: sum(bootImg), CoreImgSHA256: sum(coreImg),
	}
	if l.Version, err = o.Version(ctx, Package); err != nil {
		return nil, err
	}
	if l.MkimageVersion, err = o.Version(ctx, MkimagePackage); err != nil {
		return nil, err
	}
	return l, nil
}

// Patch is what grub-install does for a core image embedded in a BIOS
// boot partition at coreLBA: boot.img learns where core.img starts and
// that it boots from a hard disk; core.img's first sector (diskboot) learns
// where the rest of it is. Patch returns the MBR's first CodeSize bytes
// (with the BIOS parameter block space zero, as on a fresh disk) and the
// core image padded to whole sectors. Reed-Solomon recovery codes, which
// grub-install adds against other programs overwriting the embedding
// area, are left out: nothing else writes this partition.
func Patch(bootImg, coreImg []byte, coreLBA int64) (mbr, core []byte, err error) {
	if len(bootImg) != sector || binary.LittleEndian.Uint16(bootImg[510:]) != 0xaa55 {
		return nil, nil, errors.New("bios: boot.img is not a 512-byte boot sector")
	}
	if bootImg[driveCheck] != 0xeb {
		return nil, nil, fmt.Errorf("bios: boot.img has %#x, not a short jump, at the drive check: not GRUB 2's boot.img", bootImg[driveCheck])
	}
	if len(coreImg) < 2*sector {
		return nil, nil, fmt.Errorf("bios: core image of %d bytes is too short", len(coreImg))
	}
	if coreLBA < 1 {
		return nil, nil, fmt.Errorf("bios: core image at LBA %d", coreLBA)
	}
	nsec := (len(coreImg) + sector - 1) / sector
	if nsec-1 > 0xffff {
		return nil, nil, fmt.Errorf("bios: core image of %d sectors: too large for one block list", nsec)
	}
	bl := coreImg[blocklist:sector]
	// grub-mkimage writes the default list: the rest right after (LBA 2
	// for a core at LBA 1), nsec-1 sectors, at the load segment.
	if got := binary.LittleEndian.Uint16(bl[10:]); got != loadSegment {
		return nil, nil, fmt.Errorf("bios: core image's block list has load segment %#x, want %#x: not an i386-pc disk core image", got, loadSegment)
	}
	mbr = make([]byte, CodeSize)
	copy(mbr, bootImg[:CodeSize])
	clear(mbr[bpbStart:bpbEnd])
	binary.LittleEndian.PutUint64(mbr[kernelSector:], uint64(coreLBA))
	mbr[driveCheck], mbr[driveCheck+1] = 0x90, 0x90

	core = make([]byte, nsec*sector)
	copy(core, coreImg)
	bl = core[blocklist:sector]
	binary.LittleEndian.PutUint64(bl[0:], uint64(coreLBA+1))
	binary.LittleEndian.PutUint16(bl[8:], uint16(nsec-1))
	return mbr, core, nil
}

func dpkgVersion(ctx context.Context, pkg string) (string, error) {
	out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Version}", pkg).Output()
	if err != nil {
		return "", fmt.Errorf("bios: version of %s: %w (install it: image/deps.sh build)", pkg, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
