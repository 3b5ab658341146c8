package pcr_test

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	_ "crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strings"
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

// specGUID is a GUID's registry form in EFI byte order: the first three
// fields little-endian, the last eight bytes as written (UEFI spec,
// appendix A, EFI_GUID).
func specGUID(s string) []byte {
	var b []byte
	for i, f := range strings.Split(s, "-") {
		x, _ := hex.DecodeString(f)
		if i < 3 {
			slices.Reverse(x)
		}
		b = append(b, x...)
	}
	return b
}

// specVariableData is UEFI_VARIABLE_DATA (TCG PC Client Platform Firmware
// Profile, 10.2.6): VariableName (a GUID), UnicodeNameLength (UINT64,
// characters), VariableDataLength (UINT64, bytes), UnicodeName (UTF-16LE,
// no NUL), VariableData. The names here are ASCII, so one UTF-16 unit each.
func specVariableData(guid, name string, data []byte) []byte {
	b := specGUID(guid)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(name)))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(data)))
	for _, c := range []byte(name) {
		b = append(b, c, 0)
	}
	return append(b, data...)
}

// specPCR7 replays, in bank h, what the PC Client profile (10.4.4, and
// EDK II's SecureBootPolicy measurement) has firmware enforcing Secure Boot
// extend into PCR 7 before it starts a boot application db verified:
// EV_EFI_VARIABLE_DRIVER_CONFIG of SecureBoot (01), PK, KEK, db and dbx,
// EV_SEPARATOR (00000000), then EV_EFI_VARIABLE_AUTHORITY: the db entry
// (EFI_SIGNATURE_DATA) that verified it. Each digest is that of the
// event's data, each extend new = H(old || digest), from 0s.
func specPCR7(h crypto.Hash, pk, kek, db, dbx, authority []byte) string {
	const global = "8be4df61-93ca-11d2-aa0d-00e098032b8c"   // EFI_GLOBAL_VARIABLE
	const security = "d719b2cb-3d3a-4596-a3bc-dad00e67656f" // EFI_IMAGE_SECURITY_DATABASE_GUID
	events := [][]byte{
		specVariableData(global, "SecureBoot", []byte{1}),
		specVariableData(global, "PK", pk),
		specVariableData(global, "KEK", kek),
		specVariableData(security, "db", db),
		specVariableData(security, "dbx", dbx),
		{0, 0, 0, 0},
		specVariableData(security, "db", authority),
	}
	v := make([]byte, h.Size())
	for _, e := range events {
		d := h.New()
		d.Write(e)
		x := h.New()
		x.Write(v)
		x.Write(d.Sum(nil))
		v = x.Sum(nil)
	}
	return hex.EncodeToString(v)
}

// TestSecureBootPolicyValueFromSpec: PCR 7 in both banks, predicted from
// the event sequence above, written here from the specification, not by
// calling the code: with and without a dbx, and with a longer db.
func TestSecureBootPolicyValueFromSpec(t *testing.T) {
	db := append(signatureList(1, []byte("cert-one"), []byte("cert-two")), signatureList(2, []byte("longer cert"))...)
	entry, ok := pcr.DBEntry(db, []byte("longer cert"))
	if !ok {
		t.Fatal("no db entry")
	}
	for _, vars := range []pcr.SecureBootVars{
		{PK: signatureList(3, []byte("pk")), KEK: signatureList(4, []byte("kek")), DB: db},
		{PK: signatureList(3, []byte("pk")), KEK: signatureList(4, []byte("kek one"), []byte("kek two")), DB: db, DBX: signatureList(5, []byte("revoked"))},
	} {
		got := pcr.SecureBootPolicyValue(vars, entry)
		if got.PCR != 7 {
			t.Errorf("PCR %d, want 7", got.PCR)
		}
		for _, h := range []crypto.Hash{crypto.SHA256, crypto.SHA384} {
			if want := specPCR7(h, vars.PK, vars.KEK, vars.DB, vars.DBX, entry); got.Digests[pcr.BankName(h)] != want {
				t.Errorf("dbx %d bytes: PCR 7 %s = %s, want %s", len(vars.DBX), pcr.BankName(h), got.Digests[pcr.BankName(h)], want)
			}
		}
	}
}

// rawList is an EFI_SIGNATURE_LIST of X.509 type with the given
// SignatureListSize, SignatureHeaderSize and SignatureSize fields as they
// are (malformed ones too), hdr zero bytes of header, then entries.
func rawList(size, hdr, sig int, entries ...[]byte) []byte {
	x509 := []byte{0xa1, 0x59, 0xc0, 0xa5, 0xe4, 0x94, 0xa7, 0x4a, 0x87, 0xb5, 0xab, 0x15, 0x5c, 0x2b, 0xf0, 0x72}
	b := append([]byte{}, x509...)
	b = binary.LittleEndian.AppendUint32(b, uint32(size))
	b = binary.LittleEndian.AppendUint32(b, uint32(hdr))
	b = binary.LittleEndian.AppendUint32(b, uint32(sig))
	b = append(b, make([]byte, hdr)...)
	for _, e := range entries {
		b = append(b, e...)
	}
	return b
}

// TestDBEntryLists: lists DBEntry must step over (a signature header, no
// entries, empty signatures) and malformed ones it must stop at without
// reading past db (passed with no spare capacity, so that a read beyond
// it panics instead of finding zeros).
func TestDBEntryLists(t *testing.T) {
	cert := []byte("the cert")
	entry := append(bytes.Repeat([]byte{7}, 16), cert...)
	good := signatureList(7, cert)
	for _, tc := range []struct {
		name  string
		db    []byte
		found bool
	}{
		{"a signature header before the entries", rawList(28+8+len(entry), 8, len(entry), entry), true},
		{"an empty list first", append(rawList(28, 0, len(entry)), good...), true},
		{"a list of empty signatures first", append(rawList(28+16, 0, 16, make([]byte, 16)), good...), true},
		{"the last list holds others only", signatureList(7, []byte("not this"), []byte("nor that")), false},
		// 28 bytes that claim 8 of signature header besides: the next
		// list (the cert's) follows where its size says it ends.
		{"a list smaller than its header: stop", append(rawList(28, 8, len(entry))[:28], good...), false},
		{"a list longer than db: stop", rawList(28+2*len(entry), 0, len(entry), entry[:len(entry)-1]), false},
		{"signatures shorter than their owner: stop", append(rawList(28+8, 0, 8, make([]byte, 8)), good...), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := tc.db[:len(tc.db):len(tc.db)]
			e, ok := pcr.DBEntry(db, cert)
			if ok != tc.found || ok && !bytes.Equal(e, entry) {
				t.Errorf("DBEntry = %q, %v; want found %v", e, ok, tc.found)
			}
		})
	}
}
