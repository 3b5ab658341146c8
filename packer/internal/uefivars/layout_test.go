package uefivars_test

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"io"
	"testing"

	"github.com/hotpath-dev/hotpath/packer/internal/uefivars"
)

// The layout, written down here from python-uefivars (pyuefivars/aws.py
// __init__ and __bytes__, aws_file.py, varstore.py) and not from this
// package, so that a change made alike to the encoder and the decoder
// (two fields swapped, a length of the wrong width) is still seen:
//
//	store   = base64( magic u64 | crc32c u32 | version u32 | zlib(payload) )
//	          magic "AMZNUEFI" (0x494645554e5a4d41 little-endian), crc32c
//	          (Castagnoli) of version and zlib stream, version 0
//	payload = count u64 | variable...
//	variable= len u64 | name (UTF-8) | len u64 | data | guid [16]
//	          (EFI byte order) | attr u32
//	          [ if attr & 0x20 (time-based authenticated write access):
//	            timestamp [16] (zeros when none) | len u64 | digest
//	            (32 zero bytes when none) ]
//
// All integers little-endian. The bytes below are built by appending each
// field in that order, with no call into the package but Encode and
// Decode.

// efiGlobal is 8be4df61-93ca-11d2-aa0d-00e098032b8c in EFI byte order
// (first three fields little-endian), typed out.
var efiGlobal = [16]byte{0x61, 0xdf, 0xe4, 0x8b, 0xca, 0x93, 0xd2, 0x11, 0xaa, 0x0d, 0x00, 0xe0, 0x98, 0x03, 0x2b, 0x8c}

// efiImageSecurityDatabase is d719b2cb-3d3a-4596-a3bc-dad00e67656f.
var efiImageSecurityDatabase = [16]byte{0xcb, 0xb2, 0x19, 0xd7, 0x3a, 0x3d, 0x96, 0x45, 0xa3, 0xbc, 0xda, 0xd0, 0x0e, 0x67, 0x65, 0x6f}

func u64(n int) []byte    { return binary.LittleEndian.AppendUint64(nil, uint64(n)) }
func u32(n uint32) []byte { return binary.LittleEndian.AppendUint32(nil, n) }

// layoutVars are the variables of the test and, field by field, the
// payload python-uefivars writes for them.
func layoutVars() ([]uefivars.Variable, []byte) {
	pkData := []byte("an EFI_SIGNATURE_LIST would be here")
	var stamp [16]byte
	for i := range stamp {
		stamp[i] = byte(i + 1)
	}
	digest := bytes.Repeat([]byte{0xab}, 32)
	vars := []uefivars.Variable{
		// PK as hotpath enrolls it: authenticated, no time, no digest.
		{Name: "PK", GUID: efiGlobal, Attrs: 0x27, Data: pkData},
		// db with a time stamp and digest of its own.
		{Name: "db", GUID: efiImageSecurityDatabase, Attrs: 0x27, Data: []byte{1, 2, 3}, Time: stamp, Digest: digest},
		// not authenticated: no time, no digest at all.
		{Name: "BootOrder", GUID: efiGlobal, Attrs: 0x07, Data: []byte{0x01, 0x00}},
		// a name outside ASCII: its length is bytes, not characters.
		{Name: "Bööt", GUID: efiGlobal, Attrs: 0x03, Data: nil},
	}
	var p []byte
	p = append(p, u64(4)...)

	p = append(p, u64(2)...)
	p = append(p, "PK"...)
	p = append(p, u64(len(pkData))...)
	p = append(p, pkData...)
	p = append(p, efiGlobal[:]...)
	p = append(p, u32(0x27)...)
	p = append(p, make([]byte, 16)...) // EMPTY_TIMESTAMP
	p = append(p, u64(32)...)
	p = append(p, make([]byte, 32)...) // EMPTY_DIGEST

	p = append(p, u64(2)...)
	p = append(p, "db"...)
	p = append(p, u64(3)...)
	p = append(p, 1, 2, 3)
	p = append(p, efiImageSecurityDatabase[:]...)
	p = append(p, u32(0x27)...)
	p = append(p, stamp[:]...)
	p = append(p, u64(32)...)
	p = append(p, digest...)

	p = append(p, u64(9)...)
	p = append(p, "BootOrder"...)
	p = append(p, u64(2)...)
	p = append(p, 0x01, 0x00)
	p = append(p, efiGlobal[:]...)
	p = append(p, u32(0x07)...)

	p = append(p, u64(6)...) // B ö ö t: 1+2+2+1 bytes
	p = append(p, "Bööt"...)
	p = append(p, u64(0)...)
	p = append(p, efiGlobal[:]...)
	p = append(p, u32(0x03)...)
	return vars, p
}

// TestEncodeLayout: Encode's header is magic, CRC32C and version as laid
// out above, and its zlib stream inflates to exactly the payload built
// field by field.
func TestEncodeLayout(t *testing.T) {
	vars, want := layoutVars()
	s, err := uefivars.Encode(vars)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw[0:8]) != "AMZNUEFI" {
		t.Errorf("magic %q", raw[0:8])
	}
	if got, want := binary.LittleEndian.Uint32(raw[8:12]), crc32.Checksum(raw[12:], crc32.MakeTable(crc32.Castagnoli)); got != want {
		t.Errorf("CRC32C in the header %#08x, of version and stream %#08x", got, want)
	}
	if v := binary.LittleEndian.Uint32(raw[12:16]); v != 0 {
		t.Errorf("version %d", v)
	}
	zr, err := zlib.NewReader(bytes.NewReader(raw[16:]))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("payload differs from the layout at byte %d:\ngot  %x\nwant %x", firstDiff(got, want), got, want)
	}
}

// TestDecodeLayout: a store put together by hand from the layout decodes
// to the variables; the zero digest and time stamp read as none.
func TestDecodeLayout(t *testing.T) {
	vars, payload := layoutVars()
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(payload)
	zw.Close()
	body := append(u32(0), z.Bytes()...)
	store := append([]byte("AMZNUEFI"), u32(crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))...)
	store = append(store, body...)
	got, err := uefivars.Decode(base64.StdEncoding.EncodeToString(store))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(vars) {
		t.Fatalf("%d variables, want %d", len(got), len(vars))
	}
	for i, v := range got {
		w := vars[i]
		if v.Name != w.Name || v.GUID != w.GUID || v.Attrs != w.Attrs || !bytes.Equal(v.Data, w.Data) || v.Time != w.Time || !bytes.Equal(v.Digest, w.Digest) {
			t.Errorf("variable %d: %+v\nwant %+v", i, v, w)
		}
	}
	if got[0].Digest != nil {
		t.Errorf("PK's zero digest read as %x, want none", got[0].Digest)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
