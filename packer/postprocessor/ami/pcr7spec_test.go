package ami

import (
	"crypto"
	_ "crypto/sha256"
	_ "crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strings"
)

// The PCR 7 these tests expect, replayed here from the TCG PC Client
// Platform Firmware Profile's event sequence rather than by image/pcr,
// which the code under test calls (a wrong prediction there would be
// expected here too). image/pcr's TestSecureBootPolicyValueFromSpec does
// the same for the package itself.

// specGUID is a GUID's registry form in EFI byte order (first three
// fields little-endian).
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

// specVariableData is UEFI_VARIABLE_DATA: GUID, UINT64 name length in
// characters, UINT64 data length, the (ASCII) name in UTF-16LE, the data.
func specVariableData(guid, name string, data []byte) []byte {
	b := specGUID(guid)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(name)))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(data)))
	for _, c := range []byte(name) {
		b = append(b, c, 0)
	}
	return append(b, data...)
}

// specPCR7 is PCR 7 in bank h after firmware enforcing Secure Boot has
// measured SecureBoot (01), PK, KEK, db, dbx (EV_EFI_VARIABLE_DRIVER_CONFIG),
// the separator (00000000) and the db entry that verified the boot
// application (EV_EFI_VARIABLE_AUTHORITY): new = H(old || H(event data)).
func specPCR7(h crypto.Hash, pk, kek, db, dbx, authority []byte) string {
	const global = "8be4df61-93ca-11d2-aa0d-00e098032b8c"
	const security = "d719b2cb-3d3a-4596-a3bc-dad00e67656f"
	v := make([]byte, h.Size())
	for _, e := range [][]byte{
		specVariableData(global, "SecureBoot", []byte{1}),
		specVariableData(global, "PK", pk),
		specVariableData(global, "KEK", kek),
		specVariableData(security, "db", db),
		specVariableData(security, "dbx", dbx),
		{0, 0, 0, 0},
		specVariableData(security, "db", authority),
	} {
		d := h.New()
		d.Write(e)
		x := h.New()
		x.Write(v)
		x.Write(d.Sum(nil))
		v = x.Sum(nil)
	}
	return hex.EncodeToString(v)
}
