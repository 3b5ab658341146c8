// Package sign signs the appliance's EFI binary for UEFI Secure Boot: an
// Authenticode PKCS#7 SignedData over the image's Authenticode digest,
// embedded in its certificate table, as sbsign and signtool make it.
//
// Why our own and not a tool: the signature has to be deterministic, so that
// the signed disk stays byte-reproducible for the same key, and no signer
// at hand is. Debian's sbsign 0.9.4 stamps a signingTime attribute (two
// signatures of the same binary two seconds apart differ in 259 bytes), and
// github.com/foxboron/go-uefi, the library behind sbctl, is not served by
// the module proxy this project builds from (403). Here the signed
// attributes are only the content type, the message digest and an empty
// SpcSpOpusInfo, and RSA PKCS#1 v1.5 signatures are a function of the key
// and the message, so the same key and binary give the same bytes.
//
// The key is a crypto.Signer: a file key (LoadFiles) today, a PKCS#11 token
// or a key service's signer later, without this package knowing. The key
// never leaves the signer and nothing here logs it.
package sign

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sort"
	"unicode/utf16"

	"github.com/hotpath-dev/hotpath/image/authenticode"
)

// Key is a signing key and the certificate that db (or a CA in db) trusts.
type Key struct {
	// Signer holds the private key; only its Sign method is used, with
	// SHA-256 digests.
	Signer crypto.Signer
	Cert   *x509.Certificate
}

// Fingerprint is the certificate's SHA-256 fingerprint in lower-case hex,
// what the manifest records.
func (k *Key) Fingerprint() string {
	s := sha256.Sum256(k.Cert.Raw)
	return hex.EncodeToString(s[:])
}

// Check refuses a key the firmware cannot verify or that would not sign
// deterministically: UEFI firmware verifies RSA (2048 bits is what the
// specification requires of it), and an ECDSA signature is randomized.
func (k *Key) Check() error {
	pub, ok := k.Signer.Public().(*rsa.PublicKey)
	if !ok {
		return fmt.Errorf("sign: key is %T, want RSA (what UEFI firmware verifies, and deterministic)", k.Signer.Public())
	}
	if !pub.Equal(k.Cert.PublicKey) {
		return errors.New("sign: the key is not the certificate's")
	}
	if pub.N.BitLen() < 2048 {
		return fmt.Errorf("sign: RSA key of %d bits, want at least 2048", pub.N.BitLen())
	}
	return nil
}

// LoadFiles reads a PEM private key (PKCS#1 or unencrypted PKCS#8) and a
// PEM or DER certificate. An encrypted key is refused: decrypt it into a
// file only the build can read, or use a signer that asks its token.
func LoadFiles(keyPath, certPath string) (*Key, error) {
	kb, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	cert, err := ReadCertificate(certPath)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(kb)
	if blk == nil {
		return nil, fmt.Errorf("sign: %s: no PEM private key", keyPath)
	}
	var key any
	switch blk.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	case "ENCRYPTED PRIVATE KEY":
		return nil, fmt.Errorf("sign: %s: the key is encrypted (decrypt it for the build, e.g. openssl pkey -in KEY -out PLAIN)", keyPath)
	default:
		return nil, fmt.Errorf("sign: %s: PEM block %q, want a private key", keyPath, blk.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("sign: %s: %w", keyPath, err)
	}
	s, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("sign: %s: %T cannot sign", keyPath, key)
	}
	k := &Key{Signer: s, Cert: cert}
	if err := k.Check(); err != nil {
		return nil, err
	}
	return k, nil
}

// ReadCertificate reads one X.509 certificate, PEM or DER.
func ReadCertificate(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	c, err := ParseCertificate(b)
	if err != nil {
		return nil, fmt.Errorf("sign: %s: %w", path, err)
	}
	return c, nil
}

// ParseCertificate parses one X.509 certificate, PEM or DER.
func ParseCertificate(b []byte) (*x509.Certificate, error) {
	if blk, _ := pem.Decode(b); blk != nil {
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %q, want CERTIFICATE", blk.Type)
		}
		b = blk.Bytes
	}
	return x509.ParseCertificate(b)
}

// Sign returns pe signed with k: padded to 8 bytes, its Authenticode
// SHA-256 digest signed, the SignedData in its certificate table.
func Sign(pe []byte, k *Key) ([]byte, error) {
	if err := k.Check(); err != nil {
		return nil, err
	}
	padded := authenticode.Pad(pe)
	digest, err := authenticode.Digest(padded, crypto.SHA256)
	if err != nil {
		return nil, err
	}
	sd, err := signedData(digest, k)
	if err != nil {
		return nil, err
	}
	return authenticode.Embed(padded, sd)
}

// Object identifiers of Authenticode and PKCS#7/#9.
var (
	oidSignedData      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 2}
	oidSpcIndirectData = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 2, 1, 4}
	oidSpcPEImageData  = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 2, 1, 15}
	oidSpcSpOpusInfo   = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 2, 1, 12}
	oidContentType     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 3}
	oidMessageDigest   = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 4}
	oidSHA256          = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 1}
	oidRSAEncryption   = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 1}
)

// DER tags used below.
const (
	tagInteger    = 0x02
	tagBitString  = 0x03
	tagOctets     = 0x04
	tagNull       = 0x05
	tagSequence   = 0x30
	tagSet        = 0x31
	tagContext0   = 0xa0 // [0] constructed
	tagContext2   = 0xa2 // [2] constructed
	tagContext0Pr = 0x80 // [0] primitive
)

// signedData is the DER ContentInfo of an Authenticode SignedData over the
// image digest.
func signedData(digest []byte, k *Key) ([]byte, error) {
	alg := algorithm(oidSHA256)
	// SpcIndirectDataContent: the PE image data object (no flags, the
	// customary "<<<Obsolete>>>" file link) and the image's digest.
	peData := tlv(tagSequence, oid(oidSpcPEImageData), tlv(tagSequence,
		tlv(tagBitString, []byte{0}),
		tlv(tagContext0, tlv(tagContext2, tlv(tagContext0Pr, bmp("<<<Obsolete>>>"))))))
	indirect := concat(peData, tlv(tagSequence, alg, tlv(tagOctets, digest)))
	// The message digest covers the content without its SEQUENCE header.
	md := sha256.Sum256(indirect)
	attrs := set(
		attribute(oidContentType, oid(oidSpcIndirectData)),
		attribute(oidMessageDigest, tlv(tagOctets, md[:])),
		attribute(oidSpcSpOpusInfo, tlv(tagSequence)),
	)
	h := sha256.Sum256(tlv(tagSet, attrs))
	sig, err := k.Signer.Sign(rand.Reader, h[:], crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	serial, err := asn1.Marshal(k.Cert.SerialNumber)
	if err != nil {
		return nil, fmt.Errorf("sign: certificate serial: %w", err)
	}
	signer := tlv(tagSequence,
		integer(1),
		tlv(tagSequence, k.Cert.RawIssuer, serial),
		alg,
		tlv(tagContext0, attrs),
		algorithm(oidRSAEncryption),
		tlv(tagOctets, sig),
	)
	sd := tlv(tagSequence,
		integer(1),
		tlv(tagSet, alg),
		tlv(tagSequence, oid(oidSpcIndirectData), tlv(tagContext0, tlv(tagSequence, indirect))),
		tlv(tagContext0, k.Cert.Raw),
		tlv(tagSet, signer),
	)
	return tlv(tagSequence, oid(oidSignedData), tlv(tagContext0, sd)), nil
}

// tlv is one DER element with definite length.
func tlv(tag byte, content ...[]byte) []byte {
	c := concat(content...)
	out := []byte{tag}
	switch n := len(c); {
	case n < 0x80:
		out = append(out, byte(n))
	case n < 0x100:
		out = append(out, 0x81, byte(n))
	case n < 0x10000:
		out = append(out, 0x82, byte(n>>8), byte(n))
	default:
		out = append(out, 0x83, byte(n>>16), byte(n>>8), byte(n))
	}
	return append(out, c...)
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func oid(o asn1.ObjectIdentifier) []byte {
	b, err := asn1.Marshal(o)
	if err != nil {
		panic(err) // only the constants above
	}
	return b
}

func integer(v int) []byte { return tlv(tagInteger, []byte{byte(v)}) }

func algorithm(o asn1.ObjectIdentifier) []byte { return tlv(tagSequence, oid(o), tlv(tagNull)) }

func attribute(o asn1.ObjectIdentifier, value []byte) []byte {
	return tlv(tagSequence, oid(o), tlv(tagSet, value))
}

// set is the content of a DER SET OF: its members sorted by encoding.
func set(members ...[]byte) []byte {
	sort.Slice(members, func(i, j int) bool { return bytes.Compare(members[i], members[j]) < 0 })
	return concat(members...)
}

func bmp(s string) []byte {
	var out []byte
	for _, u := range utf16.Encode([]rune(s)) {
		out = append(out, byte(u>>8), byte(u))
	}
	return out
}
