package kernelconfig

import (
	"fmt"
	"strings"
)

// Target is an architecture the appliance kernel is built for: how kbuild
// is invoked for it, what it produces, and which built-in fragments
// describe it. Every target's kernel is an EFI application (the EFI stub),
// so the firmware starts it directly.
type Target struct {
	// Name is Go's GOARCH for the architecture ("amd64", "arm64"): the name
	// users pass (-arch) and manifests record.
	Name string
	// KernelArch is kbuild's ARCH.
	KernelArch string
	// CrossCompile is kbuild's CROSS_COMPILE prefix, "" to build with the
	// host's compiler; Pkg is the Debian package that provides it.
	CrossCompile, CrossPkg string
	// MakeTarget is the make target whose output is the EFI binary, and
	// Output its path in the build tree.
	MakeTarget, Output string
	// Fragments are the built-in fragments, merged in this order; the one
	// named policy.config (in any directory) is the appliance policy.
	Fragments []string
}

// The supported targets. amd64 is the default everywhere.
var (
	AMD64 = &Target{
		Name: "amd64", KernelArch: "x86_64",
		MakeTarget: "bzImage", Output: "arch/x86/boot/bzImage",
		Fragments: []string{"base.config", "policy.config"},
	}
	// ARM64 (Graviton, QEMU virt) is cross-built with Debian's
	// gcc-aarch64-linux-gnu. Its Image (uncompressed) is a PE/COFF EFI
	// application itself; the whole disk image is compressed anyway when
	// it is shipped, and TCG boots skip a decompression.
	ARM64 = &Target{
		Name: "arm64", KernelArch: "arm64",
		CrossCompile: "aarch64-linux-gnu-", CrossPkg: "gcc-aarch64-linux-gnu",
		MakeTarget: "Image", Output: "arch/arm64/boot/Image",
		Fragments: []string{"arm64/base.config", "arm64/policy.config"},
	}
)

// Targets lists the supported targets, the default first.
var Targets = []*Target{AMD64, ARM64}

// LookupTarget returns the target for a GOARCH or kbuild name ("amd64" or
// "x86_64", "arm64" or "aarch64"); "" is amd64.
func LookupTarget(name string) (*Target, error) {
	switch strings.ToLower(name) {
	case "", "amd64", "x86_64", "x86-64":
		return AMD64, nil
	case "arm64", "aarch64":
		return ARM64, nil
	}
	names := make([]string, len(Targets))
	for i, t := range Targets {
		names[i] = t.Name
	}
	return nil, fmt.Errorf("architecture %q: hotpath builds for %s", name, strings.Join(names, " or "))
}

// String is the target's Name.
func (t *Target) String() string { return t.Name }

// makeVars are the variables every make of this target gets.
func (t *Target) makeVars() []string {
	v := []string{"ARCH=" + t.KernelArch}
	if t.CrossCompile != "" {
		v = append(v, "CROSS_COMPILE="+t.CrossCompile)
	}
	return v
}

// scope tells apart the caches of two targets built from the same source.
// It is empty for amd64, so that caches made before arm64 existed stay
// valid.
func (t *Target) scope() string {
	if t == AMD64 {
		return ""
	}
	return "\n" + t.Name
}
