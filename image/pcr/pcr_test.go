package pcr_test

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/image/authenticode"
	"github.com/hotpath-dev/hotpath/image/authenticode/authenticodetest"
	"github.com/hotpath-dev/hotpath/image/pcr"
)

// TestReferencePCR4 works PCR 4 out by hand in both banks, as
// TPM2_PCR_Extend does it, from the three events the PC Client profile
// names (the Authenticode digest, the binary's own measurement, is
// authenticode's, tested there against osslsigncode's).
func TestReferencePCR4(t *testing.T) {
	efi := authenticodetest.PE([]byte("workload A"), nil)
	byHand := func(h crypto.Hash, hash func([]byte) []byte) string {
		app, err := authenticode.Digest(efi, h)
		if err != nil {
			t.Fatal(err)
		}
		extendDigest := func(v, d []byte) []byte { return hash(append(append([]byte{}, v...), d...)) }
		v := make([]byte, len(hash(nil)))
		v = extendDigest(v, hash([]byte("Calling EFI Application from Boot Option")))
		v = extendDigest(v, hash([]byte{0, 0, 0, 0}))
		v = extendDigest(v, app) // the app's digest is extended as is
		return hex.EncodeToString(v)
	}
	want := byHand(crypto.SHA256, func(b []byte) []byte { s := sha256.Sum256(b); return s[:] })
	want384 := byHand(crypto.SHA384, func(b []byte) []byte { s := sha512.Sum384(b); return s[:] })

	ref, err := pcr.Reference(efi)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]pcr.Value{}
	for _, r := range ref {
		got[r.PCR] = r
	}
	if g := got[4].Digests["sha256"]; g != want {
		t.Errorf("PCR 4 sha256 = %s, want %s", g, want)
	}
	if g := got[4].Digests["sha384"]; g != want384 {
		t.Errorf("PCR 4 sha384 = %s, want %s", g, want384)
	}
	if g := got[12].Digests["sha256"]; g != strings.Repeat("0", 64) {
		t.Errorf("PCR 12 sha256 = %s, want the reset value", g)
	}
	if g := got[12].Digests["sha384"]; g != strings.Repeat("0", 96) {
		t.Errorf("PCR 12 sha384 = %s, want the reset value", g)
	}

	other, err := pcr.Reference(authenticodetest.PE([]byte("workload B"), nil))
	if err != nil {
		t.Fatal(err)
	}
	if other[0].Digests["sha256"] == want {
		t.Error("another binary gives the same PCR 4")
	}
}

func TestReplayIgnoresOtherPCRs(t *testing.T) {
	ev := []pcr.Event{{PCR: 7, Digest: make([]byte, 32)}}
	if v := pcr.Replay(crypto.SHA256, 4, ev); hex.EncodeToString(v) != strings.Repeat("0", 64) {
		t.Errorf("Replay(4) extended a PCR 7 event: %x", v)
	}
	// Interleaved: PCR 4's events are extended in order, past the others.
	d1, d2 := sha256.Sum256([]byte("one")), sha256.Sum256([]byte("two"))
	ev = []pcr.Event{{PCR: 7, Digest: d2[:]}, {PCR: 4, Digest: d1[:]}, {PCR: 7, Digest: d1[:]}, {PCR: 4, Digest: d2[:]}}
	var v [32]byte
	for _, d := range [][32]byte{d1, d2} {
		v = sha256.Sum256(append(v[:], d[:]...))
	}
	if got := pcr.Replay(crypto.SHA256, 4, ev); !bytes.Equal(got, v[:]) {
		t.Errorf("Replay(4) of interleaved events = %x, want %x", got, v)
	}
}
