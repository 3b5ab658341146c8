// Package cpio writes the appliance's initramfs: a newc cpio archive whose
// bytes depend only on the files put in it.
//
// The archive format itself is u-root's (github.com/u-root/u-root/pkg/cpio);
// this package decides what varies between two builds and pins it: entries
// are sorted by path, every parent directory precedes its children, owners
// are root, modification times are one fixed value (SOURCE_DATE_EPOCH, or 0),
// inode numbers are assigned in sorted order, and the device numbers of the
// build machine never reach the archive.
package cpio

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	ucpio "github.com/u-root/u-root/pkg/cpio"
)

// Kind is the type of one archive entry.
type Kind int

const (
	// File is a regular file with Data as its contents.
	File Kind = iota
	// Dir is a directory.
	Dir
	// CharDev is a character device node (Major, Minor).
	CharDev
)

// Entry is one file, directory or device node of the archive.
type Entry struct {
	// Path is the absolute path inside the initramfs, e.g. "/etc/hotpath/init.conf".
	Path string
	Kind Kind
	// Perm holds the permission bits (0o755, 0o1777, ...); type bits are
	// taken from Kind.
	Perm uint32
	// Data is the content of a File.
	Data []byte
	// Major and Minor number a CharDev.
	Major, Minor uint32
}

// Options pins what would otherwise come from the build machine.
type Options struct {
	// MTime is the modification time of every entry, in seconds since the
	// epoch. Callers pass SOURCE_DATE_EPOCH when it is set, else 0.
	MTime uint32
}

// Write writes entries as a newc archive with a trailer to w. The order of
// entries does not matter; the same set of entries always gives the same
// bytes. Parent directories that are not listed are an error rather than
// being invented, so the listing a caller passes is the whole truth.
func Write(w io.Writer, entries []Entry, o Options) error {
	es := make([]Entry, len(entries))
	copy(es, entries)
	seen := make(map[string]Kind, len(es))
	for i := range es {
		p, err := clean(es[i].Path)
		if err != nil {
			return err
		}
		if _, dup := seen[p]; dup {
			return fmt.Errorf("cpio: duplicate entry %q", p)
		}
		seen[p] = es[i].Kind
		es[i].Path = p
	}
	for _, e := range es {
		if dir := path.Dir(e.Path); dir != "." {
			if k, ok := seen[dir]; !ok || k != Dir {
				return fmt.Errorf("cpio: %q: parent directory %q is not in the archive", e.Path, dir)
			}
		}
	}
	// Sort by path components so that "a" < "a/b" < "a-b": a parent always
	// comes right before its subtree and the order never depends on the
	// caller.
	sort.Slice(es, func(i, j int) bool { return less(es[i].Path, es[j].Path) })

	rw := ucpio.Newc.Writer(w)
	for i, e := range es {
		info := ucpio.Info{
			// Fixed inode numbers in archive order. They are unique, so the
			// kernel's unpacker never mistakes two files for hard links.
			Ino:   uint64(i + 1),
			Name:  e.Path,
			MTime: uint64(o.MTime),
			NLink: 1,
		}
		var rec ucpio.Record
		switch e.Kind {
		case File:
			if e.Perm&^0o7777 != 0 {
				return fmt.Errorf("cpio: %q: bad permission bits %#o", e.Path, e.Perm)
			}
			info.Mode = ucpio.S_IFREG | uint64(e.Perm)
			rec = ucpio.StaticRecord(e.Data, info)
		case Dir:
			info.Mode = ucpio.S_IFDIR | uint64(e.Perm&0o7777)
			info.NLink = 2
			rec = ucpio.Record{Info: info}
		case CharDev:
			info.Mode = ucpio.S_IFCHR | uint64(e.Perm&0o7777)
			info.Rmajor, info.Rminor = uint64(e.Major), uint64(e.Minor)
			rec = ucpio.Record{Info: info}
		default:
			return fmt.Errorf("cpio: %q: unknown kind %d", e.Path, e.Kind)
		}
		if err := rw.WriteRecord(rec); err != nil {
			return fmt.Errorf("cpio: write %q: %w", e.Path, err)
		}
	}
	if err := ucpio.WriteTrailer(rw); err != nil {
		return fmt.Errorf("cpio: write trailer: %w", err)
	}
	return nil
}

// WriteFile writes the archive to path (created or truncated, mode 0644).
func WriteFile(name string, entries []Entry, o Options) error {
	var buf bytes.Buffer
	if err := Write(&buf, entries, o); err != nil {
		return err
	}
	if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("cpio: %w", err)
	}
	return nil
}

// Record is one entry as read back from an archive.
type Record struct {
	ucpio.Info
	Data []byte
}

// Read reads every record of a newc archive up to its trailer.
func Read(r io.ReaderAt) ([]Record, error) {
	rr := ucpio.Newc.Reader(r)
	var out []Record
	err := ucpio.ForEachRecord(rr, func(rec ucpio.Record) error {
		var data []byte
		if rec.ReaderAt != nil && rec.Info.FileSize > 0 {
			data = make([]byte, rec.Info.FileSize)
			if _, err := rec.ReadAt(data, 0); err != nil && err != io.EOF {
				return fmt.Errorf("read %q: %w", rec.Info.Name, err)
			}
		}
		out = append(out, Record{Info: rec.Info, Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cpio: %w", err)
	}
	return out, nil
}

// clean turns "/etc/x" into the archive's relative form "etc/x" and refuses
// paths that would escape or be ambiguous.
func clean(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("cpio: path %q is not absolute", p)
	}
	c := path.Clean(p)
	if c != p || c == "/" {
		return "", fmt.Errorf("cpio: path %q is not clean", p)
	}
	return strings.TrimPrefix(c, "/"), nil
}

func less(a, b string) bool {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(as) && i < len(bs); i++ {
		if as[i] != bs[i] {
			return as[i] < bs[i]
		}
	}
	return len(as) < len(bs)
}
