// Package cpupower sets the CPU power policy of a bare-metal machine for
// latency: the performance governor (or, under intel_pstate and
// amd-pstate in active mode, their performance policy, which fixes the
// energy-performance preference at "performance"), and a CPU latency PM
// QoS request held by PID 1 on /dev/cpu_dma_latency so that the cpuidle
// governor keeps idle CPUs out of deep C-states.
//
// Why: the kernel's default governor, schedutil, makes intel_pstate in
// active mode fall back to its powersave policy, and without intel_idle
// acpi_idle lets idle CPUs sink into the deepest C-state the firmware
// lists, whose exit (85-290 µs for C6) a request that arrives on an idle
// core waits for. Under a hypervisor the host owns both, and virtualized
// EC2 exposes neither: the steps are skipped there, with the reason.
//
// Everything is read from and written to a sysfs root and a PM QoS
// device that the caller gives, so tests run against fake trees.
package cpupower

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/config"
)

// Options are what the steps need.
type Options struct {
	SysRoot, ProcRoot string // "/sys", "/proc"
	Power             config.Power
	// QoS holds the CPU latency request; nil is /dev/cpu_dma_latency
	// under DevRoot.
	QoS     QoS
	DevRoot string // "/dev"
}

// Steps are cpu-governor and cpu-latency.
func Steps(o Options) []boot.Step {
	if o.QoS == nil {
		o.QoS = &DevQoS{Path: filepath.Join(o.DevRoot, "cpu_dma_latency")}
	}
	gov := &governor{o: o}
	lat := &latency{o: o}
	return []boot.Step{
		{Name: "cpu-governor", Apply: gov.apply, Verify: gov.verify},
		{Name: "cpu-latency", Apply: lat.apply, Verify: lat.verify},
	}
}

// gate returns a skip when the policy says not to act here.
func gate(o Options) error {
	switch o.Power.Policy {
	case config.PowerOff:
		return boot.Skip("power.policy=off")
	case config.PowerOn:
		return nil
	}
	if why := Virtualized(o.SysRoot, o.ProcRoot); why != "" {
		return boot.Skip("virtualized (%s): the host owns P- and C-states; power.policy=on acts where the knobs exist", why)
	}
	return nil
}

// Virtualized says why the machine runs under a hypervisor, "" on bare
// metal: the x86 "hypervisor" CPU flag (CPUID leaf 1 ECX bit 31, which
// every hypervisor sets and no CPU does), Xen's /sys/hypervisor/type, or
// an EC2 instance type that is not a .metal one, or QEMU's DMI vendor
// (arm64 has no hypervisor flag: the DMI tables tell).
func Virtualized(sysRoot, procRoot string) string {
	if f, err := os.Open(filepath.Join(procRoot, "cpuinfo")); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok && strings.TrimSpace(k) == "flags" && slices.Contains(strings.Fields(v), "hypervisor") {
				return "cpuinfo flag hypervisor"
			}
		}
	}
	if t := readTrim(filepath.Join(sysRoot, "hypervisor/type")); t != "" {
		return "hypervisor " + t
	}
	vendor := readTrim(filepath.Join(sysRoot, "class/dmi/id/sys_vendor"))
	product := readTrim(filepath.Join(sysRoot, "class/dmi/id/product_name"))
	switch {
	case vendor == "Amazon EC2" && product != "" && !strings.Contains(product, ".metal"):
		return "EC2 " + product
	case vendor == "QEMU":
		return "DMI vendor QEMU"
	}
	return ""
}

func readTrim(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func cpuDir(sysRoot string) string { return filepath.Join(sysRoot, "devices/system/cpu") }

// policies lists the cpufreq policy directories, in number order.
func policies(sysRoot string) []string {
	ps, _ := filepath.Glob(filepath.Join(cpuDir(sysRoot), "cpufreq/policy[0-9]*"))
	sort.Slice(ps, func(i, j int) bool {
		a, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(ps[i]), "policy"))
		b, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(ps[j]), "policy"))
		return a < b
	})
	return ps
}

const performance = "performance"

// governor is the cpu-governor step.
type governor struct {
	o Options
	// set are the policies whose governor was set (verify reads them);
	// epp those that have an energy-performance preference.
	set, epp []string
}

// apply makes every cpufreq policy's governor "performance". Under
// intel_pstate or amd-pstate in active mode that is the driver's own
// performance policy, which pins the energy-performance preference to
// "performance" (a write of another one is refused, EBUSY); where a
// driver keeps EPP apart (a governor other than performance is refused
// by nothing here) EPP is written too.
func (g *governor) apply(_ context.Context, d boot.Detail) error {
	g.set, g.epp = nil, nil
	if err := gate(g.o); err != nil {
		return err
	}
	ps := policies(g.o.SysRoot)
	if len(ps) == 0 {
		return boot.Skip("no cpufreq policy in %s (no cpufreq driver for this CPU, or firmware control)", filepath.Join(cpuDir(g.o.SysRoot), "cpufreq"))
	}
	d["driver"] = readTrim(filepath.Join(ps[0], "scaling_driver"))
	if st := readTrim(filepath.Join(cpuDir(g.o.SysRoot), "intel_pstate/status")); st != "" {
		d["intel_pstate"] = st
	}
	d["before"] = readTrim(filepath.Join(ps[0], "scaling_governor"))
	var errs []error
	for _, p := range ps {
		name := filepath.Base(p)
		avail := strings.Fields(readTrim(filepath.Join(p, "scaling_available_governors")))
		if !slices.Contains(avail, performance) {
			errs = append(errs, fmt.Errorf("%s: no performance governor (available: %s; kernel without CONFIG_CPU_FREQ_GOV_PERFORMANCE?)",
				name, strings.Join(avail, " ")))
			continue
		}
		if err := writeAttr(filepath.Join(p, "scaling_governor"), performance); err != nil {
			errs = append(errs, fmt.Errorf("%s: scaling_governor: %w", name, err))
			continue
		}
		g.set = append(g.set, p)
		eppFile := filepath.Join(p, "energy_performance_preference")
		cur, err := os.ReadFile(eppFile)
		if err != nil {
			continue // no EPP (acpi-cpufreq, cppc, intel_pstate passive)
		}
		g.epp = append(g.epp, p)
		if strings.TrimSpace(string(cur)) != performance {
			if err := writeAttr(eppFile, performance); err != nil {
				errs = append(errs, fmt.Errorf("%s: energy_performance_preference: %w", name, err))
			}
		}
	}
	d["policies"] = strconv.Itoa(len(ps))
	if len(g.set) == 0 {
		return boot.Skip("%v", errors.Join(errs...))
	}
	return errors.Join(errs...)
}

func (g *governor) verify(_ context.Context, d boot.Detail) error {
	var errs []error
	gov, epp := map[string]bool{}, map[string]bool{}
	for _, p := range g.set {
		v := readTrim(filepath.Join(p, "scaling_governor"))
		gov[v] = true
		if v != performance {
			errs = append(errs, fmt.Errorf("%s: governor reads %q", filepath.Base(p), v))
		}
	}
	for _, p := range g.epp {
		v := readTrim(filepath.Join(p, "energy_performance_preference"))
		epp[v] = true
		if v != performance {
			errs = append(errs, fmt.Errorf("%s: energy_performance_preference reads %q", filepath.Base(p), v))
		}
	}
	d["governor"] = joinKeys(gov)
	if len(epp) > 0 {
		d["epp"] = joinKeys(epp)
	}
	return errors.Join(errs...)
}

func joinKeys(m map[string]bool) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// writeAttr writes an existing sysfs attribute in one write.
func writeAttr(name, v string) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, werr := f.Write([]byte(v))
	return errors.Join(werr, f.Close())
}
