// Package uefivars reads and writes the UEFI variable store that EC2's
// RegisterImage takes as UefiData (the amazon plugin's uefi_data): the
// "AWS" format that awslabs' python-uefivars tool reads and writes, and in
// which EC2's GetInstanceUefiData returns an instance's variables.
//
// The format, as python-uefivars documents it by its reader and writer:
// base64 of a 16-byte header (the magic "AMZNUEFI" as a little-endian
// uint64, a CRC32C of everything after the CRC, a uint32 version 0), then
// a zlib stream of: a uint64 count, and per variable its UTF-8 name and
// its data (each a uint64 length and the bytes), its vendor GUID (EFI byte
// order), its uint32 attributes and, for time-based authenticated
// variables, a 16-byte EFI_TIME and a length-prefixed digest. All integers
// are little-endian. A time-based authenticated variable without a time
// stamp or digest carries zeros in their place: 16 zero bytes of time and
// a digest of 32 zero bytes (python-uefivars' EMPTY_TIMESTAMP and
// EMPTY_DIGEST in varstore.py, written by aws.py's __bytes__ and read
// back as none), not an empty digest.
//
// python-uefivars compresses with a preset zlib dictionary of its own.
// This package writes without one (zlib readers only use a dictionary when
// the stream asks for it), and does not ship that dictionary: a store that
// needs it decodes up to the zlib stream (magic, CRC, version) and then
// returns ErrPresetDictionary.
package uefivars

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
)

// Magic is "AMZNUEFI" read as a little-endian uint64.
const Magic = 0x494645554e5a4d41

// Version is the only payload version there is.
const Version = 0

// Variable attributes (UEFI specification, SetVariable).
const (
	NonVolatile                       = 0x01
	BootServiceAccess                 = 0x02
	RuntimeAccess                     = 0x04
	TimeBasedAuthenticatedWriteAccess = 0x20
	// SecureBootAttrs are PK's, KEK's and db's.
	SecureBootAttrs = NonVolatile | BootServiceAccess | RuntimeAccess | TimeBasedAuthenticatedWriteAccess
)

// maxPayload bounds what a decoded store may inflate to: EC2 limits
// UefiData to 64 KiB of base64, and variable stores are small.
const maxPayload = 16 << 20

// ErrPresetDictionary: the store's zlib stream was compressed with a preset
// dictionary (python-uefivars'), which this package does not have.
var ErrPresetDictionary = errors.New("uefivars: the variables are compressed with a preset zlib dictionary (python-uefivars' dict.v0), which this reader does not ship; the header and CRC32C are valid")

// Variable is one UEFI variable.
type Variable struct {
	Name  string
	GUID  GUID
	Attrs uint32
	Data  []byte
	// Time and Digest are kept for time-based authenticated variables.
	// A zero Time and a nil Digest are none: stored as zeros (emptyDigest).
	Time   [16]byte
	Digest []byte
}

// emptyDigest is what the store holds for a time-based authenticated
// variable without a digest: python-uefivars' EMPTY_DIGEST, 32 zero bytes
// (a SHA-256's size), which its reader takes for none.
var emptyDigest = make([]byte, 32)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encode returns the base64 store of vars, in order. The bytes are a
// function of vars only.
func Encode(vars []Variable) (string, error) {
	var payload bytes.Buffer
	le := binary.LittleEndian
	w := func(v any) { binary.Write(&payload, le, v) }
	blob := func(b []byte) { w(uint64(len(b))); payload.Write(b) }
	w(uint64(len(vars)))
	for _, v := range vars {
		if v.Name == "" {
			return "", errors.New("uefivars: a variable without a name")
		}
		blob([]byte(v.Name))
		blob(v.Data)
		payload.Write(v.GUID[:])
		w(v.Attrs)
		if v.Attrs&TimeBasedAuthenticatedWriteAccess != 0 {
			payload.Write(v.Time[:])
			if len(v.Digest) == 0 {
				blob(emptyDigest)
			} else {
				blob(v.Digest)
			}
		}
	}
	var z bytes.Buffer
	z.Write(le.AppendUint32(nil, Version))
	zw, err := zlib.NewWriterLevel(&z, zlib.BestCompression)
	if err != nil {
		return "", err
	}
	zw.Write(payload.Bytes())
	if err := zw.Close(); err != nil {
		return "", err
	}
	hdr := le.AppendUint64(nil, Magic)
	hdr = le.AppendUint32(hdr, crc32.Checksum(z.Bytes(), castagnoli))
	return base64.StdEncoding.EncodeToString(append(hdr, z.Bytes()...)), nil
}

// Decode reads a base64 store. Whitespace around and inside the base64
// (a file with line breaks) is ignored.
func Decode(s string) ([]Variable, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		return nil, fmt.Errorf("uefivars: not base64: %w", err)
	}
	if len(raw) < 16 {
		return nil, fmt.Errorf("uefivars: %d bytes, shorter than the 16-byte header", len(raw))
	}
	le := binary.LittleEndian
	if m := le.Uint64(raw); m != Magic {
		return nil, fmt.Errorf("uefivars: magic %#x, want %#x (\"AMZNUEFI\")", m, uint64(Magic))
	}
	if got, want := crc32.Checksum(raw[12:], castagnoli), le.Uint32(raw[8:]); got != want {
		return nil, fmt.Errorf("uefivars: CRC32C %#08x, the header says %#08x", got, want)
	}
	if v := le.Uint32(raw[12:]); v != Version {
		return nil, fmt.Errorf("uefivars: version %d, want %d", v, Version)
	}
	zr, err := zlib.NewReader(bytes.NewReader(raw[16:]))
	if errors.Is(err, zlib.ErrDictionary) {
		return nil, ErrPresetDictionary
	}
	if err != nil {
		return nil, fmt.Errorf("uefivars: %w", err)
	}
	payload, err := io.ReadAll(io.LimitReader(zr, maxPayload+1))
	if err != nil {
		return nil, fmt.Errorf("uefivars: %w", err)
	}
	if len(payload) > maxPayload {
		return nil, fmt.Errorf("uefivars: the variables inflate past %d bytes", maxPayload)
	}
	return parse(payload)
}

// parse reads the decompressed variable list.
func parse(p []byte) ([]Variable, error) {
	r := &reader{b: p}
	n := r.u64()
	if n > uint64(len(p)) {
		return nil, fmt.Errorf("uefivars: %d variables in %d bytes", n, len(p))
	}
	var out []Variable
	for i := uint64(0); i < n && r.err == nil; i++ {
		var v Variable
		v.Name = string(r.blob())
		v.Data = r.blob()
		copy(v.GUID[:], r.bytes(16))
		v.Attrs = uint32(r.u32())
		if v.Attrs&TimeBasedAuthenticatedWriteAccess != 0 {
			copy(v.Time[:], r.bytes(16))
			if v.Digest = r.blob(); bytes.Equal(v.Digest, emptyDigest) {
				v.Digest = nil // none, as python-uefivars reads it
			}
		}
		out = append(out, v)
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("uefivars: %d bytes after the last variable", len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	return out, nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("uefivars: truncated variable list (%d bytes wanted, %d left)", n, len(r.b))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u64() uint64 {
	if b := r.bytes(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (r *reader) u32() uint64 {
	if b := r.bytes(4); b != nil {
		return uint64(binary.LittleEndian.Uint32(b))
	}
	return 0
}

func (r *reader) blob() []byte { return r.bytes(r.u64()) }
