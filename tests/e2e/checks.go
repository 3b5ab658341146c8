// Package e2e holds the end-to-end checks run against a booted hotpath
// guest, from outside it: on the boot report the init prints on the serial
// console (the guest has no shell, so the init reports facts and the test
// judges them) and over HTTP from the guest's network namespace.
//
// The checks are plain functions returning every violation they find, so
// that they are unit-tested on reports and servers made to break them, and
// a failing boot names everything that is wrong at once.
package e2e

import (
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/hotpath-dev/hotpath/init/kernlog"
	"github.com/hotpath-dev/hotpath/init/report"
	kernelconfig "github.com/hotpath-dev/hotpath/kernel-config"
)

// nicSteps are the init's NIC tuning steps; on virtio-net each must be
// applied or skipped with a reason.
var nicSteps = []string{
	"nic-channels", "nic-tx-push-buf", "nic-coalesce", "nic-gro", "nic-link-up",
	"nic-qdisc", "nic-irq-affinity", "nic-xps", "nic-rps", "nic-bql", "nic-napi-defer",
}

// requiredSysctls are the sysctls the case study's steps rest on, with the
// value each must read back (empty: a positive number of microseconds).
// Each must also have been applied at boot: a skipped step means the kernel
// lacks the sysctl, and then busy polling is not happening whatever the
// report's facts say.
var requiredSysctls = map[string]string{
	"net.core.busy_poll":              "",
	"net.core.busy_read":              "",
	"net.core.default_qdisc":          "pfifo_fast",
	"net.ipv4.tcp_congestion_control": "reno",
}

// CheckHardwareErrors checks that the init read the kernel log for
// hardware errors (every source counted) and that there were none: a
// QEMU guest has no hardware to fail, so one here is a bug in the
// counting or an injected error the test did not expect.
func CheckHardwareErrors(r *report.Report) []error {
	h := r.HardwareErrors
	if h == nil {
		return []error{fmt.Errorf("hardware errors not reported: the init did not read the kernel log")}
	}
	var errs []error
	var got []string
	for _, c := range h.Counts {
		got = append(got, c.Class)
	}
	var want []string
	for _, c := range kernlog.HardwareErrors {
		want = append(want, c.Name)
	}
	if !slices.Equal(got, want) {
		errs = append(errs, fmt.Errorf("hardware errors counted by source %v, want %v", got, want))
	}
	if h.Total() != 0 || len(h.Last) != 0 {
		errs = append(errs, fmt.Errorf("hardware errors logged on a QEMU guest: %s", h))
	}
	return errs
}

// CheckReport checks the report's shape: every step listed with a valid
// outcome, none failed, NIC steps applied or skipped with a reason, the
// ready time given, no unknown configuration keys, the boot timeline
// (CheckTimeline).
func CheckReport(r *report.Report, cpus int) []error {
	var errs []error
	bad := func(f string, a ...any) { errs = append(errs, fmt.Errorf(f, a...)) }
	if r.Version != report.Version {
		bad("report version %d, want %d", r.Version, report.Version)
	}
	if r.CPUs != cpus {
		bad("report says %d CPUs, the guest has %d", r.CPUs, cpus)
	}
	if r.ReadyMillis <= 0 {
		bad("ready time %d ms: not reported", r.ReadyMillis)
	}
	if r.ReadyError != "" {
		bad("workload not ready: %s", r.ReadyError)
	}
	if w := r.Workload; w == nil {
		bad("workload not reported")
	} else {
		if want := cpuList(cpus); w.CPUs != want {
			bad("workload HOTPATH_CPUS %q, want %q (every CPU)", w.CPUs, want)
		}
		if w.Port <= 0 {
			bad("workload port %d", w.Port)
		}
		if w.PID <= 0 {
			bad("workload pid %d", w.PID)
		}
	}
	if r.Kernel == "" {
		bad("kernel release not reported")
	}
	if len(r.Unknown) > 0 {
		bad("unknown configuration keys: %v", r.Unknown)
	}
	for _, name := range nicSteps {
		s, ok := r.Step(name)
		if !ok {
			bad("step %s missing from the report", name)
			continue
		}
		if s.Status != report.Applied && s.Status != report.Skipped {
			bad("step %s: %s, want applied or skipped", name, s.Status)
		}
	}
	for _, name := range sortedKeys(requiredSysctls) {
		s, ok := r.Step("sysctl " + name)
		switch {
		case !ok:
			bad("step %q missing from the report", "sysctl "+name)
		case s.Status != report.Applied:
			bad("step %q %s (%s%s), want applied: the case study rests on it", s.Name, s.Status, s.Reason, s.Error)
		}
	}
	errs = append(errs, CheckTimeline(r)...)
	errs = append(errs, CheckHardwareErrors(r)...)
	seen := map[string]bool{}
	for _, s := range r.Steps {
		if seen[s.Name] {
			bad("step %s listed twice", s.Name)
		}
		seen[s.Name] = true
		switch s.Status {
		case report.Applied:
		case report.Skipped:
			if s.Reason == "" {
				bad("step %s skipped without a reason", s.Name)
			}
		case report.Background: // its outcome comes in a step-done event
		case report.Failed:
			bad("step %s failed: %s", s.Name, s.Error)
		default:
			bad("step %s has status %q", s.Name, s.Status)
		}
	}
	return errs
}

// CheckPolicy checks the kernel policy held at run time: mitigations off
// (every vulnerabilities file "Vulnerable..." or "Not affected"), no
// netfilter, no audit, no seccomp, no loadable modules, mitigations=off on
// the command line.
func CheckPolicy(f *report.Facts) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if len(f.Vulnerabilities) == 0 {
		bad("no /sys/devices/system/cpu/vulnerabilities entries reported")
	}
	for _, name := range sortedKeys(f.Vulnerabilities) {
		v := f.Vulnerabilities[name]
		if !strings.HasPrefix(v, "Vulnerable") && v != "Not affected" && notSoftware[name] != v {
			bad("vulnerabilities/%s = %q: a mitigation is active", name, v)
		}
	}
	if f.Netfilter {
		bad("netfilter present (/proc/net/netfilter)")
	}
	if f.Audit {
		bad("audit present (/proc/self/loginuid)")
	}
	if f.Modules {
		bad("loadable modules supported (/proc/modules)")
	}
	if f.Seccomp {
		bad("seccomp present (Seccomp: in /proc/self/status)")
	}
	// Linux reads the words in order and the last one wins: mitigations=off
	// must be there, and no mitigation parameter may say anything else.
	words := kernelconfig.CmdlineWords(f.Cmdline)
	if !slices.Contains(words, "mitigations=off") {
		bad("kernel command line %q lacks mitigations=off", f.Cmdline)
	}
	for _, w := range words {
		if w != "mitigations=off" && kernelconfig.IsRefusedParam(w) {
			bad("kernel command line %q: %s overrides mitigations=off", f.Cmdline, w)
		}
	}
	return errs
}

// notSoftware are the vulnerabilities values that say "Mitigation" for
// something no kernel option or command line leaves out (arm64, Linux 6.1
// arch/arm64/kernel/proton-pack.c): spectre_v1's __user pointer masking is
// unconditional, and "CSV2" is the CPU's own branch-predictor isolation, a
// hardware property; ", but not BHB" says the Spectre-BHB flush is off.
var notSoftware = map[string]string{
	"spectre_v1": "Mitigation: __user pointer sanitization",
	"spectre_v2": "Mitigation: CSV2, but not BHB",
}

// Network is what the test's DHCP server handed the guest.
type Network struct {
	Addr    string // CIDR, e.g. 10.77.0.2/24
	Gateway string
	MTU     int
}

// CheckLocality checks the NIC and network tuning on a virtio-net guest
// with one queue pair per CPU: queue i's IRQs and XPS on CPU i, RPS off, mq
// with pfifo_fast children, GRO off, the busy-poll and congestion sysctls, no
// AF_PACKET socket left by DHCP, the lease installed forever.
func CheckLocality(f *report.Facts, cpus int, net Network) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	for _, name := range sortedKeys(requiredSysctls) {
		want := requiredSysctls[name]
		got, ok := f.Sysctls[name]
		switch {
		case !ok:
			bad("sysctl %s not reported", name)
		case want == "" && !positive(got):
			bad("sysctl %s = %q, want a positive number", name, got)
		case want != "" && got != want:
			bad("sysctl %s = %q, want %q", name, got, want)
		}
	}
	if f.PacketSockets != 0 {
		bad("%d AF_PACKET sockets open after DHCP, want 0", f.PacketSockets)
	}
	n := f.NIC
	if n == nil {
		return append(errs, fmt.Errorf("no primary NIC reported"))
	}
	if n.Driver != "virtio_net" {
		bad("NIC %s driver %q, want virtio_net", n.Name, n.Driver)
	}
	if n.RxQueues != cpus || n.TxQueues != cpus {
		bad("NIC %s has %d rx / %d tx queues, want %d each (one per CPU)", n.Name, n.RxQueues, n.TxQueues, cpus)
	}
	// Every queue has its interrupts (virtio: input.i and output.i) on CPU i.
	irqsOf := map[int]int{}
	for _, irq := range n.IRQs {
		irqsOf[irq.Queue]++
		if want := strconv.Itoa(irq.Queue % cpus); irq.Affinity != want {
			bad("IRQ %d (%s, queue %d) affinity %q, want CPU %s", irq.IRQ, irq.Name, irq.Queue, irq.Affinity, want)
		}
	}
	for q := 0; q < cpus; q++ {
		if irqsOf[q] == 0 {
			bad("no interrupt reported for queue %d", q)
		}
	}
	for q := 0; q < cpus; q++ {
		key := fmt.Sprintf("tx-%d", q)
		mask, ok := n.XPS[key]
		if !ok {
			bad("XPS of %s not reported", key)
			continue
		}
		if m, err := parseMask(mask); err != nil || m.Cmp(new(big.Int).Lsh(big.NewInt(1), uint(q))) != 0 {
			bad("XPS %s = %q, want CPU %d only", key, mask, q)
		}
	}
	if len(n.RPS) < cpus {
		bad("RPS reported for %d rx queues, want %d", len(n.RPS), cpus)
	}
	for _, key := range sortedKeys(n.RPS) {
		if m, err := parseMask(n.RPS[key]); err != nil || m.Sign() != 0 {
			bad("RPS %s = %q, want 0 (off)", key, n.RPS[key])
		}
	}
	if n.Qdisc != "mq" {
		bad("root qdisc %q, want mq", n.Qdisc)
	}
	if len(n.Children) != n.TxQueues {
		bad("%d child qdiscs for %d tx queues", len(n.Children), n.TxQueues)
	}
	for i, c := range n.Children {
		if c != "pfifo_fast" {
			bad("child qdisc %d is %q, want pfifo_fast", i, c)
		}
	}
	if n.GRO != "off" {
		bad("GRO %q, want off", n.GRO)
	}
	if !slices.Contains(n.Addrs, net.Addr) {
		bad("NIC addresses %v lack the leased %s", n.Addrs, net.Addr)
	}
	if n.Lifetime != "forever" {
		bad("address lifetime %q, want forever", n.Lifetime)
	}
	if net.Gateway != "" && n.Gateway != net.Gateway {
		bad("gateway %q, want %q from the lease", n.Gateway, net.Gateway)
	}
	if net.MTU != 0 && n.MTU != net.MTU {
		bad("MTU %d, want %d from the lease", n.MTU, net.MTU)
	}
	return errs
}

// positive reports whether s is a decimal integer above zero: anything else
// ("0", "", "unreadable: ...") means the setting is not in effect.
func positive(s string) bool {
	n, err := strconv.ParseUint(s, 10, 64)
	return err == nil && n > 0
}

// parseMask parses a sysfs CPU bitmap ("00000003", "ff,00000000").
func parseMask(s string) (*big.Int, error) {
	h := strings.ReplaceAll(strings.TrimSpace(s), ",", "")
	if h == "" {
		return nil, fmt.Errorf("empty mask")
	}
	m, ok := new(big.Int).SetString(h, 16)
	if !ok {
		return nil, fmt.Errorf("mask %q is not hex", s)
	}
	return m, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// cpuList is the CPU list of CPUs 0..n-1 as the init writes it.
func cpuList(n int) string {
	if n == 1 {
		return "0"
	}
	return fmt.Sprintf("0-%d", n-1)
}
