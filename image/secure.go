package image

import (
	"fmt"

	"github.com/hotpath-dev/hotpath/image/manifest"
	"github.com/hotpath-dev/hotpath/image/pcr"
	"github.com/hotpath-dev/hotpath/image/sign"
)

// SignatureFormat names how the EFI binary is signed.
const SignatureFormat = "authenticode-pkcs7-sha256"

// secure signs the EFI binary when the build has a key and records the
// PCR values a TPM will hold after the firmware starts it. It runs after
// the kernel stage (which recorded the unsigned binary) and before the
// disk stage, whose identifiers follow from the binary written.
func (b *build) secure(efi []byte) ([]byte, error) {
	if k := b.o.Sign; k != nil {
		signed, err := sign.Sign(efi, k)
		if err != nil {
			return nil, fmt.Errorf("sign: %w", err)
		}
		b.m.Signature = &manifest.Signature{
			Format: SignatureFormat, CertSHA256: k.Fingerprint(), Subject: k.Cert.Subject.String(),
			UnsignedSHA256: b.m.EFI.SHA256,
		}
		efi = signed
		b.m.EFI = manifest.Blob{SHA256: sum(efi), Size: int64(len(efi))}
		// The fingerprint, never the key: keys stay out of the logs.
		b.logf("sign: EFI binary signed by %q (certificate sha256 %.16s)", b.m.Signature.Subject, b.m.Signature.CertSHA256)
	}
	ms, err := Measurements(efi)
	if err != nil {
		return nil, err
	}
	b.m.Measurements = ms
	return efi, nil
}

// Measurements are the reference PCR values of an EFI binary, as the
// manifest records them.
func Measurements(efi []byte) ([]manifest.Measurement, error) {
	ref, err := pcr.Reference(efi)
	if err != nil {
		return nil, err
	}
	what := map[int]string{
		pcr.BootManagerPCR: "EV_EFI_ACTION \"" + pcr.CallingEFIApplication + "\", EV_SEPARATOR, EV_EFI_BOOT_SERVICES_APPLICATION (the EFI binary's Authenticode digest)",
		pcr.CommandLinePCR: "nothing: no command line is passed to the EFI binary (it carries its own, covered by PCR 4)",
	}
	var out []manifest.Measurement
	for _, v := range ref {
		out = append(out, manifest.Measurement{PCR: v.PCR, SHA256: v.Digests["sha256"], SHA384: v.Digests["sha384"], What: what[v.PCR]})
	}
	return out, nil
}
