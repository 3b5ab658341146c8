package authenticode_test

import (
	"bytes"
	"crypto"
	_ "crypto/sha256"
	_ "crypto/sha512"
	"encoding/binary"
	"testing"

	"github.com/hotpath-dev/hotpath/image/authenticode"
	"github.com/hotpath-dev/hotpath/image/authenticode/authenticodetest"
)

// TestDigestCoverage changes one byte at a time: bytes the digest covers
// change it, the checksum and the certificate directory entry do not.
func TestDigestCoverage(t *testing.T) {
	pe := authenticodetest.PE([]byte("hello, firmware"), []byte("trailing data"))
	base, err := authenticode.Digest(pe, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	const opt = 0x80 + 24
	for _, tc := range []struct {
		name    string
		off     int
		changes bool
	}{
		{"dos header", 0x10, true},
		{"checksum", opt + 64, false},
		{"certificate directory entry", opt + 112 + 4*8 + 2, false},
		{"other directory entry", opt + 112 + 3*8, true},
		{"section data", 0x200 + 3, true},
		{"section padding", 0x200 + 100, true},
		{"data after the last section", len(pe) - 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(pe)
			b[tc.off] ^= 0xff
			d, err := authenticode.Digest(b, crypto.SHA256)
			if err != nil {
				t.Fatal(err)
			}
			if got := !bytes.Equal(d, base); got != tc.changes {
				t.Errorf("digest changed: %v, want %v", got, tc.changes)
			}
		})
	}
}

// TestEmbedKeepsDigest: the certificate table is outside the digest, so
// the embedded signature does not change what it signs.
func TestEmbedKeepsDigest(t *testing.T) {
	pe := authenticode.Pad(authenticodetest.PE([]byte("x"), []byte("odd")))
	if len(pe)%8 != 0 {
		t.Fatalf("Pad left %d bytes", len(pe))
	}
	before, err := authenticode.Digest(pe, crypto.SHA384)
	if err != nil {
		t.Fatal(err)
	}
	sig := []byte("not really PKCS#7 but any bytes")
	signed, err := authenticode.Embed(pe, sig)
	if err != nil {
		t.Fatal(err)
	}
	after, err := authenticode.Digest(signed, crypto.SHA384)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("digest changed by signing: %x -> %x", before, after)
	}
	got, err := authenticode.Certificate(signed)
	if err != nil || !bytes.Equal(got, sig) {
		t.Errorf("Certificate = %q, %v; want %q", got, err, sig)
	}
	if len(signed)%8 != 0 {
		t.Errorf("signed image of %d bytes is not quadword aligned", len(signed))
	}
	if _, err := authenticode.Embed(signed, sig); err == nil {
		t.Error("Embed signed an already signed image")
	}
	l, _ := authenticode.Parse(signed)
	if !l.Signed() {
		t.Error("Parse: the signed image is not Signed")
	}
	// The checksum is recomputed.
	at := 0x80 + 24 + 64
	if c := binary.LittleEndian.Uint32(signed[at:]); c != authenticode.Checksum(signed, at) {
		t.Errorf("checksum %#x, want %#x", c, authenticode.Checksum(signed, at))
	}
}

func TestParseRefuses(t *testing.T) {
	pe := authenticodetest.PE([]byte("x"), nil)
	for _, tc := range []struct {
		name string
		mut  func([]byte) []byte
	}{
		{"empty", func([]byte) []byte { return nil }},
		{"no MZ", func(b []byte) []byte { b[0] = 'X'; return b }},
		{"no PE", func(b []byte) []byte { b[0x80] = 'X'; return b }},
		{"bad magic", func(b []byte) []byte { b[0x80+24] = 0; return b }},
		{"section past the end", func(b []byte) []byte { return b[:0x300] }},
		{"certificate table not at the end", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[0x80+24+112+32:], 0x200)
			binary.LittleEndian.PutUint32(b[0x80+24+112+36:], 8)
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := authenticode.Parse(tc.mut(bytes.Clone(pe))); err == nil {
				t.Error("Parse accepted it")
			}
		})
	}
}
