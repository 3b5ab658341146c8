//go:build linux || darwin || freebsd

package ebsupload

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// dataExtents asks the file system where f has data (lseek SEEK_DATA /
// SEEK_HOLE). Where the file system cannot tell, the whole file is data,
// which is always correct, only slower.
func dataExtents(f *os.File, size int64) ([]extent, error) {
	fd := int(f.Fd())
	var out []extent
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // no data after off
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			return []extent{{0, size}}, nil
		}
		if err != nil {
			return nil, err
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return nil, err
		}
		hole = min(hole, size)
		out = append(out, extent{data, hole})
		off = hole
	}
	return out, nil
}
