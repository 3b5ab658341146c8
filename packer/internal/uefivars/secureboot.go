package uefivars

import (
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// GUID is an EFI GUID in its byte order (the first three fields
// little-endian).
type GUID [16]byte

// ParseGUID reads the textual form, 8-4-4-4-12 hex digits.
func ParseGUID(s string) (GUID, error) {
	var g GUID
	h := strings.ReplaceAll(s, "-", "")
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != 16 || len(s) != 36 {
		return g, fmt.Errorf("uefivars: %q is not a GUID", s)
	}
	binary.LittleEndian.PutUint32(g[0:], binary.BigEndian.Uint32(b[0:]))
	binary.LittleEndian.PutUint16(g[4:], binary.BigEndian.Uint16(b[4:]))
	binary.LittleEndian.PutUint16(g[6:], binary.BigEndian.Uint16(b[6:]))
	copy(g[8:], b[8:])
	return g, nil
}

func mustGUID(s string) GUID {
	g, err := ParseGUID(s)
	if err != nil {
		panic(err)
	}
	return g
}

func (g GUID) String() string {
	le := binary.LittleEndian
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x", le.Uint32(g[0:]), le.Uint16(g[4:]), le.Uint16(g[6:]), g[8:10], g[10:])
}

// GUIDs of the UEFI specification.
var (
	// GlobalVariable owns PK and KEK.
	GlobalVariable = mustGUID("8be4df61-93ca-11d2-aa0d-00e098032b8c")
	// ImageSecurityDatabase owns db and dbx.
	ImageSecurityDatabase = mustGUID("d719b2cb-3d3a-4596-a3bc-dad00e67656f")
	// CertX509 is EFI_CERT_X509_GUID, a signature list of DER certificates.
	CertX509 = mustGUID("a5c059a1-94e4-4aa7-87b5-ab155c2bf072")
	// HotpathOwner is the SignatureOwner of the certificates hotpath enrolls.
	HotpathOwner = mustGUID("6b0c3a5e-1f4d-4c2b-9a77-2f5e8d0b4a11")
)

// SecureBootCerts are the certificates of the three Secure Boot variables,
// each a DER X.509 certificate.
type SecureBootCerts struct {
	PK  []byte
	KEK [][]byte
	DB  [][]byte
}

// Variables returns PK, KEK and db as time-based authenticated variables
// whose data are EFI_SIGNATURE_LISTs of X.509 certificates, one list per
// certificate (their sizes differ), owned by HotpathOwner; the time stamp
// and digest are none (python-uefivars writes 16 zero bytes and a 32-byte
// zero digest for them, and so does Encode).
func (c SecureBootCerts) Variables() ([]Variable, error) {
	if c.PK == nil || len(c.KEK) == 0 || len(c.DB) == 0 {
		return nil, errors.New("uefivars: Secure Boot needs a PK, at least one KEK and at least one db certificate")
	}
	for _, der := range append([][]byte{c.PK}, append(c.KEK, c.DB...)...) {
		if _, err := x509.ParseCertificate(der); err != nil {
			return nil, fmt.Errorf("uefivars: %w", err)
		}
	}
	return []Variable{
		{Name: "PK", GUID: GlobalVariable, Attrs: SecureBootAttrs, Data: SignatureLists([][]byte{c.PK})},
		{Name: "KEK", GUID: GlobalVariable, Attrs: SecureBootAttrs, Data: SignatureLists(c.KEK)},
		{Name: "db", GUID: ImageSecurityDatabase, Attrs: SecureBootAttrs, Data: SignatureLists(c.DB)},
	}, nil
}

// SignatureLists encodes one EFI_SIGNATURE_LIST per DER certificate.
func SignatureLists(certs [][]byte) []byte {
	var out []byte
	le := binary.LittleEndian
	for _, der := range certs {
		sigSize := 16 + len(der)
		out = append(out, CertX509[:]...)
		out = le.AppendUint32(out, uint32(28+sigSize)) // SignatureListSize
		out = le.AppendUint32(out, 0)                  // SignatureHeaderSize
		out = le.AppendUint32(out, uint32(sigSize))    // SignatureSize
		out = append(out, HotpathOwner[:]...)
		out = append(out, der...)
	}
	return out
}

// Certificates returns the X.509 certificates in EFI_SIGNATURE_LISTs,
// refusing lists that are malformed; lists of other signature types
// (hashes, as dbx holds) are skipped.
func Certificates(lists []byte) ([]*x509.Certificate, error) {
	le := binary.LittleEndian
	var out []*x509.Certificate
	for len(lists) > 0 {
		if len(lists) < 28 {
			return nil, errors.New("uefivars: truncated EFI_SIGNATURE_LIST header")
		}
		var typ GUID
		copy(typ[:], lists)
		size, hdr, sig := int(le.Uint32(lists[16:])), int(le.Uint32(lists[20:])), int(le.Uint32(lists[24:]))
		if size < 28+hdr || size > len(lists) || sig < 16 || (size-28-hdr)%sig != 0 {
			return nil, fmt.Errorf("uefivars: EFI_SIGNATURE_LIST of %d bytes (header %d, signatures of %d) in %d", size, hdr, sig, len(lists))
		}
		if typ == CertX509 {
			for p := 28 + hdr; p < size; p += sig {
				c, err := x509.ParseCertificate(lists[p+16 : p+sig])
				if err != nil {
					return nil, fmt.Errorf("uefivars: certificate in the signature list: %w", err)
				}
				out = append(out, c)
			}
		}
		lists = lists[size:]
	}
	return out, nil
}
