// Package machine is what differs per architecture outside the kernel
// build (kernelconfig.Target has that): the executables' ELF machine, the
// loader's path and PE machine on the ESP, and the QEMU machine and UEFI
// firmware that stand in for a cloud instance (`hotpath-image run` and the
// test harness, tests/vm, boot images the same way).
package machine

import (
	"debug/elf"
	"fmt"

	"github.com/hotpath-dev/hotpath/image/disk"
	kernelconfig "github.com/hotpath-dev/hotpath/kernel-config"
)

// UserNetIPv6 is the IPv6 network of QEMU's user network (slirp) as
// `hotpath-image run` and the tests that boot on it start it (-netdev
// user,ipv6-net=): a unique local prefix (RFC 4193), which slirp's router
// advertisements give without the managed flag (the guest takes its
// address by SLAAC). Slirp's own default, fec0::/64, is site-local,
// deprecated by RFC 3879: the init refuses such an on-link prefix
// (init/netconf6), and its net-ipv6 step failed on it.
const UserNetIPv6 = "fd68:7074:6800::/64"

// Machine is one architecture's instance, and how QEMU emulates it.
type Machine struct {
	Arch string // GOARCH
	// ELF is the machine of the architecture's executables (the init, the
	// workload).
	ELF elf.Machine
	// BootPath is where UEFI looks for the loader on removable media (the
	// ESP's only loader); PEMachine is the PE/COFF machine it must be for.
	BootPath  string
	PEMachine uint16

	QEMU    string // the emulator binary
	QEMUPkg string // its Debian package
	// Machine is -machine, without the accelerator.
	Machine string
	// CPU is -cpu under TCG (under KVM it is "host").
	CPU string
	// Code and Vars are the UEFI firmware and its variable-store template
	// (copied per guest, never written); FirmwarePkg is their package.
	Code, Vars, FirmwarePkg string
	// KVM is false where this x86-64 host cannot run the guest natively:
	// TCG is then the only accelerator.
	KVM bool
	// DepsGroup is the image/deps.sh group that installs QEMU and the
	// firmware.
	DepsGroup string
	// Devices are QEMU arguments for devices the instance has besides the
	// disk and the NIC.
	Devices []string
}

// The machines, by GOARCH.
var (
	// AMD64 is q35 with OVMF (Debian's 4 MiB flash layout, without Secure
	// Boot or SMM).
	AMD64 = Machine{
		Arch: "amd64", ELF: elf.EM_X86_64, BootPath: disk.BootPath, PEMachine: 0x8664,
		QEMU: "qemu-system-x86_64", QEMUPkg: "qemu-system-x86",
		Machine: "q35", CPU: "max",
		Code: "/usr/share/OVMF/OVMF_CODE_4M.fd", Vars: "/usr/share/OVMF/OVMF_VARS_4M.fd", FirmwarePkg: "ovmf",
		KVM: true, DepsGroup: "test",
	}
	// ARM64 is virt with GICv3 (and its ITS, for MSI-X) like Graviton,
	// booted through AAVMF (EDK II for virt, both files padded to the 64 MiB
	// flash size virt wants), which hands the guest QEMU's ACPI tables as
	// Graviton's firmware does. Neoverse-N1 is Graviton2's core; TCG
	// emulates it much faster than "max", whose pointer authentication and
	// SVE cost dearly in emulation.
	ARM64 = Machine{
		Arch: "arm64", ELF: elf.EM_AARCH64, BootPath: disk.BootPathAA64, PEMachine: 0xaa64,
		QEMU: "qemu-system-aarch64", QEMUPkg: "qemu-system-arm",
		Machine: "virt,gic-version=3", CPU: "neoverse-n1",
		Code: "/usr/share/AAVMF/AAVMF_CODE.fd", Vars: "/usr/share/AAVMF/AAVMF_VARS.fd", FirmwarePkg: "qemu-efi-aarch64",
		DepsGroup: "test arm64",
		// Entropy: Neoverse-N1 has no RNDR instruction (x86's "max" has
		// RDRAND), so without a source the kernel's RNG is not ready for
		// minutes under TCG and getrandom() blocks the init's DHCP. The
		// virtio RNG feeds it twice: AAVMF's EFI_RNG_PROTOCOL seeds it
		// through the EFI stub, and the kernel's virtio-rng driver.
		Devices: []string{"-device", "virtio-rng-pci"},
	}
)

// All are the machines, amd64 (the default) first.
var All = []Machine{AMD64, ARM64}

// For returns the machine of an architecture, by any name the kernel
// build takes for it (kernelconfig.LookupTarget: "arm64" or "aarch64",
// ...); "" is amd64.
func For(arch string) (Machine, error) {
	t, err := kernelconfig.LookupTarget(arch)
	if err != nil {
		return Machine{}, err
	}
	for _, m := range All {
		if m.Arch == t.Name {
			return m, nil
		}
	}
	return Machine{}, fmt.Errorf("no machine for architecture %s", t.Name)
}

// CPUFor is the -cpu argument under accel.
func (m Machine) CPUFor(accel string) string {
	if accel == "kvm" {
		return "host"
	}
	return m.CPU
}

// CheckAccel refuses KVM for a guest this host cannot run natively.
func (m Machine) CheckAccel(accel string) error {
	if accel == "kvm" && !m.KVM {
		return fmt.Errorf("an %s guest cannot run under KVM on an x86-64 host; use TCG", m.Arch)
	}
	return nil
}
