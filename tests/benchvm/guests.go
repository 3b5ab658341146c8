package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// spec is one guest of the comparison.
type spec struct {
	Key  string // its -guests name
	Name string // as printed
	// Stock is Debian's stock kernel with gpinit; otherwise the guest is
	// the appliance disk built with Source and Cmdline.
	Stock bool
	// Source is the kernel source (image.Options.KernelSource); "" is the
	// default kernel (Debian's linux-source-6.12).
	Source string
	// Version is the kernel series Source holds ("6.1"), checked against
	// the kernel cache before building (kernelCached); "" for the default.
	Version string
	Cmdline string // image.Options.Cmdline: the guest's init configuration
}

// Step10 are the step-10 settings the "on" guests get, the same ones the
// init's defaults would be.
type Step10 struct {
	DeferHardIRQs   int
	GROFlushTimeout time.Duration
}

// The step's two halves as command-line configuration, written out for
// every appliance guest so that a guest measures what its name says
// whatever the image defaults are.
func (s Step10) deferral() string {
	// Nanoseconds, the kernel's unit, and ASCII on the command line.
	return fmt.Sprintf("hotpath.nic.defer_hard_irqs=%d hotpath.nic.gro_flush_timeout=%dns", s.DeferHardIRQs, s.GROFlushTimeout.Nanoseconds())
}

const (
	noDeferral = "hotpath.nic.defer_hard_irqs=0 hotpath.nic.gro_flush_timeout=0s"
	preferOn   = "hotpath.nic.prefer_busy_poll=on hotpath.workload.args=-prefer-busy-poll"
	preferOff  = "hotpath.workload.args=-prefer-busy-poll=false"
	// preferFlagOnly is the workload's half alone (its own flag), for
	// the guest that measures it without the deferral.
	preferFlagOnly = "hotpath.workload.args=-prefer-busy-poll"
)

// specs returns every guest bench-vm knows, in its printing order, for
// the step-10 values s and the 6.1 kernel source.
func specs(s Step10, source61 string) []spec {
	return []spec{
		{Key: "6.1", Name: "6.1, step 10 off", Source: source61, Version: "6.1", Cmdline: noDeferral + " " + preferOff},
		{Key: "6.1-step10", Name: "6.1, step 10 asked", Source: source61, Version: "6.1", Cmdline: s.deferral() + " " + preferOn},
		{Key: "6.12", Name: "6.12, step 10 off", Cmdline: noDeferral + " " + preferOff},
		{Key: "6.12-defer", Name: "6.12, deferral only", Cmdline: s.deferral() + " " + preferOff},
		// The workload's flag alone: init refuses nic.prefer_busy_poll
		// without a deferral (nothing to gain), which this guest measures.
		{Key: "6.12-prefer", Name: "6.12, prefer-busy-poll only", Cmdline: noDeferral + " " + preferFlagOnly},
		{Key: "6.12-step10", Name: "6.12, step 10 on", Cmdline: s.deferral() + " " + preferOn},
		{Key: "stock", Name: "stock Debian kernel", Stock: true},
		// Step 8 (issue 38): what a stopped transmit queue costs behind
		// each qdisc, on 6.12 whose virtio_net runs byte queue limits.
		// Step 10 off in all three, every setting written out.
		{Key: "6.12-noqueue", Name: "6.12, noqueue, BQL on", Cmdline: step8Base + " " + noqueue + " hotpath.nic.bql=on"},
		{Key: "6.12-bql-inert", Name: "6.12, noqueue, BQL inert", Cmdline: step8Base + " " + noqueue + " hotpath.nic.bql=inert"},
		{Key: "6.12-pfifo", Name: "6.12, pfifo_fast, BQL on", Cmdline: step8Base + " " + pfifoFast + " hotpath.nic.bql=on"},
	}
}

// The step-8 guests' settings. pfifo_fast is the queueing qdisc the
// kernel always has (net/sched/sch_generic.c); fq is not built
// (CONFIG_NET_SCH_FQ is off in kernel-config). With nic.qdisc=keep the
// device keeps what the kernel attached at open: mq with
// net.core.default_qdisc children for several queues, the default qdisc
// itself for one.
const (
	step8Base = noDeferral + " " + preferOff
	noqueue   = "hotpath.nic.qdisc=mq hotpath.sysctl.net.core.default_qdisc=noqueue"
	pfifoFast = "hotpath.nic.qdisc=keep hotpath.sysctl.net.core.default_qdisc=pfifo_fast"
)

// DefaultGuests is what `make bench-vm` compares.
const DefaultGuests = "6.1,6.12,6.12-step10,stock"

// selectGuests picks the guests named in list (comma-separated keys),
// keeping the table's order.
func selectGuests(all []spec, list string) ([]spec, error) {
	want := map[string]bool{}
	for _, k := range strings.Split(list, ",") {
		if k = strings.TrimSpace(k); k != "" {
			want[k] = true
		}
	}
	var out []spec
	for _, s := range all {
		if want[s.Key] {
			out = append(out, s)
			delete(want, s.Key)
		}
	}
	if len(want) > 0 {
		var keys, known []string
		for k := range want {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, s := range all {
			known = append(known, s.Key)
		}
		return nil, fmt.Errorf("unknown guests %s (known: %s)", strings.Join(keys, ","), strings.Join(known, ","))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no guest selected")
	}
	return out, nil
}

// kernelCached reports whether the kernel cache under dir holds an x86-64
// kernel of the series version ("6.1"): an image build then relinks it
// with the guest's initramfs (a minute or two) instead of compiling the
// kernel from scratch (half an hour and more on a small machine), which a
// benchmark must not start on its own.
func kernelCached(dir, version string) (bool, error) {
	cfgs, err := filepath.Glob(filepath.Join(dir, "kernel", "bzimage", "*.config"))
	if err != nil {
		return false, err
	}
	want := "# Linux/x86_64 " + version + "."
	for _, p := range cfgs {
		f, err := os.Open(p)
		if err != nil {
			return false, err
		}
		sc := bufio.NewScanner(f)
		for i := 0; i < 5 && sc.Scan(); i++ {
			if strings.HasPrefix(sc.Text(), want) {
				f.Close()
				return true, nil
			}
		}
		f.Close()
	}
	return false, nil
}
