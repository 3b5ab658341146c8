// Package pcr computes reference PCR values for the appliance's EFI binary:
// what a TPM 2.0 holds once UEFI firmware that follows the TCG PC Client
// Platform Firmware Profile (OVMF, EC2's NitroTPM) has started it, so that
// a key service can release a secret only to an instance that booted this
// image.
//
// PCR 4 (boot manager code) receives, in this order, the events firmware
// extends when it starts the first boot option:
//
//	EV_EFI_ACTION "Calling EFI Application from Boot Option" (at ReadyToBoot)
//	EV_SEPARATOR 00000000 (PCRs 0-7 each get one, at ReadyToBoot)
//	EV_EFI_BOOT_SERVICES_APPLICATION: the Authenticode digest of the binary
//
// The disk has no boot loader before the kernel and the EFI stub loads
// nothing else on x86-64, so these three are all of PCR 4. PCR 12 is where
// AWS's attestable AMIs expect the command line passed to the boot binary
// (systemd-stub measures it there); hotpath passes none, its command line is
// built into the binary and so covered by PCR 4, and PCR 12 keeps its reset
// value of zeros.
package pcr

import (
	"crypto"
	_ "crypto/sha256" // the banks
	_ "crypto/sha512"
	"encoding/hex"
	"fmt"

	"github.com/hotpath-dev/hotpath/image/authenticode"
)

// Event types of the TCG PC Client Platform Firmware Profile.
const (
	EvSeparator                  uint32 = 0x00000004
	EvEFIBootServicesApplication uint32 = 0x80000003
	EvEFIAction                  uint32 = 0x80000007
)

// The PCRs an attestable AMI's policy names.
const (
	BootManagerPCR      = 4
	SecureBootPolicyPCR = 7
	CommandLinePCR      = 12
)

// CallingEFIApplication is the EV_EFI_ACTION string firmware measures into
// PCR 4 before it starts the first boot option (without its NUL).
const CallingEFIApplication = "Calling EFI Application from Boot Option"

// separatorData is EV_SEPARATOR's data: a UINT32 0, meaning no error.
const separatorData = "\x00\x00\x00\x00"

// Banks are the hashes reference values are computed in: the banks the
// test TPM (swtpm) is set up with, and SHA-384, the bank of NitroTPM's
// attestation document.
var Banks = []crypto.Hash{crypto.SHA256, crypto.SHA384}

// BankName is a bank's name as the kernel's sysfs and the manifest spell it.
func BankName(h crypto.Hash) string {
	switch h {
	case crypto.SHA256:
		return "sha256"
	case crypto.SHA384:
		return "sha384"
	}
	return h.String()
}

// Event is one measurement: the PCR, its type, and the digest extended in
// one bank.
type Event struct {
	PCR    int
	Type   uint32
	Digest []byte
}

// BootManager returns the PCR 4 events for efi in bank h, in the order
// the firmware extends them.
func BootManager(efi []byte, h crypto.Hash) ([]Event, error) {
	app, err := authenticode.Digest(efi, h)
	if err != nil {
		return nil, fmt.Errorf("pcr: %w", err)
	}
	return []Event{
		{PCR: BootManagerPCR, Type: EvEFIAction, Digest: sum(h, []byte(CallingEFIApplication))},
		{PCR: BootManagerPCR, Type: EvSeparator, Digest: sum(h, []byte(separatorData))},
		{PCR: BootManagerPCR, Type: EvEFIBootServicesApplication, Digest: app},
	}, nil
}

// Replay extends a reset PCR with the events that are for pcr, in order.
func Replay(h crypto.Hash, pcr int, events []Event) []byte {
	v := make([]byte, h.Size())
	for _, e := range events {
		if e.PCR != pcr {
			continue
		}
		d := h.New()
		d.Write(v)
		d.Write(e.Digest)
		v = d.Sum(nil)
	}
	return v
}

// Value is one PCR's reference value in each bank, lower-case hex keyed by
// BankName.
type Value struct {
	PCR     int
	Digests map[string]string
}

// Reference returns the reference values of PCR 4 and PCR 12 for efi.
func Reference(efi []byte) ([]Value, error) {
	v4 := Value{PCR: BootManagerPCR, Digests: map[string]string{}}
	v12 := Value{PCR: CommandLinePCR, Digests: map[string]string{}}
	for _, h := range Banks {
		ev, err := BootManager(efi, h)
		if err != nil {
			return nil, err
		}
		v4.Digests[BankName(h)] = hex.EncodeToString(Replay(h, BootManagerPCR, ev))
		v12.Digests[BankName(h)] = hex.EncodeToString(Replay(h, CommandLinePCR, nil))
	}
	return []Value{v4, v12}, nil
}

func sum(h crypto.Hash, b []byte) []byte {
	d := h.New()
	d.Write(b)
	return d.Sum(nil)
}
