package kernelconfig

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestLookupTarget(t *testing.T) {
	for _, tc := range []struct {
		name string
		want *Target
	}{
		{"", AMD64}, {"amd64", AMD64}, {"x86_64", AMD64}, {"arm64", ARM64}, {"aarch64", ARM64}, {"ARM64", ARM64},
	} {
		if got, err := LookupTarget(tc.name); err != nil || got != tc.want {
			t.Errorf("LookupTarget(%q) = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := LookupTarget("riscv64"); err == nil || !strings.Contains(err.Error(), "amd64 or arm64") {
		t.Errorf("riscv64: %v", err)
	}
}

// Every target's fragments parse, explain every line, and hold a policy.
func TestTargetFragments(t *testing.T) {
	for _, target := range Targets {
		frags, err := TargetFragments(target)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		policy := 0
		for _, f := range frags {
			if IsPolicy(f.Name) {
				policy++
			}
			if len(f.Requirements) == 0 {
				t.Errorf("%s: %s is empty", target, f.Name)
			}
			for _, r := range f.Requirements {
				if r.Why == "" {
					t.Errorf("%s: %s has no comment saying why", r.Where(), r)
				}
			}
		}
		if policy != 1 {
			t.Errorf("%s: %d policy fragments, want 1", target, policy)
		}
		if _, err := Requirements(frags); err != nil {
			t.Errorf("%s: %v", target, err)
		}
	}
}

// The arm64 policy against mutations of a config that satisfies it, and
// against a user fragment that would override it.
func TestCheckArm64Policy(t *testing.T) {
	frags, err := TargetFragments(ARM64)
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := Requirements(frags)
	if err != nil {
		t.Fatal(err)
	}
	clean := func() *Config {
		c := NewConfig()
		for _, r := range reqs {
			c.Set(r.Symbol, r.Value)
		}
		return c
	}
	if vs := Check(reqs, clean()); len(vs) != 0 {
		t.Fatalf("clean config: %v", vs)
	}
	for _, tc := range []struct {
		sym, val string
		kind     ViolationKind
	}{
		{"UNMAP_KERNEL_AT_EL0", "y", Forbidden},
		{"MITIGATE_SPECTRE_BRANCH_HISTORY", "y", Forbidden},
		{"ARM64_SW_TTBR0_PAN", "y", Forbidden},
		{"AUDIT", "y", Forbidden},
		{"SECCOMP", "y", Forbidden},
		{"NETFILTER", "y", Forbidden},
		{"MODULES", "y", Forbidden},
		{"ENA_ETHERNET", NotSet, Missing},
		{"VIRTIO_NET", "m", Mismatch},
		{"EFI_STUB", NotSet, Missing},
		{"ACPI_BUTTON", NotSet, Missing},
		{"KEYBOARD_GPIO", NotSet, Missing},
		{"SERIAL_AMBA_PL011_CONSOLE", NotSet, Missing},
		{"SERIAL_8250_CONSOLE", NotSet, Missing},
		{"ARM_GIC_V3_ITS", NotSet, Missing},
		{"CMDLINE", `"panic=10"`, Overridden},
		{"CMDLINE_FORCE", NotSet, Missing},
	} {
		c := clean()
		c.Set(tc.sym, tc.val)
		vs := Check(reqs, c)
		if len(vs) != 1 || vs[0].Kind != tc.kind || vs[0].Symbol != tc.sym {
			t.Errorf("%s=%s: got %v, want one %v", tc.sym, tc.val, vs, tc.kind)
		}
	}
	evil := &Fragment{Name: "user.config", Requirements: []Requirement{{Symbol: "UNMAP_KERNEL_AT_EL0", Value: "y", Fragment: "user.config", Line: 1}}}
	if _, err := Requirements(append(frags, evil)); err == nil || !strings.Contains(err.Error(), "arm64/policy.config") {
		t.Errorf("a fragment overriding the arm64 policy was not refused: %v", err)
	}
	if s := Summary(reqs, nil); !strings.Contains(s, "policy off: ") || !strings.Contains(s, "UNMAP_KERNEL_AT_EL0") {
		t.Errorf("summary lacks the arm64 policy:\n%s", s)
	}
}

// Every symbol the arm64 fragments name is one each supported tree defines
// for ARCH=arm64, or one fragments/other-trees.txt lists for the trees that
// do: a name from another architecture or another version would hold
// trivially when off, or never when on.
func TestArm64NamesInLinux(t *testing.T) {
	for _, tree := range trees {
		t.Run(tree.name, func(t *testing.T) {
			o := treeOptions(t, tree.source)
			src, err := ResolveSource(ctxFor(t, 10*time.Minute), o.Source, o.CacheDir, o.Log)
			if err != nil {
				t.Fatal(err)
			}
			frags, _ := TargetFragments(ARM64)
			reqs, _ := Requirements(frags)
			want := map[string]bool{}
			for _, r := range reqs {
				want[r.Symbol] = true
			}
			defs, err := findDefinitions(src.Tree, ARM64.KernelArch, want)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range reqs {
				defined := false
				for _, d := range defs[r.Symbol] {
					defined = defined || d.Kind == "defined"
				}
				listed := OtherTrees[r.Symbol] != "" || OtherTrees[r.Symbol+"="+r.Value] != ""
				if !defined && !listed {
					t.Errorf("%s: CONFIG_%s is defined by no Kconfig file of Linux %s for arm64", r.Where(), r.Symbol, src.Version)
				}
			}
		})
	}
}

func requireCross(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath(ARM64.CrossCompile + "gcc"); err != nil {
		t.Skipf("no %sgcc (`image/deps.sh build arm64` installs %s)", ARM64.CrossCompile, ARM64.CrossPkg)
	}
}

// The arm64 fragments merge onto each supported tree's arm64 allnoconfig
// and hold; the key is the arm64 one, apart from the x86 one of the same
// source.
func TestConfigureLinuxArm64(t *testing.T) {
	for _, tree := range trees {
		t.Run(tree.name, func(t *testing.T) { testConfigureArm64(t, tree.source) })
	}
}

func testConfigureArm64(t *testing.T, source string) {
	o := treeOptions(t, source)
	requireCross(t)
	o.Arch = "arm64"
	c, err := Configure(ctxFor(t, 15*time.Minute), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"CONFIG_ARM64=y", "# CONFIG_UNMAP_KERNEL_AT_EL0 is not set", "# CONFIG_MITIGATE_SPECTRE_BRANCH_HISTORY is not set",
		"# CONFIG_AUDIT is not set", "# CONFIG_NETFILTER is not set", "# CONFIG_SECCOMP is not set", "# CONFIG_MODULES is not set",
		"CONFIG_ENA_ETHERNET=y", "CONFIG_VIRTIO_NET=y", "CONFIG_EFI_STUB=y", "CONFIG_ACPI_BUTTON=y", "CONFIG_ARM_GIC_V3=y",
		"CONFIG_SERIAL_AMBA_PL011_CONSOLE=y", "CONFIG_SERIAL_8250_CONSOLE=y", "CONFIG_KEYBOARD_GPIO=y", "CONFIG_CMDLINE_FORCE=y",
		"CONFIG_SERIAL_8250_PCI=y", "CONFIG_ARM64_USE_LSE_ATOMICS=y", "CONFIG_ARM64_PAN=y", "CONFIG_ARM64_HW_AFDBM=y",
		"CONFIG_ARM64_TLB_RANGE=y", "CONFIG_ARM64_SVE=y", "CONFIG_ARM64_VA_BITS_48=y",
		// What real servers need that QEMU hides (README, bare metal).
		"CONFIG_NUMA=y", "CONFIG_ACPI_NUMA=y", "CONFIG_HOTPLUG_PCI_PCIE=y", "CONFIG_HOTPLUG_PCI_ACPI=y",
		"CONFIG_MEMORY_FAILURE=y", "CONFIG_ACPI_APEI_GHES=y", "CONFIG_PCIEAER=y",
		"CONFIG_FW_LOADER_COMPRESS_XZ=y", "CONFIG_FW_LOADER_COMPRESS_ZSTD=y",
	} {
		if !strings.Contains(c.Config, "\n"+line+"\n") {
			t.Errorf(".config lacks %q", line)
		}
	}
	if c.PolicyCmdline != "console=ttyAMA0 console=ttyS0,115200n8 mitigations=off panic=10 panic_on_oops=1" {
		t.Errorf("policy cmdline %q", c.PolicyCmdline)
	}
	if !strings.HasPrefix(c.Toolchain.Full, "ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-\n") || !strings.Contains(c.Toolchain.Compiler, "aarch64-linux-gnu-gcc") {
		t.Errorf("toolchain %q / %q", c.Toolchain.Compiler, firstLine(c.Toolchain.Full))
	}
	o.Arch = ""
	x86, err := Configure(ctxFor(t, 15*time.Minute), o)
	if err != nil {
		t.Fatal(err)
	}
	if x86.Key == c.Key || x86.Target != AMD64 || c.Target != ARM64 {
		t.Errorf("amd64 key %s (%s), arm64 key %s (%s)", x86.Key, x86.Target, c.Key, c.Target)
	}
	t.Logf("arm64 key %s\n%s", c.Key, c.Summary)
}

func TestDetectToolchainCross(t *testing.T) {
	requireCross(t)
	native, err := DetectToolchain(context.Background(), AMD64)
	if err != nil {
		t.Fatal(err)
	}
	cross, err := DetectToolchain(context.Background(), ARM64)
	if err != nil {
		t.Fatal(err)
	}
	if native.Full == cross.Full || !strings.Contains(cross.Full, native.Compiler) {
		t.Errorf("cross toolchain text must differ from the native one and hold the host compiler:\n%s", cross.Full)
	}
	if err := CheckTools(ARM64); err != nil {
		t.Error(err)
	}
	// Without the cross compiler on PATH, the error says what to install.
	t.Setenv("PATH", t.TempDir())
	if err := CheckTools(ARM64); err == nil || !strings.Contains(err.Error(), "gcc-aarch64-linux-gnu") || !strings.Contains(err.Error(), "deps.sh build arm64") {
		t.Errorf("CheckTools without a cross compiler: %v", err)
	}
}
