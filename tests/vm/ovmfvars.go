package vm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"unicode/utf16"
)

// OVMFVariable is one live variable of an EDK II variable store.
type OVMFVariable struct {
	GUID  [16]byte
	Attrs uint32
	Data  []byte
}

// ReadOVMFVars reads the live (state VAR_ADDED) variables of an OVMF
// variable-store flash image, by name: the firmware volume header, the
// authenticated variable store header, then 60-byte variable headers,
// each followed by its UTF-16 name and data, 4-byte aligned. Tests use it
// to know what the firmware will measure (the Secure Boot keys).
func ReadOVMFVars(path string) (map[string]OVMFVariable, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	if len(b) < 64 || string(b[40:44]) != "_FVH" {
		return nil, fmt.Errorf("vm: %s: no firmware volume header", path)
	}
	const storeHeader, varHeader, added = 28, 60, 0x3f
	out := map[string]OVMFVariable{}
	for o := int(le.Uint16(b[48:])) + storeHeader; o+varHeader <= len(b) && le.Uint16(b[o:]) == 0x55aa; {
		ns, ds := int(le.Uint32(b[o+36:])), int(le.Uint32(b[o+40:]))
		end := o + varHeader + ns + ds
		if end > len(b) || ns%2 != 0 {
			return nil, fmt.Errorf("vm: %s: variable at %d runs past the store", path, o)
		}
		if b[o+2] == added {
			var v OVMFVariable
			copy(v.GUID[:], b[o+44:o+60])
			v.Attrs = le.Uint32(b[o+4:])
			v.Data = b[o+varHeader+ns : end]
			u := make([]uint16, ns/2)
			for i := range u {
				u[i] = le.Uint16(b[o+varHeader+2*i:])
			}
			name := string(utf16.Decode(u))
			for len(name) > 0 && name[len(name)-1] == 0 {
				name = name[:len(name)-1]
			}
			out[name] = v
		}
		o = (end + 3) &^ 3
	}
	if len(out) == 0 {
		return nil, errors.New("vm: " + path + ": no variables")
	}
	return out, nil
}
