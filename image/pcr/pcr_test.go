package pcr_test

import (
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/image/authenticode"
	"github.com/hotpath-dev/hotpath/image/authenticode/authenticodetest"
	"github.com/hotpath-dev/hotpath/image/pcr"
)

// TestReferencePCR4 works PCR 4 out by hand, as TPM2_PCR_Extend does it,
// from the three events the PC Client profile names.
func TestReferencePCR4(t *testing.T) {
	efi := authenticodetest.PE([]byte("workload A"), nil)
	app, err := authenticode.Digest(efi, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	extend := func(v []byte, data []byte) []byte {
		d := sha256.Sum256(data)
		s := sha256.Sum256(append(append([]byte{}, v...), d[:]...))
		return s[:]
	}
	v := make([]byte, 32)
	v = extend(v, []byte("Calling EFI Application from Boot Option"))
	v = extend(v, []byte{0, 0, 0, 0})
	s := sha256.Sum256(append(append([]byte{}, v...), app...)) // the app's digest is extended as is
	want := hex.EncodeToString(s[:])

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
	if g := got[4].Digests["sha384"]; len(g) != 96 {
		t.Errorf("PCR 4 sha384 = %q", g)
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
}
