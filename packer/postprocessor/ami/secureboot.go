//go:generate go tool packer-sdc mapstructure-to-hcl2 -type SecureBootCerts

package ami

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hotpath-dev/hotpath/image/manifest"
	"github.com/hotpath-dev/hotpath/image/pcr"
	"github.com/hotpath-dev/hotpath/packer/internal/uefivars"
)

// SecureBootCerts are the certificates (PEM or DER files) a UEFI variable
// store is built from when uefi_data is not given: PK, KEK and db, as
// time-based authenticated variables of X.509 signature lists. db is the
// certificate the image is signed with (hotpath-image build -sign-cert),
// or its CA.
type SecureBootCerts struct {
	// The platform key's certificate.
	PK string `mapstructure:"pk"`
	// Key exchange key certificates.
	KEK []string `mapstructure:"kek"`
	// Signature database certificates: what the firmware lets boot.
	DB []string `mapstructure:"db"`
}

// uefiVariables are the decoded uefi_data (Config.uefiVars).
type uefiVariables = []uefivars.Variable

func (s SecureBootCerts) empty() bool { return s.PK == "" && len(s.KEK) == 0 && len(s.DB) == 0 }

// prepareSecureBoot checks uefi_data (it must decode) or builds it from
// secure_boot_certs (each must be a certificate) into c.uefiData, what
// RegisterImage sends as UefiData.
func (c *Config) prepareSecureBoot(add func(string, ...any), warnings *[]string) {
	switch {
	case c.UEFIData != "" && !c.SecureBootCerts.empty():
		add("uefi_data and secure_boot_certs: give one (secure_boot_certs builds a uefi_data)")
	case c.UEFIData != "":
		vars, err := uefivars.Decode(c.UEFIData)
		switch {
		case errors.Is(err, uefivars.ErrPresetDictionary):
			*warnings = append(*warnings, "uefi_data: "+err.Error()+"; its variables are not checked")
		case err != nil:
			add("uefi_data does not decode as an EC2 UEFI variable store: %v", err)
			return
		default:
			if err := checkSecureBootVars(vars); err != nil {
				add("uefi_data: %v", err)
				return
			}
		}
		c.uefiData, c.uefiVars = c.UEFIData, vars
	case !c.SecureBootCerts.empty():
		data, err := c.SecureBootCerts.uefiData()
		if err != nil {
			add("secure_boot_certs: %v", err)
			return
		}
		c.uefiData = data
		c.uefiVars, _ = uefivars.Decode(data)
	}
}

// checkSecureBootVars refuses a store whose PK, KEK or db is not made of
// signature lists (each X.509 one a certificate).
func checkSecureBootVars(vars []uefivars.Variable) error {
	for _, v := range vars {
		switch {
		case v.Name == "PK" && v.GUID == uefivars.GlobalVariable, v.Name == "KEK" && v.GUID == uefivars.GlobalVariable,
			v.Name == "db" && v.GUID == uefivars.ImageSecurityDatabase:
			if _, err := uefivars.Certificates(v.Data); err != nil {
				return fmt.Errorf("%s: %w", v.Name, err)
			}
		}
	}
	return nil
}

// uefiData reads the certificates and encodes the variable store.
func (s SecureBootCerts) uefiData() (string, error) {
	var c uefivars.SecureBootCerts
	var err error
	if s.PK == "" {
		return "", errors.New("pk is required")
	}
	if c.PK, err = readCert("pk", s.PK); err != nil {
		return "", err
	}
	for _, p := range s.KEK {
		der, err := readCert("kek", p)
		if err != nil {
			return "", err
		}
		c.KEK = append(c.KEK, der)
	}
	for _, p := range s.DB {
		der, err := readCert("db", p)
		if err != nil {
			return "", err
		}
		c.DB = append(c.DB, der)
	}
	vars, err := c.Variables()
	if err != nil {
		return "", err
	}
	return uefivars.Encode(vars)
}

// readCert reads one X.509 certificate, PEM or DER, as DER.
func readCert(what, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if blk, _ := pem.Decode(b); blk != nil {
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%s %s: PEM block %q, not a CERTIFICATE", what, path, blk.Type)
		}
		b = blk.Bytes
	}
	if _, err := x509.ParseCertificate(b); err != nil {
		return nil, fmt.Errorf("%s %s is not an X.509 certificate: %w", what, path, err)
	}
	return b, nil
}

// secureBootPCR is PCR 7's reference for an image signed by the
// certificate with SHA-256 fingerprint signer, booted with vars as its
// variable store: the EDK II measurement (image/pcr, checked against OVMF
// in tests/e2e), with the signer's db entry as the authority. ok is false
// when vars has no db entry for the signer (the image would not boot
// under Secure Boot, or through a CA, which this does not model).
func secureBootPCR(vars []uefivars.Variable, signer string) (manifest.Measurement, bool) {
	var sb pcr.SecureBootVars
	for _, v := range vars {
		switch {
		case v.GUID == uefivars.GlobalVariable && v.Name == "PK":
			sb.PK = v.Data
		case v.GUID == uefivars.GlobalVariable && v.Name == "KEK":
			sb.KEK = v.Data
		case v.GUID == uefivars.ImageSecurityDatabase && v.Name == "db":
			sb.DB = v.Data
		case v.GUID == uefivars.ImageSecurityDatabase && v.Name == "dbx":
			sb.DBX = v.Data
		}
	}
	certs, err := uefivars.Certificates(sb.DB)
	if err != nil || signer == "" {
		return manifest.Measurement{}, false
	}
	for _, c := range certs {
		if sum := sha256.Sum256(c.Raw); hex.EncodeToString(sum[:]) != signer {
			continue
		}
		entry, ok := pcr.DBEntry(sb.DB, c.Raw)
		if !ok {
			return manifest.Measurement{}, false
		}
		v := pcr.SecureBootPolicyValue(sb, entry)
		return manifest.Measurement{PCR: v.PCR, SHA256: v.Digests["sha256"], SHA384: v.Digests["sha384"],
			What: "Secure Boot policy: SecureBoot, PK, KEK, db, dbx of uefi_data, separator, the signer's db entry"}, true
	}
	return manifest.Measurement{}, false
}

// imageManifest is the input artifact's hotpath manifest (State("manifest")
// or a manifest.json among its files); nil without one.
func imageManifest(a packersdk.Artifact) (*manifest.Manifest, error) {
	if a == nil {
		return nil, nil
	}
	path, _ := a.State("manifest").(string)
	for _, f := range a.Files() {
		if path == "" && filepath.Base(f) == "manifest.json" {
			path = f
		}
	}
	if path == "" {
		return nil, nil
	}
	m, err := manifest.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the input artifact's %w", err)
	}
	return m, nil
}

// imageMeasurements are the reference PCR values for the AMI: the
// manifest's, and PCR 7 when the AMI has Secure Boot variables whose db
// holds the image's signer.
func imageMeasurements(a packersdk.Artifact, vars []uefivars.Variable) ([]manifest.Measurement, error) {
	m, err := imageManifest(a)
	if m == nil || err != nil {
		return nil, err
	}
	out := append([]manifest.Measurement(nil), m.Measurements...)
	if m.Signature != nil {
		if p7, ok := secureBootPCR(vars, m.Signature.CertSHA256); ok {
			out = append(out, p7)
		}
	}
	return out, nil
}
