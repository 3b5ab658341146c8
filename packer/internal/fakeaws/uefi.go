package fakeaws

import (
	"errors"

	"github.com/hotpath-dev/hotpath/packer/internal/uefivars"
)

// maxUEFIData is EC2's limit on RegisterImage's UefiData (64 KiB of base64).
const maxUEFIData = 64 << 10

// checkUEFIData decodes RegisterImage's UefiData as EC2 does and keeps the
// variables on the image; a store that does not decode is refused. One
// compressed with python-uefivars' preset dictionary, which the reader
// does not ship, is kept undecoded (its header and CRC were checked).
func checkUEFIData(im *Image, data string) *Fault {
	if data == "" {
		return nil
	}
	if len(data) > maxUEFIData {
		return badParam("UefiData is %d bytes, more than %d", len(data), maxUEFIData)
	}
	if im.BootMode != "uefi" && im.BootMode != "uefi-preferred" {
		return badParam("UefiData needs BootMode uefi, not %q", im.BootMode)
	}
	vars, err := uefivars.Decode(data)
	if err != nil && !errors.Is(err, uefivars.ErrPresetDictionary) {
		return badParam("UefiData: %v", err)
	}
	im.UEFIData, im.UEFIVars = data, vars
	return nil
}
