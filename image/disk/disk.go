// Package disk writes the appliance's raw disk: a GPT with one EFI system
// partition whose FAT32 file system holds \EFI\BOOT\BOOTX64.EFI, the path
// UEFI firmware boots on removable and otherwise unconfigured disks (and the
// one EC2 boots in UEFI mode). With Options.BIOS it boots legacy BIOS too
// (EC2's .metal sizes, older dedicated servers): boot code in the
// protective MBR and a BIOS boot partition, partition 2, in the sectors
// before the ESP (package bios makes both). The ESP, its place and its
// partition number are the same either way.
//
// The disk is sparse: it is created by truncation and only blocks holding
// data are written, so a 1 GiB image allocates about as much as the EFI
// binary. Every identifier (disk GUID, partition GUID, FAT volume id) and
// every timestamp is given by the caller, so the same inputs give the same
// bytes.
package disk

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/hotpath-dev/hotpath/image/fat"
)

const (
	sector = 512
	// MiB and GiB are byte counts.
	MiB = 1 << 20
	GiB = 1 << 30
	// MinSize is EC2's minimum root volume size.
	MinSize = 1 * GiB
	// ESP starts at LBA 2048 (1 MiB), the alignment every partitioning tool uses.
	espStartLBA = 2048
	// minESP keeps a FAT32 of 512-byte clusters comfortably above its
	// 65525-cluster minimum (about 33 MiB).
	minESP = 64 * MiB
	// BootPath is where the firmware looks for the loader on x86-64;
	// BootPathAA64 is the same on arm64 (UEFI's removable-media path).
	BootPath     = "EFI/BOOT/BOOTX64.EFI"
	BootPathAA64 = "EFI/BOOT/BOOTAA64.EFI"
	// blockSize is the granularity at which zero blocks are left as holes.
	blockSize = 4096
	// BIOSBootLBA..espStartLBA-1 is the BIOS boot partition (partition
	// BIOSBootIndex), when the disk boots legacy BIOS too: the sectors
	// between the primary GPT's 128 entries (LBA 2-33) and the ESP, about
	// 1 MiB, where GRUB's core image is written (package bios).
	BIOSBootLBA     = 34
	BIOSBootSectors = espStartLBA - BIOSBootLBA
	BIOSBootIndex   = 2
	// BIOSBootType is the GPT type of a BIOS boot partition.
	BIOSBootType = string(gpt.BIOSBoot)
)

// Options fixes the disk's size and identity.
type Options struct {
	// MinSize is the least virtual size of the disk; 0 means MinSize (1 GiB).
	// The size is always a whole number of GiB (EBS volumes are).
	MinSize int64
	// DiskGUID and PartGUID identify the disk and the ESP (UUID strings).
	DiskGUID, PartGUID string
	// VolumeID is the FAT volume serial number.
	VolumeID uint32
	// Time stamps the FAT directory entries.
	Time time.Time
	// BootPath is the loader's path in the ESP; "" means BootPath (x86-64).
	BootPath string
	// BIOS, when set, makes the disk boot legacy BIOS too: its boot code
	// goes into the protective MBR and its core image into a BIOS boot
	// partition (BIOSBootIndex) before the ESP. The ESP is the same with
	// or without it.
	BIOS *BIOSBoot
}

// BIOSBoot is legacy BIOS boot code for the disk (made by package bios for
// a core image at BIOSBootLBA).
type BIOSBoot struct {
	// MBR is written over the MBR's first 440 bytes, before the disk
	// signature and the protective partition table.
	MBR []byte
	// Core is written at BIOSBootLBA; at most BIOSBootSectors sectors.
	Core []byte
	// PartGUID identifies the BIOS boot partition.
	PartGUID string
}

// Layout describes a written disk.
type Layout struct {
	Size     int64  // virtual size in bytes
	ESPStart int64  // byte offset of the ESP
	ESPSize  int64  // bytes
	EFIStart int64  // byte offset of the loader's first byte on the disk
	DiskGUID string // as written
	PartGUID string
	// BIOSStart and BIOSSize are the BIOS boot partition's byte offset and
	// size; zero when the disk boots UEFI only.
	BIOSStart, BIOSSize int64
}

// ESPSize returns the ESP size for an EFI binary of n bytes: twice the
// binary (room to grow, and for a firmware that copies it aside), rounded up
// to a MiB, never below 64 MiB.
func ESPSize(n int64) int64 {
	s := (2*n + MiB - 1) / MiB * MiB
	return max(s, minESP)
}

// Write creates the disk image at name (replacing it atomically) holding efi
// as the boot loader.
func Write(name string, efi []byte, o Options) (*Layout, error) {
	if len(efi) == 0 {
		return nil, errors.New("disk: empty EFI binary")
	}
	if o.DiskGUID == "" || o.PartGUID == "" {
		return nil, errors.New("disk: disk and partition GUIDs must be given (random ones would make the image irreproducible)")
	}
	if o.BootPath == "" {
		o.BootPath = BootPath
	}
	if err := o.BIOS.check(); err != nil {
		return nil, err
	}
	espSize := ESPSize(int64(len(efi)))
	espStart := int64(espStartLBA * sector)
	// The backup GPT takes the last 33 sectors; keep a MiB free at the end.
	need := espStart + espSize + MiB
	size := max(o.MinSize, MinSize, need)
	size = (size + GiB - 1) / GiB * GiB

	dir := filepath.Dir(name)
	tmp, err := os.CreateTemp(dir, ".hotpath-disk-*")
	if err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name()) // no-op once renamed
	}()
	if err := tmp.Truncate(size); err != nil {
		return nil, fmt.Errorf("disk: size %s: %w", tmp.Name(), err)
	}
	sw := &sparseWriter{f: tmp}

	table := &gpt.Table{
		LogicalSectorSize:  sector,
		PhysicalSectorSize: sector,
		GUID:               o.DiskGUID,
		ProtectiveMBR:      true,
		Partitions: []*gpt.Partition{{
			Index: 1,
			Start: espStartLBA,
			End:   espStartLBA + uint64(espSize/sector) - 1,
			Type:  gpt.EFISystemPartition,
			Name:  "EFI System Partition",
			GUID:  o.PartGUID,
		}},
	}
	if o.BIOS != nil {
		table.Partitions = append(table.Partitions, &gpt.Partition{
			Index: BIOSBootIndex,
			Start: BIOSBootLBA,
			End:   espStartLBA - 1,
			Type:  gpt.BIOSBoot,
			Name:  "BIOS boot partition",
			GUID:  o.BIOS.PartGUID,
		})
	}
	if err := table.Write(sw, size); err != nil {
		return nil, fmt.Errorf("disk: write GPT: %w", err)
	}
	if o.BIOS != nil {
		// The GPT writer leaves the MBR's first 446 bytes alone; the
		// core's sectors are fresh. Each byte is still written once.
		if _, err := sw.WriteAt(o.BIOS.MBR, 0); err != nil {
			return nil, fmt.Errorf("disk: write MBR boot code: %w", err)
		}
		if _, err := sw.WriteAt(o.BIOS.Core, BIOSBootLBA*sector); err != nil {
			return nil, fmt.Errorf("disk: write BIOS boot partition: %w", err)
		}
	}
	fl, err := fat.Write(sw, espStart, []fat.File{{Path: o.BootPath, Data: efi}}, fat.Options{
		Size:          espSize,
		HiddenSectors: espStartLBA,
		VolumeID:      o.VolumeID,
		Label:         "HOTPATH",
		Time:          o.Time,
	})
	if err != nil {
		return nil, fmt.Errorf("disk: write ESP: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	l := &Layout{
		Size:     size,
		ESPStart: espStart,
		ESPSize:  espSize,
		EFIStart: espStart + fl.Files[o.BootPath],
		DiskGUID: table.GUID,
		PartGUID: table.Partitions[0].GUID,
	}
	if o.BIOS != nil {
		l.BIOSStart, l.BIOSSize = BIOSBootLBA*sector, BIOSBootSectors*sector
	}
	return l, nil
}

// check refuses boot code that does not fit where Write puts it.
func (b *BIOSBoot) check() error {
	switch {
	case b == nil:
		return nil
	case len(b.MBR) == 0 || len(b.MBR) > 440:
		return fmt.Errorf("disk: MBR boot code of %d bytes, want 1-440 (the disk signature and partition table follow)", len(b.MBR))
	case len(b.Core) == 0 || len(b.Core) > BIOSBootSectors*sector:
		return fmt.Errorf("disk: BIOS core image of %d bytes, want 1-%d (the BIOS boot partition)", len(b.Core), BIOSBootSectors*sector)
	case b.PartGUID == "":
		return errors.New("disk: the BIOS boot partition's GUID must be given (a random one would make the image irreproducible)")
	}
	return nil
}

// sparseWriter writes to a freshly truncated file and leaves every
// blockSize-aligned block that would be all zeros as a hole. It relies on
// each byte being written at most once, which is true of the GPT and FAT
// writers above.
type sparseWriter struct {
	f *os.File
}

var zeroBlock [blockSize]byte

func (w *sparseWriter) WriteAt(p []byte, off int64) (int, error) {
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		n := int(blockSize - pos%blockSize)
		n = min(n, len(p)-done)
		chunk := p[done : done+n]
		if !bytes.Equal(chunk, zeroBlock[:n]) {
			if _, err := w.f.WriteAt(chunk, pos); err != nil {
				return done, err
			}
		}
		done += n
	}
	return len(p), nil
}

// The gpt package wants a backend.WritableFile; only WriteAt is used for
// writing, the rest is delegated.
func (w *sparseWriter) ReadAt(p []byte, off int64) (int, error) { return w.f.ReadAt(p, off) }
func (w *sparseWriter) Read(p []byte) (int, error)              { return w.f.Read(p) }
func (w *sparseWriter) Seek(off int64, whence int) (int64, error) {
	return w.f.Seek(off, whence)
}
func (w *sparseWriter) Stat() (os.FileInfo, error) { return w.f.Stat() }
func (w *sparseWriter) Close() error               { return nil }
func (w *sparseWriter) Sync() error                { return nil } // once, by Write, at the end

// DeriveGUID returns a UUID (RFC 9562 version 8, "custom") made from the
// first bytes of SHA-256(purpose || 0 || seed), so identifiers follow the
// inputs instead of a random source: the same seed gives the same disk.
func DeriveGUID(seed []byte, purpose string) string {
	h := sha256.New()
	h.Write([]byte(purpose))
	h.Write([]byte{0})
	h.Write(seed)
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x80 // version 8
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%X-%X-%X-%X-%X", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// DeriveVolumeID is DeriveGUID's counterpart for the 32-bit FAT serial.
func DeriveVolumeID(seed []byte) uint32 {
	h := sha256.Sum256(append([]byte("fat volume id\x00"), seed...))
	return binary.LittleEndian.Uint32(h[:4])
}
