package machine

import (
	"debug/elf"
	"testing"

	kernelconfig "github.com/hotpath-dev/hotpath/kernel-config"
)

// TestFor: every name the kernel build takes finds the same machine, so
// that `hotpath-image run -arch aarch64` boots what `build -arch aarch64`
// built; an unknown name is refused.
func TestFor(t *testing.T) {
	for _, c := range []struct {
		name string
		want string
		elf  elf.Machine
	}{
		{"", "amd64", elf.EM_X86_64},
		{"amd64", "amd64", elf.EM_X86_64},
		{"x86_64", "amd64", elf.EM_X86_64},
		{"arm64", "arm64", elf.EM_AARCH64},
		{"aarch64", "arm64", elf.EM_AARCH64},
	} {
		m, err := For(c.name)
		if err != nil || m.Arch != c.want || m.ELF != c.elf {
			t.Errorf("For(%q) = %s %v, %v; want %s %v", c.name, m.Arch, m.ELF, err, c.want, c.elf)
		}
	}
	if _, err := For("mips"); err == nil {
		t.Error(`For("mips") found a machine`)
	}
	// Every kernel target has a machine, and no machine lacks a target.
	if len(All) != len(kernelconfig.Targets) {
		t.Fatalf("%d machines for %d kernel targets", len(All), len(kernelconfig.Targets))
	}
	for _, tg := range kernelconfig.Targets {
		if m, err := For(tg.Name); err != nil || m.Arch != tg.Name {
			t.Errorf("kernel target %s: machine %s, %v", tg.Name, m.Arch, err)
		}
	}
}
