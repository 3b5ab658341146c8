// Package authenticode computes the Authenticode digest of a PE/COFF image
// and embeds a signature in one: the two things both UEFI Secure Boot (which
// checks the signature against db) and measured boot (which extends the
// digest into PCR 4) do with the boot application.
//
// The digest is the one Microsoft's "Windows Authenticode Portable
// Executable Signature Format" defines and EDK II's HashPeImage computes:
// the headers without the checksum and the certificate table's directory
// entry, then every section's raw data in file order, then whatever follows
// the last section up to the certificate table. Signing does not change it,
// which is why a signed and an unsigned binary measure the same.
package authenticode

import (
	"crypto"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// Layout is where the fields the digest skips sit in one image.
type Layout struct {
	checksum    int // offset of OptionalHeader.CheckSum
	certDir     int // offset of the certificate table's data directory entry
	headersEnd  int // SizeOfHeaders
	sections    []span
	certOff     int // the certificate table, or 0
	certSize    int
	sectionsEnd int // the end of the last section's raw data
}

type span struct{ off, size int }

const (
	peMagic32     = 0x10b
	peMagic64     = 0x20b
	dirSecurity   = 4 // IMAGE_DIRECTORY_ENTRY_SECURITY
	sectionHeader = 40
)

// Parse finds the layout of a PE/COFF image, refusing one whose headers or
// sections lie outside the file.
func Parse(b []byte) (*Layout, error) {
	if len(b) < 0x40 || b[0] != 'M' || b[1] != 'Z' {
		return nil, errors.New("authenticode: no MZ header")
	}
	pe := int(binary.LittleEndian.Uint32(b[0x3c:]))
	if pe < 0 || pe+24 > len(b) || string(b[pe:pe+4]) != "PE\x00\x00" {
		return nil, errors.New("authenticode: no PE header")
	}
	nsec := int(binary.LittleEndian.Uint16(b[pe+6:]))
	optSize := int(binary.LittleEndian.Uint16(b[pe+20:]))
	opt := pe + 24
	if opt+optSize > len(b) || optSize < 2 {
		return nil, errors.New("authenticode: optional header beyond the file")
	}
	var dirs, nrva int
	switch m := binary.LittleEndian.Uint16(b[opt:]); m {
	case peMagic32:
		dirs, nrva = opt+96, opt+92
	case peMagic64:
		dirs, nrva = opt+112, opt+108
	default:
		return nil, fmt.Errorf("authenticode: optional header magic %#x", m)
	}
	if dirs > opt+optSize || int(binary.LittleEndian.Uint32(b[nrva:])) <= dirSecurity || dirs+8*(dirSecurity+1) > opt+optSize {
		return nil, errors.New("authenticode: no certificate table directory entry")
	}
	l := &Layout{
		checksum:   opt + 64,
		certDir:    dirs + 8*dirSecurity,
		headersEnd: int(binary.LittleEndian.Uint32(b[opt+60:])),
	}
	if l.headersEnd > len(b) || l.headersEnd < opt+optSize {
		return nil, fmt.Errorf("authenticode: SizeOfHeaders %d outside the file", l.headersEnd)
	}
	l.certOff = int(binary.LittleEndian.Uint32(b[l.certDir:]))
	l.certSize = int(binary.LittleEndian.Uint32(b[l.certDir+4:]))
	if l.certSize > 0 && (l.certOff < l.headersEnd || l.certOff+l.certSize != len(b)) {
		return nil, fmt.Errorf("authenticode: certificate table at %d+%d is not the end of the %d-byte file", l.certOff, l.certSize, len(b))
	}
	sh := opt + optSize
	if sh+nsec*sectionHeader > len(b) {
		return nil, errors.New("authenticode: section table beyond the file")
	}
	l.sectionsEnd = l.headersEnd
	for i := 0; i < nsec; i++ {
		h := b[sh+i*sectionHeader:]
		s := span{size: int(binary.LittleEndian.Uint32(h[16:])), off: int(binary.LittleEndian.Uint32(h[20:]))}
		if s.size == 0 {
			continue
		}
		if s.off+s.size > len(b)-l.certSize || s.off < l.headersEnd {
			return nil, fmt.Errorf("authenticode: section %d (%d+%d) outside the image", i, s.off, s.size)
		}
		l.sections = append(l.sections, s)
		l.sectionsEnd = max(l.sectionsEnd, s.off+s.size)
	}
	sort.Slice(l.sections, func(i, j int) bool { return l.sections[i].off < l.sections[j].off })
	return l, nil
}

// Signed reports whether the image carries a certificate table.
func (l *Layout) Signed() bool { return l.certSize > 0 }

// Digest returns the Authenticode digest of b with hash h.
func Digest(b []byte, h crypto.Hash) ([]byte, error) {
	if !h.Available() {
		return nil, fmt.Errorf("authenticode: hash %v not linked into the binary", h)
	}
	l, err := Parse(b)
	if err != nil {
		return nil, err
	}
	return l.digest(b, h), nil
}

func (l *Layout) digest(b []byte, h crypto.Hash) []byte {
	d := h.New()
	d.Write(b[:l.checksum])
	d.Write(b[l.checksum+4 : l.certDir])
	d.Write(b[l.certDir+8 : l.headersEnd])
	hashed := l.headersEnd
	for _, s := range l.sections {
		d.Write(b[s.off : s.off+s.size])
		hashed += s.size
	}
	// EDK II counts the bytes hashed rather than taking the last section's
	// end; for images whose sections neither overlap nor leave gaps (every
	// linker's output) the two agree.
	if end := len(b) - l.certSize; end > hashed {
		d.Write(b[hashed:end])
	}
	return d.Sum(nil)
}

// WIN_CERTIFICATE values for a PKCS#7 SignedData.
const (
	certRevision = 0x0200
	certPKCS7    = 0x0002
)

// Embed returns b with the DER PKCS#7 SignedData sig appended as its only
// certificate table entry (quadword aligned, as the format requires) and
// the checksum recomputed. b must be unsigned and already padded with
// Pad, so that the digest signed is the digest of the result.
func Embed(b, sig []byte) ([]byte, error) {
	l, err := Parse(b)
	if err != nil {
		return nil, err
	}
	if l.Signed() {
		return nil, errors.New("authenticode: the image is already signed")
	}
	if len(b)%8 != 0 {
		return nil, errors.New("authenticode: the image is not padded to 8 bytes")
	}
	entry := 8 + len(sig)
	out := make([]byte, 0, len(b)+align8(entry))
	out = append(out, b...)
	out = binary.LittleEndian.AppendUint32(out, uint32(entry))
	out = binary.LittleEndian.AppendUint16(out, certRevision)
	out = binary.LittleEndian.AppendUint16(out, certPKCS7)
	out = append(out, sig...)
	out = append(out, make([]byte, align8(entry)-entry)...)
	binary.LittleEndian.PutUint32(out[l.certDir:], uint32(len(b)))
	binary.LittleEndian.PutUint32(out[l.certDir+4:], uint32(align8(entry)))
	binary.LittleEndian.PutUint32(out[l.checksum:], Checksum(out, l.checksum))
	return out, nil
}

// Certificate returns the PKCS#7 SignedData of a signed image's first
// certificate table entry.
func Certificate(b []byte) ([]byte, error) {
	l, err := Parse(b)
	if err != nil {
		return nil, err
	}
	if !l.Signed() {
		return nil, errors.New("authenticode: the image is not signed")
	}
	e := b[l.certOff : l.certOff+l.certSize]
	n := int(binary.LittleEndian.Uint32(e))
	if n < 8 || n > len(e) || binary.LittleEndian.Uint16(e[6:]) != certPKCS7 {
		return nil, errors.New("authenticode: the first certificate table entry is not a PKCS#7 signature")
	}
	return e[8:n], nil
}

// Pad returns b zero-padded to a multiple of 8 bytes: the certificate
// table that Embed appends must start quadword aligned, and the padding is
// part of what the digest covers.
func Pad(b []byte) []byte {
	if len(b)%8 == 0 {
		return b
	}
	return append(b[:len(b):len(b)], make([]byte, align8(len(b))-len(b))...)
}

func align8(n int) int { return (n + 7) &^ 7 }

// Checksum is the PE image checksum (the 16-bit one's-complement sum of
// the image with the checksum field taken as zero, plus the image's
// length). Firmware does not check it; Windows tools do.
func Checksum(b []byte, at int) uint32 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		if i == at || i == at+2 {
			continue
		}
		sum += uint32(binary.LittleEndian.Uint16(b[i:]))
		sum = (sum & 0xffff) + sum>>16
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1])
		sum = (sum & 0xffff) + sum>>16
	}
	return sum + uint32(len(b))
}
