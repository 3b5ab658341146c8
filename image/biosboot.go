package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/hotpath-dev/hotpath/image/bios"
	"github.com/hotpath-dev/hotpath/image/disk"
	"github.com/hotpath-dev/hotpath/image/manifest"
)

// biosBoot is the stage between kernel and disk on amd64: GRUB's i386-pc
// boot code that loads the same EFI-stub kernel from the ESP (see package
// bios), so one disk boots under UEFI and under a legacy BIOS. arm64 is
// UEFI everywhere, and Options.UEFIOnly leaves it out on amd64; both give
// a nil result and no manifest entry.
func (b *build) biosBoot(ctx context.Context) error {
	if b.o.Arch != "amd64" || b.o.UEFIOnly {
		return nil
	}
	build := b.o.BIOS
	if build == nil {
		build = bios.Build
	}
	l, err := build(ctx, bios.Options{
		KernelPath: b.a.BootPath, ESPIndex: 1, CoreLBA: disk.BIOSBootLBA, MaxSectors: disk.BIOSBootSectors,
	})
	if err != nil {
		return err
	}
	seed := []byte(b.m.EFI.SHA256)
	b.bios = &disk.BIOSBoot{MBR: l.MBR, Core: l.Core, PartGUID: disk.DeriveGUID(seed, "hotpath bios boot")}
	b.m.Disk.BIOSBoot = &manifest.BIOSBoot{
		Index: disk.BIOSBootIndex, TypeGUID: disk.BIOSBootType, GUID: b.bios.PartGUID,
		Start: disk.BIOSBootLBA * 512, Size: disk.BIOSBootSectors * 512,
		Loader: "grub i386-pc", Package: l.Package, Version: l.Version, MkimageVersion: l.MkimageVersion,
		Modules: l.Modules, Config: l.Config,
		BootImgSHA256: l.BootImgSHA256, CoreImgSHA256: l.CoreImgSHA256,
		MBRCodeSHA256: hexSum(l.MBR), CoreSHA256: hexSum(l.Core),
	}
	b.logf("bios: %s %s core image, %d sectors at LBA %d", l.Package, l.Version, len(l.Core)/512, l.CoreLBA)
	return nil
}

func hexSum(p []byte) string {
	h := sha256.Sum256(p)
	return hex.EncodeToString(h[:])
}
