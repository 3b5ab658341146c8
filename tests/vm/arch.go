package vm

import "fmt"

// Debian's qemu-efi-aarch64 package: AAVMF, EDK II for QEMU's arm64 virt
// machine (both files padded to the 64 MiB flash size virt wants).
const (
	DefaultAAVMFCode = "/usr/share/AAVMF/AAVMF_CODE.fd"
	DefaultAAVMFVars = "/usr/share/AAVMF/AAVMF_VARS.fd"
)

// Machine is how QEMU stands in for one architecture's cloud instance.
type Machine struct {
	QEMU    string // the emulator binary
	Machine string // -machine, without the accelerator
	// CPU is -cpu under TCG (under KVM it is "host").
	CPU string
	// Code and Vars are the UEFI firmware and its variable-store template;
	// Pkg is the Debian package that holds them.
	Code, Vars, Pkg string
	// QEMUPkg is the Debian package of QEMU.
	QEMUPkg string
	// KVM is false where the host cannot run the guest natively (an arm64
	// guest on an x86-64 host): TCG is then the only accelerator.
	KVM bool
}

// Machines are the supported architectures by GOARCH name.
var Machines = map[string]Machine{
	"amd64": {
		QEMU: "qemu-system-x86_64", Machine: "q35", CPU: "max",
		Code: DefaultOVMFCode, Vars: DefaultOVMFVars, Pkg: "ovmf", QEMUPkg: "qemu-system-x86",
		KVM: true,
	},
	// virt with GICv3 (and its ITS, for MSI-X) like Graviton, booted
	// through AAVMF, which hands the guest QEMU's ACPI tables as Graviton's
	// firmware does. Neoverse-N1 is Graviton2's core; TCG emulates it
	// much faster than "max", whose pointer authentication and SVE cost
	// dearly in emulation.
	"arm64": {
		QEMU: "qemu-system-aarch64", Machine: "virt,gic-version=3", CPU: "neoverse-n1",
		Code: DefaultAAVMFCode, Vars: DefaultAAVMFVars, Pkg: "qemu-efi-aarch64", QEMUPkg: "qemu-system-arm",
	},
}

// MachineFor returns the Machine of a GOARCH name; "" is amd64.
func MachineFor(arch string) (Machine, error) {
	if arch == "" {
		arch = "amd64"
	}
	m, ok := Machines[arch]
	if !ok {
		return Machine{}, fmt.Errorf("vm: no QEMU machine for architecture %q (want amd64 or arm64)", arch)
	}
	return m, nil
}
