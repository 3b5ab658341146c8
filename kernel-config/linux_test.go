package kernelconfig

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testLog sends progress to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// realOptions uses Debian's linux-source-6.12 (the default) and the shared
// cache (so the tarball is extracted once for every test run and every
// user).
func realOptions(t *testing.T) Options {
	t.Helper()
	return treeOptions(t, DefaultSource)
}

// treeOptions is realOptions for the Linux tarball at source.
func treeOptions(t *testing.T, source string) Options {
	t.Helper()
	if testing.Short() {
		t.Skip("configures a real Linux tree; skipped in -short mode")
	}
	if _, err := os.Stat(source); err != nil {
		t.Skipf("%s is not installed (`image/deps.sh build test` installs linux-source-6.12 and linux-source-6.1): %v", source, err)
	}
	cache, err := DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	o := Options{CacheDir: cache, Log: testLog{t}}
	if source != DefaultSource {
		o.Source = source
	}
	return o
}

// trees are the Linux trees the policy must hold on: the default and the
// previous one, still buildable with -source.
var trees = []struct {
	name, source, version string
}{
	{"6.12", DefaultSource, "6.12."},
	{"6.1", Linux61Source, "6.1."},
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// The fragments merge onto the allnoconfig of each supported tree and every
// requirement holds after olddefconfig (configuration only, nothing
// compiled).
func TestConfigureLinux(t *testing.T) {
	for _, tree := range trees {
		t.Run(tree.name, func(t *testing.T) { testConfigure(t, tree.source, tree.version) })
	}
}

func testConfigure(t *testing.T, source, version string) {
	o := treeOptions(t, source)
	c, err := Configure(ctxFor(t, 10*time.Minute), o)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.Source.Version, version) {
		t.Errorf("version %s, want %sx", c.Source.Version, version)
	}
	cfg, err := ParseConfig(strings.NewReader(c.Config))
	if err != nil {
		t.Fatal(err)
	}
	if vs := Check(c.Requirements, cfg); len(vs) != 0 {
		t.Fatalf("Configure returned a config that violates the policy: %v", vs)
	}
	// The facts the appliance relies on, spelled out once more.
	for _, line := range []string{
		"# CONFIG_CPU_MITIGATIONS is not set", "# CONFIG_AUDIT is not set", "# CONFIG_NETFILTER is not set",
		"# CONFIG_SECCOMP is not set", "# CONFIG_MODULES is not set", "CONFIG_ENA_ETHERNET=y", "CONFIG_VIRTIO_NET=y",
		"CONFIG_NUMA=y", "CONFIG_X86_PAT=y",
		"CONFIG_EFI_STUB=y", "CONFIG_ACPI_BUTTON=y", "CONFIG_SERIAL_8250_CONSOLE=y", "CONFIG_NET_RX_BUSY_POLL=y",
		"CONFIG_RPS=y", "CONFIG_XPS=y", `CONFIG_DEFAULT_TCP_CONG="reno"`, `CONFIG_CMDLINE="console=ttyS0,115200n8 mitigations=off no_timer_check panic=10 panic_on_oops=1"`,
		// What real servers need that QEMU hides (README, bare metal).
		"CONFIG_TIGON3=y", "CONFIG_R8169=y", "CONFIG_X86_MCE=y", "CONFIG_X86_MCE_INTEL=y", "CONFIG_X86_MCE_AMD=y",
		"CONFIG_MEMORY_FAILURE=y", "CONFIG_ACPI_APEI_GHES=y", "CONFIG_ACPI_APEI_PCIEAER=y", "CONFIG_PCIEAER=y",
		"CONFIG_SPARSEMEM_VMEMMAP=y", "CONFIG_INTEL_IOMMU=y", "CONFIG_AMD_IOMMU=y", "CONFIG_IRQ_REMAP=y",
		"CONFIG_IOMMU_DEFAULT_PASSTHROUGH=y", "CONFIG_HOTPLUG_PCI_PCIE=y", "CONFIG_HOTPLUG_PCI_ACPI=y",
		"CONFIG_FW_LOADER_COMPRESS_XZ=y", "CONFIG_FW_LOADER_COMPRESS_ZSTD=y",
	} {
		if !strings.Contains(c.Config, "\n"+line+"\n") {
			t.Errorf(".config lacks %q", line)
		}
	}
	if c.PolicyCmdline != "console=ttyS0,115200n8 mitigations=off no_timer_check panic=10 panic_on_oops=1" {
		t.Errorf("policy cmdline %q", c.PolicyCmdline)
	}
	t.Logf("Linux %s, key %s\n%s", c.Source.Version, c.Key, c.Summary)

	// Same inputs, same key; the per-image initramfs and command line do
	// not enter it (they only relink).
	o.Initramfs, o.Cmdline = "/nonexistent.cpio", "hotpath.x=1"
	c2, err := Configure(ctxFor(t, 10*time.Minute), o)
	if err != nil {
		t.Fatal(err)
	}
	if c2.Key != c.Key {
		t.Errorf("key changed between identical configurations: %s vs %s", c.Key, c2.Key)
	}

	// A changed fragment changes the key.
	frags, _ := DefaultFragments()
	hz := &Fragment{Name: "user.config", Requirements: []Requirement{{Symbol: "HZ_1000", Value: "y", Fragment: "user.config", Line: 1}}}
	o.Fragments = append(frags, hz)
	c3, err := Configure(ctxFor(t, 10*time.Minute), o)
	if err != nil {
		t.Fatal(err)
	}
	if c3.Key == c.Key {
		t.Error("a fragment change did not change the key")
	}
	if !strings.Contains(c3.Config, "\nCONFIG_HZ=1000\n") {
		t.Error("HZ_1000 fragment did not take effect")
	}
}

// An option whose dependency is switched off is reported by name, with the
// symbol it depends on, read from the real Kconfig files.
func TestConfigureLinuxUnmet(t *testing.T) {
	o := realOptions(t)
	frags, _ := DefaultFragments()
	// HOTPLUG_PCI, which nothing selects (PCI_MSI was the example until the
	// IOMMU drivers came to select it).
	noBlock := &Fragment{Name: "user.config", Requirements: []Requirement{{Symbol: "HOTPLUG_PCI", Value: NotSet, Fragment: "user.config", Line: 1}}}
	o.Fragments = append(frags, noBlock)
	_, err := Configure(ctxFor(t, 10*time.Minute), o)
	var pe *PolicyError
	if !errors.As(err, &pe) {
		t.Fatalf("want a PolicyError, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"CONFIG_HOTPLUG_PCI_PCIE", "depends on HOTPLUG_PCI && PCIEPORTBUS", "HOTPLUG_PCI is not set", "drivers/pci/pcie/Kconfig", "inside if HOTPLUG_PCI (drivers/pci/hotplug/Kconfig"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	t.Log(msg)
}

// newc writes a minimal newc cpio archive holding one regular file.
func newc(name string, data []byte) []byte {
	var b bytes.Buffer
	rec := func(name string, mode uint32, data []byte) {
		fmt.Fprintf(&b, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			1, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
		b.WriteString(name + "\x00")
		for b.Len()%4 != 0 {
			b.WriteByte(0)
		}
		b.Write(data)
		for b.Len()%4 != 0 {
			b.WriteByte(0)
		}
	}
	rec(name, 0o100644, data)
	rec("TRAILER!!!", 0, nil)
	return b.Bytes()
}

// With a built tree in the cache: a different initramfs and command line
// relink under the same key into a new file, the earlier kernel stays
// valid, the same inputs give a byte-identical bzImage, and a repeat is
// served from the cache. The cold build (~30 min on 2 cores) runs only when
// the tree is missing and HOTPATH_TEST_KERNEL_BUILD=1.
func TestBuildRelinkReproducible(t *testing.T) {
	o := realOptions(t)
	c, err := Configure(ctxFor(t, 10*time.Minute), o)
	if err != nil {
		t.Fatal(err)
	}
	built := filepath.Join(o.CacheDir, "kernel", "build", c.Key[:16], ".hotpath-objects")
	if _, err := os.Stat(built); err != nil && os.Getenv("HOTPATH_TEST_KERNEL_BUILD") != "1" {
		t.Skipf("no built kernel tree for key %s in %s: run `make kernel` first, or set HOTPATH_TEST_KERNEL_BUILD=1 to build it here", c.Key[:16], o.CacheDir)
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.cpio"), filepath.Join(dir, "b.cpio")
	os.WriteFile(a, newc("hello", []byte("a\n")), 0o644)
	os.WriteFile(b, newc("hello", []byte("b\n")), 0o644)
	ctx := ctxFor(t, 90*time.Minute)

	build := func(initramfs, cmdline string, rebuild bool) *Result {
		t.Helper()
		o := o
		o.Initramfs, o.Cmdline, o.Rebuild = initramfs, cmdline, rebuild
		start := time.Now()
		r, err := Build(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("built %s cached=%v in %s", r.BzImage, r.Cached, time.Since(start).Round(time.Millisecond))
		return r
	}
	ra := build(a, "hotpath.test=a", false)
	rb := build(b, "hotpath.test=b", false)
	if ra.Key != rb.Key || ra.Key != c.Key {
		t.Errorf("initramfs/cmdline changed the key: %s %s %s", c.Key, ra.Key, rb.Key)
	}
	if ra.BzImage == rb.BzImage || ra.SHA256 == rb.SHA256 {
		t.Errorf("different initramfs gave the same kernel %s", ra.BzImage)
	}
	if got, err := fileSHA256(ra.BzImage); err != nil || got != ra.SHA256 {
		t.Errorf("first kernel changed after a later build: %s %v", got, err)
	}
	if ra.Cmdline != "console=ttyS0,115200n8 mitigations=off no_timer_check panic=10 panic_on_oops=1 hotpath.test=a" {
		t.Errorf("cmdline %q", ra.Cmdline)
	}
	cfg, err := os.ReadFile(rb.Config)
	if err != nil || !strings.Contains(string(cfg), `CONFIG_CMDLINE="console=ttyS0,115200n8 mitigations=off no_timer_check panic=10 panic_on_oops=1 hotpath.test=b"`) ||
		!strings.Contains(string(cfg), "CONFIG_INITRAMFS_COMPRESSION_NONE=y") {
		t.Errorf("final config %s lacks the per-image values (%v)", rb.Config, err)
	}
	again := build(a, "hotpath.test=a", true)
	if again.Cached || again.SHA256 != ra.SHA256 {
		t.Errorf("not reproducible: same inputs gave %s then %s", ra.SHA256, again.SHA256)
	}
	if cached := build(a, "hotpath.test=a", false); !cached.Cached || cached.SHA256 != ra.SHA256 {
		t.Errorf("repeat not served from cache: %+v", cached)
	}
}
