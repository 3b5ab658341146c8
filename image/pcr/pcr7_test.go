package pcr_test

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/hotpath-dev/hotpath/image/pcr"
)

// signatureList is one EFI_SIGNATURE_LIST of X.509 certificates, each of
// size bytes, all owned by owner.
func signatureList(owner byte, certs ...[]byte) []byte {
	x509 := []byte{0xa1, 0x59, 0xc0, 0xa5, 0xe4, 0x94, 0xa7, 0x4a, 0x87, 0xb5, 0xab, 0x15, 0x5c, 0x2b, 0xf0, 0x72}
	sig := 16 + len(certs[0])
	b := append([]byte{}, x509...)
	b = binary.LittleEndian.AppendUint32(b, uint32(28+sig*len(certs)))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(sig))
	for _, c := range certs {
		b = append(b, bytes.Repeat([]byte{owner}, 16)...)
		b = append(b, c...)
	}
	return b
}

func TestDBEntry(t *testing.T) {
	db := append(signatureList(1, []byte("cert-one"), []byte("cert-two")), signatureList(2, []byte("longer cert"))...)
	for _, tc := range []struct {
		cert  string
		owner byte
	}{{"cert-two", 1}, {"longer cert", 2}} {
		e, ok := pcr.DBEntry(db, []byte(tc.cert))
		if !ok || e[0] != tc.owner || string(e[16:]) != tc.cert {
			t.Errorf("DBEntry(%s) = %q, %v", tc.cert, e, ok)
		}
	}
	if _, ok := pcr.DBEntry(db, []byte("cert-six")); ok {
		t.Error("found a certificate db does not hold")
	}
}

// TestSecureBootPolicyEvents: the seven events in order, and the variable
// data encoded as UEFI_VARIABLE_DATA (checked for PK by hand).
func TestSecureBootPolicyEvents(t *testing.T) {
	vars := pcr.SecureBootVars{PK: []byte("pk"), KEK: []byte("kek"), DB: []byte("db")}
	ev := pcr.SecureBootPolicy(vars, []byte("entry"), crypto.SHA256)
	want := []uint32{pcr.EvEFIVariableDriverConfig, pcr.EvEFIVariableDriverConfig, pcr.EvEFIVariableDriverConfig,
		pcr.EvEFIVariableDriverConfig, pcr.EvEFIVariableDriverConfig, pcr.EvSeparator, pcr.EvEFIVariableAuthority}
	if len(ev) != len(want) {
		t.Fatalf("%d events", len(ev))
	}
	for i, e := range ev {
		if e.Type != want[i] || e.PCR != 7 {
			t.Errorf("event %d: type %#x pcr %d", i, e.Type, e.PCR)
		}
	}
	pk := append(append([]byte{}, pcr.GlobalVariable[:]...), 2, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 'P', 0, 'K', 0, 'p', 'k')
	if s := sha256.Sum256(pk); !bytes.Equal(ev[1].Digest, s[:]) {
		t.Errorf("PK event digest %x, want %x", ev[1].Digest, s)
	}
	if a, b := pcr.SecureBootPolicyValue(vars, []byte("entry")), pcr.SecureBootPolicyValue(vars, []byte("other")); a.Digests["sha384"] == b.Digests["sha384"] {
		t.Error("another authority gives the same PCR 7")
	}
}
