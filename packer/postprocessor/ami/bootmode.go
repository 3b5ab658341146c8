package ami

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hotpath-dev/hotpath/image/manifest"
)

// BootModes are the values boot_mode accepts (EC2's and the amazon
// plugin's names). uefi-preferred boots UEFI where the instance type can
// and legacy BIOS where it cannot (every x86 .metal size, and DL1, G4ad,
// P4, u-*, VT1): it needs a disk that boots both ways, which an x86
// hotpath disk does (image/bios).
var BootModes = []string{"uefi-preferred", "uefi", "legacy-bios"}

// checkBootMode refuses at Prepare what EC2 refuses whatever the disk:
// an unknown mode, NitroTPM (and so attestation) without UEFI, and arm64
// without UEFI (Graviton has no BIOS).
func (c *Config) checkBootMode(add func(string, ...any)) {
	if c.BootMode != "" && !slices.Contains(BootModes, c.BootMode) {
		add("boot_mode = %q is not supported: one of %s", c.BootMode, strings.Join(BootModes, ", "))
		return
	}
	if c.TPMSupport != "" && c.BootMode != "" && c.BootMode != "uefi" {
		add("tpm_support = %q needs boot_mode = \"uefi\", not %q: EC2 exposes NitroTPM only to instances that boot UEFI, "+
			"and refuses to register an AMI that could boot without it", c.TPMSupport, c.BootMode)
	}
	if c.Architecture == "arm64" && c.BootMode != "" && c.BootMode != "uefi" {
		add("boot_mode = %q with architecture = \"arm64\": Graviton instances boot UEFI only", c.BootMode)
	}
}

// resolveBootMode is the boot mode to register for the input artifact's
// disk, whose manifest says whether it has BIOS boot code: the configured
// mode, checked against the disk, or by default uefi-preferred for a disk
// that boots both ways (uefi with tpm_support, which needs it), else uefi.
// A disk without a hotpath manifest is taken at the template's word.
func resolveBootMode(c *Config, in packersdk.Artifact) (string, error) {
	bios, from, err := imageBootsBIOS(in)
	if err != nil {
		return "", err
	}
	switch {
	case c.BootMode == "" && bios && c.Architecture == "x86_64" && c.TPMSupport == "":
		return "uefi-preferred", nil
	case c.BootMode == "":
		return "uefi", nil
	case c.BootMode != "uefi" && c.Architecture != "x86_64":
		return "", fmt.Errorf("boot_mode = %q: %s instances boot UEFI only", c.BootMode, c.Architecture)
	case c.BootMode != "uefi" && from != "" && !bios:
		return "", fmt.Errorf("boot_mode = %q, but the disk cannot boot legacy BIOS (%s has no bios_boot: built UEFI-only); "+
			"an instance type without UEFI would not boot it: use boot_mode = \"uefi\" or rebuild with the BIOS boot code", c.BootMode, from)
	}
	return c.BootMode, nil
}

// imageBootsBIOS reads the input artifact's manifest (State("manifest")
// or a manifest.json among its files): whether the disk has BIOS boot
// code, and the manifest's path ("" when there is none).
func imageBootsBIOS(a packersdk.Artifact) (bios bool, from string, err error) {
	if a == nil {
		return false, "", nil
	}
	path, _ := a.State("manifest").(string)
	for _, f := range a.Files() {
		if path == "" && filepath.Base(f) == "manifest.json" {
			path = f
		}
	}
	if path == "" {
		return false, "", nil
	}
	m, err := manifest.ReadFile(path)
	if err != nil {
		return false, "", fmt.Errorf("the input artifact's %w", err)
	}
	return m.BootsBIOS(), path, nil
}

// bootModeLabel says in the log how the AMI boots.
func bootModeLabel(mode string) string {
	switch mode {
	case "uefi-preferred":
		return "UEFI preferred, legacy BIOS where an instance type has no UEFI"
	case "legacy-bios":
		return "legacy BIOS"
	}
	return "UEFI"
}
