// Package fat writes a FAT32 file system holding a fixed set of files, for
// the EFI system partition of the appliance disk.
//
// Why not go-diskfs's FAT32 writer (which the disk package uses for the GPT,
// and the tests use to read this file system back)? As of v1.9.4 it cannot be
// made deterministic without process-wide side effects:
//   - directory-entry timestamps come from timestamp.GetTime(), i.e. the
//     SOURCE_DATE_EPOCH environment variable or time.Now(); pinning them means
//     os.Setenv in a library that the Packer plugin runs in a long-lived
//     process, possibly concurrently;
//   - times before 1980 (SOURCE_DATE_EPOCH unset -> our epoch 0) are encoded as
//     a negative year that wraps into garbage dates;
//   - the volume serial number is either derived from time.Now() or forced to
//     0; it cannot be derived from the inputs;
//   - Create writes both FATs in full, zeros included, so the sparse disk would
//     gain allocated blocks of zeros.
//
// What we need is small: a fresh volume, 8.3 names, files written once and
// laid out contiguously. Everything here follows Microsoft's "FAT32 File
// System Specification" (fatgen103), the layout UEFI firmware reads.
package fat

import (
	"encoding/binary"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"
)

const (
	sectorSize      = 512
	reservedSectors = 32 // boot sector, FSInfo, backups at 6 and 7; what mkfs.fat uses
	numFATs         = 2
	fsInfoSector    = 1
	backupBoot      = 6
	rootCluster     = 2
	// A FAT32 volume must have at least this many clusters, or FAT drivers
	// (UEFI's included) take it for FAT16.
	minClusters = 65525
	maxClusters = 0x0FFFFFF5 - 2
	eoc         = 0x0FFFFFFF
	mediaFixed  = 0xF8

	attrVolumeID  = 0x08
	attrDirectory = 0x10
	attrArchive   = 0x20
	dirEntrySize  = 32
)

// File is one file of the volume; Path uses "/" and 8.3 names, e.g.
// "EFI/BOOT/BOOTX64.EFI". Parent directories are created as needed.
type File struct {
	Path string
	Data []byte
}

// Options fixes everything that would otherwise vary.
type Options struct {
	// Size of the volume in bytes; a multiple of 512, large enough for
	// 65525 clusters (about 33 MiB with 512-byte clusters).
	Size int64
	// HiddenSectors is the LBA of the partition's first sector (BPB_HiddSec).
	HiddenSectors uint32
	// VolumeID is the volume serial number.
	VolumeID uint32
	// Label is the volume label (at most 11 characters, 8.3 character set);
	// empty means "NO NAME".
	Label string
	// Time stamps every directory entry. FAT dates run from 1980 to 2107;
	// times outside that range are clamped to it.
	Time time.Time
}

// Layout describes the volume that was written.
type Layout struct {
	Size              int64
	SectorsPerCluster int
	FATSectors        int
	Clusters          int // data clusters in the volume
	UsedClusters      int // including the root directory
	DataStart         int64
	// Files maps each file's path to the byte offset (from the start of the
	// volume) of its first byte; files are contiguous.
	Files map[string]int64
}

type node struct {
	name     string // 8.3 name as written, e.g. "BOOTX64.EFI"
	dir      bool
	data     []byte
	children []*node
	parent   *node
	cluster  uint32 // first cluster, 0 for an empty file
	nclus    uint32
}

// Write lays out a FAT32 volume with files at byte offset off of w. Only
// non-zero structures are written, each byte at most once, so w may skip
// writing blocks of zeros and keep a sparse file sparse (the caller is
// expected to write into zeroed, e.g. freshly truncated, storage).
func Write(w io.WriterAt, off int64, files []File, o Options) (*Layout, error) {
	label, err := volumeLabel(o.Label)
	if err != nil {
		return nil, err
	}
	g, err := geometryOf(o.Size)
	if err != nil {
		return nil, err
	}
	root, err := tree(files)
	if err != nil {
		return nil, err
	}
	a := allocate(root, label != noLabel, g.clusterBytes())
	if a.used() > g.clusters {
		return nil, fmt.Errorf("fat: files need %d clusters, the volume has %d", a.used(), g.clusters)
	}
	v := &volume{w: w, off: off, g: g, o: o, label: label}
	for _, write := range []func(allocation) error{v.writeBootSectors, v.writeFATs, v.writeDirectories} {
		if err := write(a); err != nil {
			return nil, err
		}
	}
	return v.writeFiles(a)
}

// noLabel is the label of a volume that has none, as FAT drivers show it.
const noLabel = "NO NAME"

// volumeLabel checks o.Label, or gives noLabel for an empty one.
func volumeLabel(label string) (string, error) {
	if label == "" {
		return noLabel, nil
	}
	if len(label) > 11 || !validChars(strings.ReplaceAll(label, " ", "_")) {
		return "", fmt.Errorf("fat: bad volume label %q", label)
	}
	return label, nil
}

// geometry is the shape of a volume of a given size.
type geometry struct {
	spc      uint32 // sectors per cluster
	total    uint32 // sectors
	fatSz    uint32 // sectors per FAT
	clusters uint32 // data clusters
}

// geometryOf chooses the cluster size as mkfs.fat and Microsoft's format
// do, and the smallest FAT that maps every cluster.
func geometryOf(size int64) (geometry, error) {
	if size <= 0 || size%sectorSize != 0 {
		return geometry{}, fmt.Errorf("fat: size %d is not a positive multiple of %d", size, sectorSize)
	}
	g := geometry{total: uint32(size / sectorSize), fatSz: 1}
	switch {
	case size <= 260<<20:
		g.spc = 1
	case size <= 8<<30:
		g.spc = 8
	case size <= 16<<30:
		g.spc = 16
	case size <= 32<<30:
		g.spc = 32
	default:
		return geometry{}, fmt.Errorf("fat: size %d above 32 GiB is not supported", size)
	}
	// Each FAT sector holds 128 entries, the first two of which are
	// reserved.
	for {
		if reservedSectors+numFATs*g.fatSz >= g.total {
			return geometry{}, fmt.Errorf("fat: size %d too small", size)
		}
		g.clusters = (g.total - reservedSectors - numFATs*g.fatSz) / g.spc
		need := (g.clusters + 2 + 127) / 128
		if need <= g.fatSz {
			break
		}
		g.fatSz = need
	}
	if g.clusters < minClusters || g.clusters > maxClusters {
		return geometry{}, fmt.Errorf("fat: size %d gives %d clusters; FAT32 needs %d..%d", size, g.clusters, minClusters, maxClusters)
	}
	return g, nil
}

func (g geometry) clusterBytes() int64 { return int64(g.spc) * sectorSize }
func (g geometry) fatStart() int64     { return int64(reservedSectors) * sectorSize }
func (g geometry) dataStart() int64 {
	return g.fatStart() + int64(numFATs)*int64(g.fatSz)*sectorSize
}

// clusterOff is the byte offset of cluster c in the volume.
func (g geometry) clusterOff(c uint32) int64 {
	return g.dataStart() + int64(c-rootCluster)*g.clusterBytes()
}

// allocation is where every directory and file lives.
type allocation struct {
	root          *node
	dirs, regular []*node // in sorted tree order, the root first
	next          uint32  // the first free cluster
}

func (a allocation) used() uint32 { return a.next - rootCluster }

// allocate places directories first (the root is cluster 2, as the spec
// recommends), then file data, each contiguous, in sorted tree order.
func allocate(root *node, hasLabel bool, clusterBytes int64) allocation {
	a := allocation{root: root, next: rootCluster}
	take := func(bytes int64, minOne bool) (uint32, uint32) {
		n := uint32((bytes + clusterBytes - 1) / clusterBytes)
		if n == 0 && minOne {
			n = 1
		}
		if n == 0 {
			return 0, 0
		}
		first := a.next
		a.next += n
		return first, n
	}
	walk(root, func(n *node) {
		if n.dir {
			a.dirs = append(a.dirs, n)
		} else {
			a.regular = append(a.regular, n)
		}
	})
	for _, d := range a.dirs {
		entries := int64(len(d.children))
		if d == root {
			if hasLabel {
				entries++
			}
		} else {
			entries += 2 // "." and ".."
		}
		d.cluster, d.nclus = take(entries*dirEntrySize, true)
	}
	for _, f := range a.regular {
		f.cluster, f.nclus = take(int64(len(f.data)), false)
	}
	return a
}

// volume writes the structures of one volume.
type volume struct {
	w     io.WriterAt
	off   int64
	g     geometry
	o     Options
	label string
}

var le = binary.LittleEndian

// at writes b at byte rel of the volume.
func (v *volume) at(b []byte, rel int64, what string) error {
	if _, err := v.w.WriteAt(b, v.off+rel); err != nil {
		return fmt.Errorf("fat: write %s: %w", what, err)
	}
	return nil
}

// writeBootSectors writes the boot sector, FSInfo and their backups. The
// free count and next-free hint of FSInfo are exact.
func (v *volume) writeBootSectors(a allocation) error {
	bs := make([]byte, sectorSize)
	copy(bs[0:3], []byte{0xEB, 0x58, 0x90}) // jmp over the BPB; no boot code
	copy(bs[3:11], "MSWIN4.1")              // the OEM name fatgen103 recommends
	le.PutUint16(bs[11:], sectorSize)
	bs[13] = byte(v.g.spc)
	le.PutUint16(bs[14:], reservedSectors)
	bs[16] = numFATs
	bs[21] = mediaFixed
	le.PutUint16(bs[24:], 63)  // sectors per track: geometry is meaningless here,
	le.PutUint16(bs[26:], 255) // but these are the values mkfs.fat writes
	le.PutUint32(bs[28:], v.o.HiddenSectors)
	le.PutUint32(bs[32:], v.g.total)
	le.PutUint32(bs[36:], v.g.fatSz)
	le.PutUint32(bs[44:], rootCluster)
	le.PutUint16(bs[48:], fsInfoSector)
	le.PutUint16(bs[50:], backupBoot)
	bs[64] = 0x80 // drive number
	bs[66] = 0x29 // extended boot signature: the next three fields are valid
	le.PutUint32(bs[67:], v.o.VolumeID)
	copy(bs[71:82], fmt.Sprintf("%-11s", v.label))
	copy(bs[82:90], "FAT32   ")
	bs[510], bs[511] = 0x55, 0xAA

	fi := make([]byte, sectorSize)
	le.PutUint32(fi[0:], 0x41615252)
	le.PutUint32(fi[484:], 0x61417272)
	le.PutUint32(fi[488:], v.g.clusters-a.used())
	le.PutUint32(fi[492:], a.next)
	le.PutUint32(fi[508:], 0xAA550000)

	for _, s := range []struct {
		sector int64
		b      []byte
		what   string
	}{{0, bs, "boot sector"}, {fsInfoSector, fi, "FSInfo"}, {backupBoot, bs, "backup boot sector"}, {backupBoot + 1, fi, "backup FSInfo"}} {
		if err := v.at(s.b, s.sector*sectorSize, s.what); err != nil {
			return err
		}
	}
	return nil
}

// writeFATs writes both FATs: only the used prefix; the rest is free
// (zero).
func (v *volume) writeFATs(a allocation) error {
	fat := make([]byte, 4*int(a.next))
	le.PutUint32(fat[0:], 0x0FFFFF00|mediaFixed)
	le.PutUint32(fat[4:], eoc) // clean shutdown, no I/O errors
	chain := func(first, n uint32) {
		for c := first; c < first+n; c++ {
			e := uint32(eoc)
			if c+1 < first+n {
				e = c + 1
			}
			le.PutUint32(fat[4*c:], e)
		}
	}
	for _, n := range append(append([]*node(nil), a.dirs...), a.regular...) {
		chain(n.cluster, n.nclus)
	}
	for i := int64(0); i < numFATs; i++ {
		if err := v.at(fat, v.g.fatStart()+i*int64(v.g.fatSz)*sectorSize, fmt.Sprintf("FAT %d", i+1)); err != nil {
			return err
		}
	}
	return nil
}

// entry is one directory entry, stamped with Options.Time.
func (v *volume) entry(name string, attr byte, cluster, size uint32) []byte {
	date, tod := stamp(v.o.Time)
	e := make([]byte, dirEntrySize)
	copy(e[0:11], name)
	e[11] = attr
	le.PutUint16(e[14:], tod)  // creation time
	le.PutUint16(e[16:], date) // creation date
	le.PutUint16(e[18:], date) // last access date
	le.PutUint16(e[20:], uint16(cluster>>16))
	le.PutUint16(e[22:], tod)  // write time
	le.PutUint16(e[24:], date) // write date
	le.PutUint16(e[26:], uint16(cluster))
	le.PutUint32(e[28:], size)
	return e
}

// writeDirectories writes every directory's entries: the label in the
// root, "." and ".." in the others, then the children in sorted order.
func (v *volume) writeDirectories(a allocation) error {
	for _, d := range a.dirs {
		var b []byte
		if d == a.root {
			if v.label != noLabel {
				b = append(b, v.entry(fmt.Sprintf("%-11s", v.label), attrVolumeID, 0, 0)...)
			}
		} else {
			parent := d.parent.cluster
			if d.parent == a.root {
				parent = 0 // ".." of a first-level directory points at cluster 0
			}
			b = append(b, v.entry(".          ", attrDirectory, d.cluster, 0)...)
			b = append(b, v.entry("..         ", attrDirectory, parent, 0)...)
		}
		for _, c := range d.children {
			if c.dir {
				b = append(b, v.entry(raw83(c.name), attrDirectory, c.cluster, 0)...)
			} else {
				b = append(b, v.entry(raw83(c.name), attrArchive, c.cluster, uint32(len(c.data)))...)
			}
		}
		if err := v.at(b, v.g.clusterOff(d.cluster), "directory "+d.name); err != nil {
			return err
		}
	}
	return nil
}

// writeFiles writes the files' data and returns the layout.
func (v *volume) writeFiles(a allocation) (*Layout, error) {
	l := &Layout{
		Size:              v.o.Size,
		SectorsPerCluster: int(v.g.spc),
		FATSectors:        int(v.g.fatSz),
		Clusters:          int(v.g.clusters),
		UsedClusters:      int(a.used()),
		DataStart:         v.g.dataStart(),
		Files:             map[string]int64{},
	}
	for _, f := range a.regular {
		if f.cluster == 0 {
			continue
		}
		if err := v.at(f.data, v.g.clusterOff(f.cluster), "file "+pathOf(f)); err != nil {
			return nil, err
		}
		l.Files[pathOf(f)] = v.g.clusterOff(f.cluster)
	}
	return l, nil
}

func tree(files []File) (*node, error) {
	root := &node{name: "/", dir: true}
	for _, f := range files {
		parts := strings.Split(f.Path, "/")
		if f.Path == "" || path.Clean(f.Path) != f.Path || strings.HasPrefix(f.Path, "/") {
			return nil, fmt.Errorf("fat: bad path %q (want a clean relative path like EFI/BOOT/BOOTX64.EFI)", f.Path)
		}
		if int64(len(f.Data)) > 0xFFFFFFFF {
			return nil, fmt.Errorf("fat: %s: %d bytes is more than FAT32 can hold", f.Path, len(f.Data))
		}
		cur := root
		for i, p := range parts {
			if !valid83(p) {
				return nil, fmt.Errorf("fat: %q in %q is not an upper-case 8.3 name (long names are not written)", p, f.Path)
			}
			last := i == len(parts)-1
			var found *node
			for _, c := range cur.children {
				if c.name == p {
					found = c
				}
			}
			switch {
			case found == nil:
				found = &node{name: p, dir: !last, parent: cur}
				if last {
					found.data = f.Data
				}
				cur.children = append(cur.children, found)
			case last || !found.dir:
				return nil, fmt.Errorf("fat: %q given twice or both as file and directory", f.Path)
			}
			cur = found
		}
	}
	return root, nil
}

// walk visits directories and files depth first in name order.
func walk(n *node, f func(*node)) {
	sort.Slice(n.children, func(i, j int) bool { return n.children[i].name < n.children[j].name })
	f(n)
	for _, c := range n.children {
		walk(c, f)
	}
}

func pathOf(n *node) string {
	if n.parent == nil || n.parent.parent == nil {
		return n.name
	}
	return pathOf(n.parent) + "/" + n.name
}

func valid83(s string) bool {
	base, ext, _ := strings.Cut(s, ".")
	return len(base) >= 1 && len(base) <= 8 && len(ext) <= 3 && !strings.Contains(ext, ".") &&
		validChars(base) && validChars(ext) && base != "." && base != ".."
}

func validChars(s string) bool {
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-~!#$%&'()@^`{}", r)) {
			return false
		}
	}
	return true
}

// raw83 turns "BOOTX64.EFI" into the on-disk "BOOTX64 EFI".
func raw83(s string) string {
	base, ext, _ := strings.Cut(s, ".")
	return fmt.Sprintf("%-8s%-3s", base, ext)
}

// stamp encodes t (UTC) as a FAT date and time of day, clamped to the range
// FAT can express.
func stamp(t time.Time) (date, tod uint16) {
	t = t.UTC()
	lo := time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)
	hi := time.Date(2107, 12, 31, 23, 59, 58, 0, time.UTC)
	if t.Before(lo) {
		t = lo
	}
	if t.After(hi) {
		t = hi
	}
	date = uint16((t.Year()-1980)<<9 | int(t.Month())<<5 | t.Day())
	tod = uint16(t.Hour()<<11 | t.Minute()<<5 | t.Second()/2)
	return date, tod
}
