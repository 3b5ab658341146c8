package kernelconfig

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// kbuildTree is a small source tree in Kbuild's shape: the top Kbuild,
// the architecture's Makefile (its libs-y and drivers-y), conditionals,
// continuation lines, composite objects, subst, rules and recipes.
var kbuildTree = map[string]string{
	"Kbuild": `obj-y += init/
obj-y += arch/$(SRCARCH)/
obj-y += kernel/
obj-$(CONFIG_NET) += net/
obj-y += $(ARCH_LIB)
obj-y += $(ARCH_DRIVERS)
`,
	"arch/x86/Makefile": `libs-y += arch/x86/lib/
drivers-$(CONFIG_PCI) += arch/x86/pci/
archheaders:
	$(Q)$(MAKE) obj-y=nothing.o
`,
	"arch/x86/Kbuild":            "obj-y += kernel/\n",
	"arch/x86/kernel/Makefile":   "obj-y := head.o setup.o\n",
	"arch/x86/lib/Makefile":      "lib-y := memcpy.o\nobj-y += usercopy.o\n",
	"arch/x86/pci/Makefile":      "obj-y += common.o\nobj-y += common.o\n",
	"arch/arm64/Makefile":        "libs-y := arch/arm64/lib/ $(libs-y)\n",
	"arch/arm64/Kbuild":          "obj-y += kernel/\n",
	"arch/arm64/kernel/Makefile": "obj-y := head.o\n",
	"arch/arm64/lib/Makefile":    "lib-y := memcpy.o\n",
	"init/Makefile":              "obj-y := main.o # a comment: obj-y += no.o\n",
	"lib/Makefile":               "lib-y := sort.o\nobj-y += string.o\n",
	"net/Makefile":               "obj-y += core/\n",
	"net/core/Makefile":          "obj-y := sock.o skbuff.o\n",
	"kernel/Kbuild":              "obj-y += fork.o\n",
	"kernel/Makefile":            "obj-y := ignored.o (Kbuild wins)\n",
	"kernel/hyperv/Makefile":     "obj-y := hv.o\n",
	"kernel/feature/Makefile": `obj-y := a.o \
	b.o \
	c.o
ifdef CONFIG_SMP
obj-y += smp.o
else
obj-y += up.o
endif
ifeq ($(CONFIG_PREEMPT),y)
obj-y += preempt.o
else ifeq ($(BITS),64)
obj-y += sixtyfour.o
else
obj-y += other.o
endif
ifneq ($(CONFIG_NET),)
obj-y += netfeature.o
endif
obj-$(CONFIG_FOO) += foo.o
foo-y := foo1.o foo2.o
foo-$(CONFIG_BAR) += foo3.o
foo-objs += foo1.o
$(obj)/a.o: $(src)/a.h
	$(call cmd,obj-y += recipe.o)
CFLAGS_a.o := -O2
`,
}

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func configOf(t *testing.T, s string) *Config {
	t.Helper()
	c, err := ParseConfig(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCountConfigured: the objects each configuration builds in
// kbuildTree, counted by hand.
func TestCountConfigured(t *testing.T) {
	files := map[string]string{}
	for k, v := range kbuildTree {
		files[k] = v
	}
	// kernel/ descends into feature/ and, through subst, hyperv/.
	files["kernel/Kbuild"] = "obj-y += fork.o feature/\nobj-$(subst m,y,$(CONFIG_HYPERV)) += hyperv/\n"
	tree := writeTree(t, files)
	// init 1 + arch/x86/kernel 2 + kernel/fork 1 + lib 2 + arch/x86/lib 2
	// + feature a b c 3, one of smp/up, one of preempt/sixtyfour.
	const base = 1 + 2 + 1 + 2 + 2 + 3 + 1 + 1
	for _, tc := range []struct {
		name, arch, config string
		want               int
	}{
		{"nothing set", "x86", "", base},
		{"SMP and PREEMPT: other branches", "x86", "CONFIG_SMP=y\nCONFIG_PREEMPT=y\n", base},
		{"NET: net/core and netfeature", "x86", "CONFIG_NET=y\n", base + 2 + 1},
		{"NET not set", "x86", "# CONFIG_NET is not set\n", base},
		{"PCI: drivers-y, common.o once", "x86", "CONFIG_PCI=y\n", base + 1},
		{"composite foo.o: itself and two parts", "x86", "CONFIG_FOO=y\n", base + 3},
		{"composite with an optional part", "x86", "CONFIG_FOO=y\nCONFIG_BAR=y\n", base + 4},
		{"subst m,y: a module symbol builds its directory in", "x86", "CONFIG_HYPERV=m\n", base + 1},
		{"arm64: its own arch tree and libs-y", "arm64", "", 1 + 1 + 1 + 2 + 1 + 3 + 1 + 1},
	} {
		if got := countConfigured(tree, tc.arch, configOf(t, tc.config)); got != tc.want {
			t.Errorf("%s: %d objects, want %d", tc.name, got, tc.want)
		}
	}
}

// TestConfiguredEstimate: a configuration never built is expected to
// build the last build's count of the same kernel and architecture plus
// the difference the Kbuild files make; another kernel's or
// architecture's build is no reference; this configuration's own count
// wins; without a reference, the target's last count.
func TestConfiguredEstimate(t *testing.T) {
	tree := writeTree(t, kbuildTree)
	cache := t.TempDir()
	builds := filepath.Join(cache, "kernel", "build")
	const header = "# Linux/x86_64 6.12.118 Kernel Configuration\n"
	build := func(name, header, config string, objects int, age time.Duration) string {
		d := filepath.Join(builds, name)
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, ".config"), []byte("#\n# Automatically generated file; DO NOT EDIT.\n"+header+"#\n"+config), 0o644)
		if objects > 0 {
			p := filepath.Join(d, ".hotpath-objects")
			os.WriteFile(p, []byte(strconv.Itoa(objects)), 0o644)
			ts := time.Now().Add(-age)
			os.Chtimes(p, ts, ts)
		}
		return d
	}
	o := Options{CacheDir: cache}
	dir := build("new", header, "CONFIG_NET=y\nCONFIG_PCI=y\n", 0, 0)
	if e := expectedObjects(o, dir, tree); e.exact || e.n != defaultObjectEstimate {
		t.Errorf("no build at all: %+v, want the default", e)
	}
	if e := expectedObjects(Options{CacheDir: cache, target: ARM64}, dir, tree); e.n != defaultObjectEstimateArm64 {
		t.Errorf("no arm64 build at all: %+v, want arm64's default %d", e, defaultObjectEstimateArm64)
	}
	os.WriteFile(objectsEstimate(o), []byte("1500\n"), 0o644)
	if e := expectedObjects(o, dir, tree); e.exact || e.n != 1500 {
		t.Errorf("no reference build: %+v, want the target's last count", e)
	}
	// References: an older one, the newest, and newer builds of other
	// kernels and architectures, which are no reference.
	build("older", header, "", 1000, 3*time.Hour)
	build("ref", header, "CONFIG_NET=y\n", 1100, 2*time.Hour)
	build("linux61", "# Linux/x86_64 6.1.192 Kernel Configuration\n", "", 900, time.Hour)
	build("arm64", "# Linux/arm64 6.12.118 Kernel Configuration\n", "", 800, time.Hour)
	e := expectedObjects(o, dir, tree)
	// ref built 1100 with NET; dir adds PCI: one object more.
	if e.exact || e.n != 1101 || !strings.Contains(e.from, "1100 built by the last x86_64 6.12.118 build (ref), +1") {
		t.Errorf("from the configured tree: %+v, want ~1101 from ref's 1100 +1", e)
	}
	// Fewer objects than the reference: the difference is negative.
	fewer := build("fewer", header, "", 0, 0)
	if e := expectedObjects(o, fewer, tree); e.n != 1100-2 {
		t.Errorf("without NET: %+v, want ~1098 (ref's 1100 less net/core's 2)", e)
	}
	// The source tree unknown: no Kbuild to read.
	if e := expectedObjects(o, dir, ""); e.n != 1500 {
		t.Errorf("no source tree: %+v, want the target's last count", e)
	}
	// Built before: its own count, exact.
	os.WriteFile(filepath.Join(dir, ".hotpath-objects"), []byte("1234\n"), 0o644)
	if e := expectedObjects(o, dir, tree); !e.exact || e.n != 1234 {
		t.Errorf("built before: %+v, want exactly 1234", e)
	}
}
