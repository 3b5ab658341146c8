package disk

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Digest is the SHA-256 of a disk image and what it occupies on the host.
type Digest struct {
	SHA256    string // hex, of all Size bytes, holes read as zeros
	Size      int64  // virtual size
	Allocated int64  // bytes the file system allocated (st_blocks * 512)
}

// Hash hashes a (sparse) image. Holes are not read from the file: they are
// found with SEEK_DATA/SEEK_HOLE and fed to the hash as zeros, which keeps
// hashing a 1 GiB image that holds 20 MiB of data to the cost of SHA-256
// itself.
func Hash(name string) (*Digest, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("hash: %w", err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("hash %s: %w", name, err)
	}
	d := &Digest{Size: st.Size, Allocated: st.Blocks * 512}
	h := sha256.New()
	var zeros [1 << 16]byte
	zero := func(n int64) {
		for n > 0 {
			k := min(n, int64(len(zeros)))
			h.Write(zeros[:k])
			n -= k
		}
	}
	fd := int(f.Fd())
	for pos := int64(0); pos < d.Size; {
		data, err := unix.Seek(fd, pos, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) { // no data after pos: a hole to the end
			data = d.Size
		} else if err != nil {
			return nil, fmt.Errorf("hash %s: seek data: %w", name, err)
		}
		zero(data - pos)
		if data >= d.Size {
			break
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return nil, fmt.Errorf("hash %s: seek hole: %w", name, err)
		}
		if _, err := io.Copy(h, io.NewSectionReader(f, data, hole-data)); err != nil {
			return nil, fmt.Errorf("hash %s: %w", name, err)
		}
		pos = hole
	}
	d.SHA256 = hex.EncodeToString(h.Sum(nil))
	return d, nil
}
