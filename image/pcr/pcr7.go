package pcr

import (
	"bytes"
	"crypto"
	"encoding/binary"
	"encoding/hex"
	"unicode/utf16"
)

// Event types of PCR 7 (TCG PC Client Platform Firmware Profile).
const (
	EvEFIVariableDriverConfig uint32 = 0x80000001
	EvEFIVariableAuthority    uint32 = 0x800000e0
)

// EFI GUIDs in EFI byte order.
var (
	// GlobalVariable owns SecureBoot, PK and KEK.
	GlobalVariable = [16]byte{0x61, 0xdf, 0xe4, 0x8b, 0xca, 0x93, 0xd2, 0x11, 0xaa, 0x0d, 0x00, 0xe0, 0x98, 0x03, 0x2b, 0x8c}
	// ImageSecurityDatabase owns db and dbx.
	ImageSecurityDatabase = [16]byte{0xcb, 0xb2, 0x19, 0xd7, 0x3a, 0x3d, 0x96, 0x45, 0xa3, 0xbc, 0xda, 0xd0, 0x0e, 0x67, 0x65, 0x6f}
	// certX509 is EFI_CERT_X509_GUID.
	certX509 = [16]byte{0xa1, 0x59, 0xc0, 0xa5, 0xe4, 0x94, 0xa7, 0x4a, 0x87, 0xb5, 0xab, 0x15, 0x5c, 0x2b, 0xf0, 0x72}
)

// SecureBootVars are the contents of the Secure Boot variables as the
// firmware holds them (EFI_SIGNATURE_LISTs); a nil one does not exist.
type SecureBootVars struct {
	PK, KEK, DB, DBX []byte
}

// SecureBootPolicy returns the PCR 7 events in bank h of firmware that
// enforces Secure Boot with vars and verifies the boot application
// against the db entry authority (an EFI_SIGNATURE_DATA: owner GUID and
// certificate), in the order EDK II extends them: SecureBoot, PK, KEK, db,
// dbx as EV_EFI_VARIABLE_DRIVER_CONFIG, the separator, then the authority.
func SecureBootPolicy(vars SecureBootVars, authority []byte, h crypto.Hash) []Event {
	conf := func(guid [16]byte, name string, data []byte) Event {
		return Event{PCR: SecureBootPolicyPCR, Type: EvEFIVariableDriverConfig, Digest: sum(h, variableData(guid, name, data))}
	}
	return []Event{
		conf(GlobalVariable, "SecureBoot", []byte{1}),
		conf(GlobalVariable, "PK", vars.PK),
		conf(GlobalVariable, "KEK", vars.KEK),
		conf(ImageSecurityDatabase, "db", vars.DB),
		conf(ImageSecurityDatabase, "dbx", vars.DBX),
		{PCR: SecureBootPolicyPCR, Type: EvSeparator, Digest: sum(h, []byte(separatorData))},
		{PCR: SecureBootPolicyPCR, Type: EvEFIVariableAuthority, Digest: sum(h, variableData(ImageSecurityDatabase, "db", authority))},
	}
}

// SecureBootPolicyValue is PCR 7's reference value in each bank.
func SecureBootPolicyValue(vars SecureBootVars, authority []byte) Value {
	v := Value{PCR: SecureBootPolicyPCR, Digests: map[string]string{}}
	for _, h := range Banks {
		v.Digests[BankName(h)] = hex.EncodeToString(Replay(h, SecureBootPolicyPCR, SecureBootPolicy(vars, authority, h)))
	}
	return v
}

// variableData is UEFI_VARIABLE_DATA: the vendor GUID, the name's length
// in characters and the data's in bytes (UINT64 each), the name in UTF-16
// without its NUL, the data.
func variableData(guid [16]byte, name string, data []byte) []byte {
	u := utf16.Encode([]rune(name))
	b := append([]byte{}, guid[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(u)))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(data)))
	for _, c := range u {
		b = binary.LittleEndian.AppendUint16(b, c)
	}
	return append(b, data...)
}

// DBEntry finds the EFI_SIGNATURE_DATA of db (its signature lists) that
// holds the DER certificate cert: the authority the firmware measures
// when that certificate verifies the boot application.
func DBEntry(db, cert []byte) ([]byte, bool) {
	le := binary.LittleEndian
	for len(db) >= 28 {
		size, hdr, sig := int(le.Uint32(db[16:])), int(le.Uint32(db[20:])), int(le.Uint32(db[24:]))
		if size < 28+hdr || size > len(db) || sig < 16 {
			return nil, false
		}
		if bytes.Equal(db[:16], certX509[:]) {
			for p := 28 + hdr; p+sig <= size; p += sig {
				if bytes.Equal(db[p+16:p+sig], cert) {
					return db[p : p+sig], true
				}
			}
		}
		db = db[size:]
	}
	return nil, false
}
