package nic

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/cpuset"
	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// Options are the tunings to apply (from the init configuration).
type Options struct {
	Channels    int    // 0 = min(max, len(CPUs))
	Coalesce    string // adaptive, static, off
	RxUsecs     int
	TxUsecs     int
	GRO         bool
	IRQAffinity bool
	XPS         bool
	RPS         bool   // true leaves rps_cpus alone
	Qdisc       string // mq, keep
}

// Tuner holds what the NIC steps share.
type Tuner struct {
	SysRoot  string // "/sys"
	ProcRoot string // "/proc"
	Link     Link
	CPUs     []int // the workload's CPUs, sorted
	NrCPUs   int   // nr_cpu_ids, the width of CPU masks
	Ethtool  Ethtool
	Netlink  Netlink
	Opt      Options
}

// Steps returns the NIC steps in the order they must run: channels first
// (it re-creates queues and IRQs), then the per-queue settings.
func (t *Tuner) Steps() []boot.Step {
	return []boot.Step{
		{Name: "nic-channels", Apply: t.applyChannels, Verify: t.verifyChannels},
		{Name: "nic-coalesce", Apply: t.applyCoalesce},
		{Name: "nic-gro", Apply: t.applyGRO, Verify: t.verifyGRO},
		{Name: "nic-link-up", Apply: t.applyLinkUp, Verify: t.verifyLinkUp},
		{Name: "nic-qdisc", Apply: t.applyQdisc, Verify: t.verifyQdisc},
		{Name: "nic-irq-affinity", Apply: t.applyIRQ, Verify: t.verifyIRQ},
		{Name: "nic-xps", Apply: t.applyXPS, Verify: t.verifyXPS},
		{Name: "nic-rps", Apply: t.applyRPS, Verify: t.verifyRPS},
	}
}

// SkippedSteps returns the NIC steps, all skipped with reason: used when no
// NIC was found, so the report still lists every step.
func SkippedSteps(reason string) []boot.Step {
	var out []boot.Step
	for _, s := range (&Tuner{}).Steps() {
		out = append(out, boot.Step{Name: s.Name, Apply: func(context.Context, boot.Detail) error {
			return boot.Skip("%s", reason)
		}})
	}
	return out
}

// unsupported reports whether err means the driver does not implement an
// ethtool operation or parameter (the kernel answers EOPNOTSUPP, or EINVAL
// for a parameter a driver does not take).
func unsupported(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL)
}

func (t *Tuner) wantChannels(c ethtool.Channels) (rx, tx, combined uint32) {
	n := uint32(t.Opt.Channels)
	if n == 0 {
		n = uint32(len(t.CPUs))
	}
	if c.MaxCombined > 0 {
		return c.RxCount, c.TxCount, min(n, c.MaxCombined)
	}
	return min(n, c.MaxRx), min(n, c.MaxTx), c.CombinedCount
}

func (t *Tuner) applyChannels(_ context.Context, d boot.Detail) error {
	c, err := t.Ethtool.GetChannels(t.Link.Name)
	if unsupported(err) {
		return boot.Skip("driver %s does not report channels (%v)", t.Link.Driver, err)
	}
	if err != nil {
		return fmt.Errorf("ethtool get channels %s: %w", t.Link.Name, err)
	}
	rx, tx, comb := t.wantChannels(c)
	d["max_combined"] = strconv.Itoa(int(c.MaxCombined))
	d["combined"] = strconv.Itoa(int(comb))
	if c.MaxCombined == 0 {
		d["rx"], d["tx"] = strconv.Itoa(int(rx)), strconv.Itoa(int(tx))
	}
	if c.RxCount == rx && c.TxCount == tx && c.CombinedCount == comb {
		d["changed"] = "no"
		return nil
	}
	if c.MaxCombined == 0 && c.MaxRx == 0 && c.MaxTx == 0 {
		return boot.Skip("driver %s has a fixed number of queues", t.Link.Driver)
	}
	c.RxCount, c.TxCount, c.CombinedCount = rx, tx, comb
	if _, err := t.Ethtool.SetChannels(t.Link.Name, c); err != nil {
		if unsupported(err) {
			return boot.Skip("driver %s cannot change channels (%v)", t.Link.Driver, err)
		}
		return fmt.Errorf("ethtool set channels %s combined=%d: %w", t.Link.Name, comb, err)
	}
	d["changed"] = "yes"
	return nil
}

func (t *Tuner) verifyChannels(_ context.Context, d boot.Detail) error {
	c, err := t.Ethtool.GetChannels(t.Link.Name)
	if err != nil {
		return fmt.Errorf("ethtool get channels %s: %w", t.Link.Name, err)
	}
	if strconv.Itoa(int(c.CombinedCount)) != d["combined"] {
		return fmt.Errorf("combined channels %d, want %s", c.CombinedCount, d["combined"])
	}
	return nil
}

// applyCoalesce asks for adaptive RX moderation and falls back to static
// values when the driver refuses (virtio-net without VIRTIO_NET_F_NOTF_COAL
// refuses both: skipped). Each attempt is read back.
func (t *Tuner) applyCoalesce(_ context.Context, d boot.Detail) error {
	if t.Opt.Coalesce == "off" {
		return boot.Skip("nic.coalesce=off")
	}
	cur, err := t.Ethtool.GetCoalesce(t.Link.Name)
	if unsupported(err) {
		return boot.Skip("driver %s has no interrupt moderation (%v)", t.Link.Driver, err)
	}
	if err != nil {
		return fmt.Errorf("ethtool get coalesce %s: %w", t.Link.Name, err)
	}
	var adaptiveErr error
	if t.Opt.Coalesce == "adaptive" {
		c := cur
		c.UseAdaptiveRxCoalesce = 1
		if _, err := t.Ethtool.SetCoalesce(t.Link.Name, c); err == nil {
			got, err := t.Ethtool.GetCoalesce(t.Link.Name)
			if err != nil {
				return fmt.Errorf("ethtool get coalesce %s: %w", t.Link.Name, err)
			}
			if got.UseAdaptiveRxCoalesce != 1 {
				return fmt.Errorf("adaptive-rx reads %d after setting it", got.UseAdaptiveRxCoalesce)
			}
			d["mode"] = "adaptive-rx"
			return nil
		} else if !unsupported(err) {
			return fmt.Errorf("ethtool set coalesce %s adaptive-rx: %w", t.Link.Name, err)
		} else {
			adaptiveErr = err
			d["adaptive_rx"] = "unsupported: " + err.Error()
		}
	}
	c := cur
	c.UseAdaptiveRxCoalesce = 0
	c.RxCoalesceUsecs = uint32(t.Opt.RxUsecs)
	c.TxCoalesceUsecs = uint32(t.Opt.TxUsecs)
	if _, err := t.Ethtool.SetCoalesce(t.Link.Name, c); err != nil {
		if unsupported(err) {
			if adaptiveErr != nil {
				return boot.Skip("driver %s supports neither adaptive RX nor static moderation (%v)", t.Link.Driver, err)
			}
			return boot.Skip("driver %s does not support static moderation (%v)", t.Link.Driver, err)
		}
		return fmt.Errorf("ethtool set coalesce %s rx-usecs %d tx-usecs %d: %w", t.Link.Name, t.Opt.RxUsecs, t.Opt.TxUsecs, err)
	}
	got, err := t.Ethtool.GetCoalesce(t.Link.Name)
	if err != nil {
		return fmt.Errorf("ethtool get coalesce %s: %w", t.Link.Name, err)
	}
	if got.RxCoalesceUsecs != c.RxCoalesceUsecs || got.TxCoalesceUsecs != c.TxCoalesceUsecs {
		return fmt.Errorf("coalesce reads rx-usecs %d tx-usecs %d, want %d %d",
			got.RxCoalesceUsecs, got.TxCoalesceUsecs, c.RxCoalesceUsecs, c.TxCoalesceUsecs)
	}
	d["mode"] = "static"
	d["rx_usecs"] = strconv.Itoa(t.Opt.RxUsecs)
	d["tx_usecs"] = strconv.Itoa(t.Opt.TxUsecs)
	return nil
}

// groFeature is GRO's name in the ethtool feature strings (NETIF_F_GRO).
const groFeature = "rx-gro"

func (t *Tuner) applyGRO(_ context.Context, d boot.Detail) error {
	f, err := t.Ethtool.Features(t.Link.Name)
	if err != nil {
		return fmt.Errorf("ethtool features %s: %w", t.Link.Name, err)
	}
	cur, ok := f[groFeature]
	if !ok {
		return boot.Skip("driver %s has no %s feature", t.Link.Driver, groFeature)
	}
	d["gro"] = onOff(t.Opt.GRO)
	if cur == t.Opt.GRO {
		d["changed"] = "no"
		return nil
	}
	if err := t.Ethtool.Change(t.Link.Name, map[string]bool{groFeature: t.Opt.GRO}); err != nil {
		return fmt.Errorf("ethtool set %s %s %s: %w", t.Link.Name, groFeature, onOff(t.Opt.GRO), err)
	}
	d["changed"] = "yes"
	return nil
}

func (t *Tuner) verifyGRO(context.Context, boot.Detail) error {
	f, err := t.Ethtool.Features(t.Link.Name)
	if err != nil {
		return fmt.Errorf("ethtool features %s: %w", t.Link.Name, err)
	}
	if f[groFeature] != t.Opt.GRO {
		return fmt.Errorf("%s reads %s, want %s", groFeature, onOff(f[groFeature]), onOff(t.Opt.GRO))
	}
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func (t *Tuner) applyLinkUp(context.Context, boot.Detail) error {
	if err := t.Netlink.LinkSetUp(t.Link.Name); err != nil {
		return fmt.Errorf("link set %s up: %w", t.Link.Name, err)
	}
	return nil
}

func (t *Tuner) verifyLinkUp(context.Context, boot.Detail) error {
	up, err := t.Netlink.LinkIsUp(t.Link.Name)
	if err != nil {
		return fmt.Errorf("link %s: %w", t.Link.Name, err)
	}
	if !up {
		return fmt.Errorf("link %s is not up", t.Link.Name)
	}
	return nil
}

// applyQdisc makes the root qdisc mq, whose children are created with
// net.core.default_qdisc (noqueue, set by the sysctl steps): no qdisc lock
// on transmit. A single-queue device cannot have mq; its root is the
// default qdisc itself, noqueue.
func (t *Tuner) applyQdisc(_ context.Context, d boot.Detail) error {
	if t.Opt.Qdisc == "keep" {
		return boot.Skip("nic.qdisc=keep")
	}
	txq, err := Queues(t.SysRoot, t.Link.Name, "tx")
	if err != nil {
		return err
	}
	root, children, err := t.Netlink.Qdiscs(t.Link.Name)
	if err != nil {
		return fmt.Errorf("qdisc list %s: %w", t.Link.Name, err)
	}
	want := "mq"
	if len(txq) <= 1 {
		want = "noqueue"
	}
	d["want"] = want
	if root == want && (want == "noqueue" || allNoqueue(children)) {
		d["changed"] = "no"
		return nil
	}
	if err := t.Netlink.ReplaceRoot(t.Link.Name, want); err != nil {
		return fmt.Errorf("qdisc replace %s root %s: %w", t.Link.Name, want, err)
	}
	d["changed"] = "yes"
	return nil
}

func allNoqueue(kinds []string) bool {
	for _, k := range kinds {
		if k != "noqueue" {
			return false
		}
	}
	return len(kinds) > 0
}

func (t *Tuner) verifyQdisc(_ context.Context, d boot.Detail) error {
	root, children, err := t.Netlink.Qdiscs(t.Link.Name)
	if err != nil {
		return fmt.Errorf("qdisc list %s: %w", t.Link.Name, err)
	}
	d["root"] = root
	d["children"] = strings.Join(children, ",")
	if root != d["want"] {
		return fmt.Errorf("root qdisc %s, want %s", root, d["want"])
	}
	if root == "mq" && !allNoqueue(children) {
		return fmt.Errorf("mq children %v, want noqueue (is net.core.default_qdisc noqueue?)", children)
	}
	return nil
}

func (t *Tuner) irqPlan() ([]QueueIRQ, map[int]int, error) {
	irqs, err := QueueIRQs(t.ProcRoot, t.Link)
	if err != nil {
		return nil, nil, err
	}
	cpu := map[int]int{}
	for _, q := range irqs {
		cpu[q.IRQ] = t.CPUs[q.Queue%len(t.CPUs)]
	}
	return irqs, cpu, nil
}

func (t *Tuner) applyIRQ(_ context.Context, d boot.Detail) error {
	if !t.Opt.IRQAffinity {
		return boot.Skip("nic.irq_affinity=off")
	}
	irqs, cpu, err := t.irqPlan()
	var shared *ErrSharedIRQ
	if errors.As(err, &shared) {
		return boot.Skip("%v", shared)
	}
	if err != nil {
		return err
	}
	if len(irqs) == 0 {
		return boot.Skip("no per-queue interrupts of %s (driver %s, device %s) in %s/interrupts",
			t.Link.Name, t.Link.Driver, t.Link.Device, t.ProcRoot)
	}
	var errs []error
	for _, q := range irqs {
		p := filepath.Join(t.ProcRoot, "irq", strconv.Itoa(q.IRQ), "smp_affinity_list")
		if err := writeExisting(p, strconv.Itoa(cpu[q.IRQ])); err != nil {
			errs = append(errs, fmt.Errorf("irq %d (%s) -> cpu %d: %w", q.IRQ, q.Name, cpu[q.IRQ], err))
			continue
		}
		d[q.Name] = fmt.Sprintf("irq %d -> cpu %d", q.IRQ, cpu[q.IRQ])
	}
	return errors.Join(errs...)
}

func (t *Tuner) verifyIRQ(context.Context, boot.Detail) error {
	irqs, cpu, err := t.irqPlan()
	if err != nil {
		return err
	}
	var errs []error
	for _, q := range irqs {
		got, err := os.ReadFile(filepath.Join(t.ProcRoot, "irq", strconv.Itoa(q.IRQ), "smp_affinity_list"))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if strings.TrimSpace(string(got)) != strconv.Itoa(cpu[q.IRQ]) {
			errs = append(errs, fmt.Errorf("irq %d (%s) affinity %q, want %d", q.IRQ, q.Name, strings.TrimSpace(string(got)), cpu[q.IRQ]))
		}
	}
	return errors.Join(errs...)
}

// writeExisting writes a sysfs/procfs attribute that must already exist:
// a missing file is a skip, not a file to create.
func writeExisting(p, v string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(v)
	return errors.Join(werr, f.Close())
}

func (t *Tuner) queueFile(kind string, q int, attr string) string {
	return filepath.Join(t.SysRoot, "class/net", t.Link.Name, "queues", fmt.Sprintf("%s-%d", kind, q), attr)
}

// xpsPlan maps each tx queue to the mask of CPUs that transmit on it.
func (t *Tuner) xpsPlan() (map[int][]int, error) {
	txq, err := Queues(t.SysRoot, t.Link.Name, "tx")
	if err != nil {
		return nil, err
	}
	plan := map[int][]int{}
	for _, q := range txq {
		plan[q] = QueueCPUs(q, len(txq), t.CPUs)
	}
	return plan, nil
}

func (t *Tuner) applyXPS(_ context.Context, d boot.Detail) error {
	if !t.Opt.XPS {
		return boot.Skip("nic.xps=off")
	}
	plan, err := t.xpsPlan()
	if err != nil {
		return err
	}
	if len(plan) == 0 {
		return boot.Skip("%s has no tx queues in sysfs", t.Link.Name)
	}
	if _, err := os.Stat(t.queueFile("tx", 0, "xps_cpus")); err != nil {
		return boot.Skip("no %s (kernel without CONFIG_XPS?)", t.queueFile("tx", 0, "xps_cpus"))
	}
	var errs []error
	for _, q := range sortedKeys(plan) {
		mask := cpuset.FormatMask(plan[q], t.NrCPUs)
		if err := writeExisting(t.queueFile("tx", q, "xps_cpus"), mask); err != nil {
			errs = append(errs, fmt.Errorf("xps tx-%d = %s: %w", q, mask, err))
			continue
		}
		d[fmt.Sprintf("tx-%d", q)] = mask
	}
	return errors.Join(errs...)
}

func (t *Tuner) verifyXPS(context.Context, boot.Detail) error {
	plan, err := t.xpsPlan()
	if err != nil {
		return err
	}
	var errs []error
	for _, q := range sortedKeys(plan) {
		got, err := readMask(t.queueFile("tx", q, "xps_cpus"))
		if err != nil {
			errs = append(errs, err)
		} else if !slices.Equal(got, plan[q]) {
			errs = append(errs, fmt.Errorf("xps tx-%d reads cpus %v, want %v", q, got, plan[q]))
		}
	}
	return errors.Join(errs...)
}

func (t *Tuner) applyRPS(_ context.Context, d boot.Detail) error {
	if t.Opt.RPS {
		return boot.Skip("nic.rps=on: rps_cpus left as they are")
	}
	rxq, err := Queues(t.SysRoot, t.Link.Name, "rx")
	if err != nil {
		return err
	}
	if len(rxq) == 0 {
		return boot.Skip("%s has no rx queues in sysfs", t.Link.Name)
	}
	if _, err := os.Stat(t.queueFile("rx", rxq[0], "rps_cpus")); err != nil {
		return boot.Skip("no %s (kernel without CONFIG_RPS?)", t.queueFile("rx", rxq[0], "rps_cpus"))
	}
	var errs []error
	for _, q := range rxq {
		if err := writeExisting(t.queueFile("rx", q, "rps_cpus"), "0"); err != nil {
			errs = append(errs, fmt.Errorf("rps rx-%d = 0: %w", q, err))
		}
	}
	d["rx_queues"] = strconv.Itoa(len(rxq))
	return errors.Join(errs...)
}

func (t *Tuner) verifyRPS(context.Context, boot.Detail) error {
	rxq, err := Queues(t.SysRoot, t.Link.Name, "rx")
	if err != nil {
		return err
	}
	var errs []error
	for _, q := range rxq {
		got, err := readMask(t.queueFile("rx", q, "rps_cpus"))
		if err != nil {
			errs = append(errs, err)
		} else if len(got) != 0 {
			errs = append(errs, fmt.Errorf("rps rx-%d reads cpus %v, want none", q, got))
		}
	}
	return errors.Join(errs...)
}

func readMask(p string) ([]int, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return cpuset.ParseMask(string(b))
}

func sortedKeys(m map[int][]int) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
