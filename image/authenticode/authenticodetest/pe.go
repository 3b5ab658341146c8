// Package authenticodetest makes small PE32+ images for tests of packages
// that sign or measure EFI binaries.
package authenticodetest

import "encoding/binary"

// PE returns a PE32+ EFI application image for x86-64: 512 bytes of
// headers, one .text section of text (zero-padded to 512-byte file
// alignment), then tail, bytes after the last section as some linkers leave
// them.
func PE(text, tail []byte) []byte {
	const (
		peOff   = 0x80
		hdrSize = 0x200
		align   = 0x200
	)
	raw := (len(text) + align - 1) / align * align
	if raw == 0 {
		raw = align
	}
	b := make([]byte, hdrSize+raw, hdrSize+raw+len(tail))
	b[0], b[1] = 'M', 'Z'
	le := binary.LittleEndian
	le.PutUint32(b[0x3c:], peOff)
	copy(b[peOff:], "PE\x00\x00")
	coff := b[peOff+4:]
	le.PutUint16(coff[0:], 0x8664) // machine
	le.PutUint16(coff[2:], 1)      // sections
	le.PutUint16(coff[16:], 240)   // optional header size
	le.PutUint16(coff[18:], 0x22)  // executable, large address aware
	opt := b[peOff+24:]
	le.PutUint16(opt[0:], 0x20b)
	le.PutUint32(opt[4:], uint32(raw)) // SizeOfCode
	le.PutUint32(opt[16:], 0x1000)     // AddressOfEntryPoint
	le.PutUint32(opt[20:], 0x1000)     // BaseOfCode
	le.PutUint32(opt[32:], 0x1000)     // SectionAlignment
	le.PutUint32(opt[36:], align)      // FileAlignment
	le.PutUint32(opt[56:], 0x2000)     // SizeOfImage
	le.PutUint32(opt[60:], hdrSize)    // SizeOfHeaders
	le.PutUint16(opt[68:], 10)         // subsystem: EFI application
	le.PutUint32(opt[108:], 16)        // NumberOfRvaAndSizes
	sec := b[peOff+24+240:]
	copy(sec, ".text")
	le.PutUint32(sec[8:], uint32(len(text))) // VirtualSize
	le.PutUint32(sec[12:], 0x1000)           // VirtualAddress
	le.PutUint32(sec[16:], uint32(raw))      // SizeOfRawData
	le.PutUint32(sec[20:], hdrSize)          // PointerToRawData
	le.PutUint32(sec[36:], 0x60000020)       // code, execute, read
	copy(b[hdrSize:], text)
	return append(b, tail...)
}
