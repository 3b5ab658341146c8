package tpm

import (
	"bytes"
	"crypto"
	"encoding/binary"
	"errors"
	"fmt"
)

// Event is one entry of the firmware's TCG event log: the PCR it was
// extended into, its type, and its digest in each bank the log carries.
type Event struct {
	PCR     int
	Type    uint32
	Digests map[crypto.Hash][]byte
	Data    []byte
}

// Event types the report names (TCG PC Client Platform Firmware Profile).
const (
	evNoAction                   = 0x00000003
	evSeparator                  = 0x00000004
	evEFIVariableDriverConfig    = 0x80000001
	evEFIBootServicesApplication = 0x80000003
	evEFIAction                  = 0x80000007
	evEFIVariableAuthority       = 0x800000e0
)

// TypeName is an event type's name in the profile, or its number.
func TypeName(t uint32) string {
	switch t {
	case evNoAction:
		return "EV_NO_ACTION"
	case evSeparator:
		return "EV_SEPARATOR"
	case evEFIVariableDriverConfig:
		return "EV_EFI_VARIABLE_DRIVER_CONFIG"
	case evEFIBootServicesApplication:
		return "EV_EFI_BOOT_SERVICES_APPLICATION"
	case evEFIAction:
		return "EV_EFI_ACTION"
	case evEFIVariableAuthority:
		return "EV_EFI_VARIABLE_AUTHORITY"
	}
	return fmt.Sprintf("%#x", t)
}

// TPM 2.0 algorithm ids of the banks.
var algs = map[uint16]crypto.Hash{0x0004: crypto.SHA1, 0x000b: crypto.SHA256, 0x000c: crypto.SHA384, 0x000d: crypto.SHA512}

// ParseEventLog decodes a crypto-agile (TCG2) event log as the kernel
// exposes it in securityfs: a first SHA-1-format event whose data is the
// "Spec ID Event03" header listing the banks and their digest sizes, then
// TCG_PCR_EVENT2 entries. Our own parser rather than go-attestation's: the
// init needs only this walk, and go-attestation would bring go-tpm and its
// dependencies into PID 1 for it.
func ParseEventLog(b []byte) ([]Event, error) {
	r := &reader{b: b}
	r.u32() // PCR
	if t := r.u32(); t != evNoAction {
		return nil, fmt.Errorf("tpm: event log: first event type %#x, want EV_NO_ACTION (a SHA-1-only log?)", t)
	}
	r.bytes(20)
	spec := r.bytes(int(r.u32()))
	if r.err != nil {
		return nil, r.err
	}
	sizes, err := specSizes(spec)
	if err != nil {
		return nil, err
	}
	var out []Event
	for len(r.b) > 0 && r.err == nil {
		e := Event{PCR: int(r.u32()), Type: r.u32(), Digests: map[crypto.Hash][]byte{}}
		n := int(r.u32())
		for i := 0; i < n && r.err == nil; i++ {
			id := r.u16()
			size, ok := sizes[id]
			if !ok {
				return nil, fmt.Errorf("tpm: event log: digest of algorithm %#x not in the header", id)
			}
			d := r.bytes(size)
			if h, ok := algs[id]; ok {
				e.Digests[h] = d
			}
		}
		e.Data = r.bytes(int(r.u32()))
		if r.err == nil {
			out = append(out, e)
		}
	}
	return out, r.err
}

// specSizes reads the digest sizes from the TCG_EfiSpecIDEvent.
func specSizes(spec []byte) (map[uint16]int, error) {
	if !bytes.HasPrefix(spec, []byte("Spec ID Event03\x00")) {
		return nil, errors.New("tpm: event log: no Spec ID Event03 header")
	}
	r := &reader{b: spec[16+4+4:]} // signature, platform class, versions and uintn size
	n := int(r.u32())
	sizes := map[uint16]int{}
	for i := 0; i < n && r.err == nil; i++ {
		id := r.u16()
		sizes[id] = int(r.u16())
	}
	return sizes, r.err
}

// reader walks little-endian fields; the first short read sticks in err.
type reader struct {
	b   []byte
	err error
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = fmt.Errorf("tpm: event log truncated (%d bytes wanted, %d left)", n, len(r.b))
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u16() uint16 {
	if b := r.bytes(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

// Replay extends a reset PCR with the log's events for pcr in bank h.
// EV_NO_ACTION events are logged but never extended.
func Replay(events []Event, pcr int, h crypto.Hash) []byte {
	v := make([]byte, h.Size())
	for _, e := range events {
		if e.PCR != pcr || e.Type == evNoAction {
			continue
		}
		d := h.New()
		d.Write(v)
		d.Write(e.Digests[h])
		v = d.Sum(nil)
	}
	return v
}
