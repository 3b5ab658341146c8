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
	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/cpuset"
	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// Options are the tunings to apply: the nic.* keys of the init
// configuration, whose allowed values (config.Coalesce, config.Qdisc,
// config.Spread) the parser and these steps share. See config.NIC.
type Options = config.NIC

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
	// Files reads and writes the sysfs and procfs attributes; nil is the
	// real files. Tests give a fake kernel that refuses and normalises
	// writes as the kernel does.
	Files Files
	// QueueOrder, when set, is the order in which queues take the
	// workload's CPUs when there are fewer queues than CPUs (the
	// numa-locality step: the NIC's node first); nil is CPU order.
	QueueOrder []int

	// Clock is the time nic-link-up waits for the carrier in; nil is the
	// real clock.
	Clock Clock

	// DefaultQdisc is the kind net.core.default_qdisc names (the sysctl
	// steps set it before the NIC comes up): what nic-qdisc wants under
	// mq, or as the root of a single-queue device; "" is noqueue.
	DefaultQdisc string

	// work is the workload's CPU list once nic-spread ran (CPUs before).
	work []int
}

// Steps returns the NIC steps in the order they must run: channels and
// the push buffer first (each can re-create queues and IRQs), the spread decision (it needs the queue
// count), link up, interrupt moderation after link-up (a driver may reset
// it when the device opens: ena_up() re-enables DIM since Linux 6.9), then
// the per-queue settings. The steps a device reset or a link down/up can
// undo are marked Reapply (new interrupt vectors lose their affinity, a
// driver re-enables its own moderation, queues come back with default
// XPS/RPS); channels and the spread decision are not: the workload's CPUs
// are fixed for its lifetime.
func (t *Tuner) Steps() []boot.Step {
	return []boot.Step{
		planned("nic-channels", false, t.applyChannels, t.verifyChannels),
		planned("nic-tx-push-buf", false, t.applyPushBuf, t.verifyPushBuf),
		{Name: "nic-spread", Apply: t.applySpread},
		{Name: "nic-gro", Apply: t.applyGRO, Verify: t.verifyGRO, Reapply: true},
		{Name: "nic-link-up", Apply: t.applyLinkUp, Verify: t.verifyLinkUp},
		planned("nic-coalesce", true, t.applyCoalesce, t.verifyCoalesce),
		planned("nic-qdisc", true, t.applyQdisc, t.verifyQdisc),
		{Name: "nic-irq-affinity", Apply: t.applyIRQ, Verify: t.verifyIRQ, Reapply: true},
		{Name: "nic-xps", Apply: t.applyXPS, Verify: t.verifyXPS, Reapply: true},
		{Name: "nic-rps", Apply: t.applyRPS, Verify: t.verifyRPS, Reapply: true},
	}
}

// planned makes a step whose apply settles a plan of type P (what it set,
// or found already set) that its verify then checks: apply and verify
// share a typed value, never the report's strings. Each apply starts from
// a zero plan, so that a step run again decides afresh.
func planned[P any](name string, reapply bool, apply, verify func(*P, boot.Detail) error) boot.Step {
	p := new(P)
	return boot.Step{Name: name, Reapply: reapply,
		Apply: func(_ context.Context, d boot.Detail) error {
			var zero P
			*p = zero
			return apply(p, d)
		},
		Verify: func(_ context.Context, d boot.Detail) error { return verify(p, d) }}
}

// ReapplySteps are the steps marked Reapply, in boot order: what to run
// again on a link change.
func (t *Tuner) ReapplySteps() []boot.Step {
	var out []boot.Step
	for _, s := range t.Steps() {
		if s.Reapply {
			out = append(out, s)
		}
	}
	return out
}

// WorkloadCPUs is the workload's CPU list: CPUs, or the queue-owning CPUs
// when nic-spread decided so.
func (t *Tuner) WorkloadCPUs() []int {
	if t.work != nil {
		return t.work
	}
	return t.CPUs
}

// applySpread decides how the workload's CPUs and the rx queues agree.
// With at least as many queues as CPUs, queue i's interrupt goes to CPU i
// and every worker owns a queue. With fewer queues, the workers on CPUs
// without a queue would never receive a connection: the reuseport program
// picks the socket of the CPU that processes the SYN, which is a queue's
// CPU. nic.spread=rps (default) keeps every CPU for the workload and lets
// RPS hand each queue's flows to the CPUs that share it (CPU k gets flows
// of queue k mod n): the application, which costs far more per request
// than the steering IPI, gets every CPU. nic.spread=queues gives the
// workload only the first n CPUs, no cross-CPU work at all, the others
// idle.
func (t *Tuner) applySpread(_ context.Context, d boot.Detail) error {
	rxq, err := Queues(t.SysRoot, t.Link.Name, "rx")
	if err != nil {
		return err
	}
	n := len(rxq)
	d["rx_queues"] = strconv.Itoa(n)
	d["cpus"] = strconv.Itoa(len(t.CPUs))
	if n == 0 {
		return boot.Skip("%s has no rx queues in sysfs", t.Link.Name)
	}
	if n >= len(t.CPUs) {
		d["mode"] = "queue-per-cpu"
		return nil
	}
	switch t.Opt.Spread {
	case config.SpreadQueues:
		t.work = slices.Sorted(slices.Values(t.queueOrder(n)[:n]))
		d["mode"] = string(config.SpreadQueues)
		d["workload_cpus"] = cpuset.FormatList(t.work)
	default:
		d["mode"] = string(config.SpreadRPS)
		d["workload_cpus"] = cpuset.FormatList(t.CPUs)
	}
	return nil
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

// channelsPlan is the channel count nic-channels settled on: its verify
// reads the driver's count back against it.
type channelsPlan struct {
	combined uint32
}

func (t *Tuner) applyChannels(p *channelsPlan, d boot.Detail) error {
	c, err := t.Ethtool.GetChannels(t.Link.Name)
	if unsupported(err) {
		return boot.Skip("driver %s does not report channels (%v)", t.Link.Driver, err)
	}
	if err != nil {
		return fmt.Errorf("ethtool get channels %s: %w", t.Link.Name, err)
	}
	rx, tx, comb := t.wantChannels(c)
	p.combined = comb
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

func (t *Tuner) verifyChannels(p *channelsPlan, _ boot.Detail) error {
	c, err := t.Ethtool.GetChannels(t.Link.Name)
	if err != nil {
		return fmt.Errorf("ethtool get channels %s: %w", t.Link.Name, err)
	}
	if c.CombinedCount != p.combined {
		return fmt.Errorf("combined channels %d, want %d", c.CombinedCount, p.combined)
	}
	return nil
}

// applyCoalesce sets interrupt moderation, after link-up: adaptive RX
// (nic.coalesce=adaptive, the default) where the driver has it, else
// static nic.rx_usecs/nic.tx_usecs; virtio-net without
// VIRTIO_NET_F_NOTF_COAL refuses both (skipped).
//
// Why adaptive by default, although the case study ends on static (its
// step 9, measured at saturation with 256 connections, together with GRO
// off and reno): a static value is right for one load on one device (ENA
// rounds it to its own resolution; too high adds its full delay to every
// request at low load, too low costs an interrupt per packet at high
// load), while the appliance serves whatever load comes; with busy polling
// the workers poll their queue under load, which takes most of what static
// moderation saves; and ENA re-enables adaptive moderation itself at every
// open and reset since Linux 6.9, so adaptive is the one setting that a
// device reset does not silently undo. Static stays one key away.
func (t *Tuner) applyCoalesce(p *coalescePlan, d boot.Detail) error {
	if t.Opt.Coalesce == config.CoalesceOff {
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
	if t.Opt.Coalesce == config.CoalesceAdaptive {
		c := cur
		c.UseAdaptiveRxCoalesce = 1
		kept, err := t.setAdaptive(c)
		switch {
		case err == nil && kept:
			p.adaptive = true
			d["mode"] = "adaptive-rx"
			return nil
		case err == nil:
			// Accepted and not kept: virtio_net since Linux 6.9 lists
			// adaptive RX among its supported_coalesce_params, and on a
			// device without VIRTIO_NET_F_NOTF_COAL (QEMU 7.2's)
			// virtnet_coal_params_supported accepts the request and
			// stores nothing (drivers/net/virtio_net.c). The driver does
			// not have it: try static moderation, as for EOPNOTSUPP.
			err = errors.New("accepted, reads 0 afterwards")
		case !unsupported(err):
			return fmt.Errorf("ethtool set coalesce %s adaptive-rx: %w", t.Link.Name, err)
		}
		adaptiveErr = err
		d["adaptive_rx"] = "unsupported: " + err.Error()
	}
	p.rx, p.tx = uint32(t.Opt.RxUsecs), uint32(t.Opt.TxUsecs)
	c := cur
	c.UseAdaptiveRxCoalesce = 0
	c.RxCoalesceUsecs, c.TxCoalesceUsecs = p.rx, p.tx
	_, err = t.Ethtool.SetCoalesce(t.Link.Name, c)
	if unsupported(err) && p.tx != 0 {
		// e1000e (I217/I218/I219, 82574) moderates receive only
		// (supported_coalesce_params is ETHTOOL_COALESCE_RX_USECS), and
		// the kernel refuses a request with any field the driver lacks
		// nonzero (net/ethtool/ioctl.c, ethtool_set_coalesce_supported):
		// without this, the most common NIC of rented servers kept its
		// driver's default instead of nic.rx_usecs.
		c.TxCoalesceUsecs = 0
		if _, rxErr := t.Ethtool.SetCoalesce(t.Link.Name, c); rxErr == nil {
			p.tx = 0
			d["mode"] = "static-rx"
			d["tx_usecs_refused"] = fmt.Sprintf("driver %s moderates receive only (%v)", t.Link.Driver, err)
			return nil
		}
	}
	if err != nil {
		if unsupported(err) {
			if adaptiveErr != nil {
				return boot.Skip("driver %s supports neither adaptive RX nor static moderation (%v)", t.Link.Driver, err)
			}
			return boot.Skip("driver %s does not support static moderation (%v)", t.Link.Driver, err)
		}
		return fmt.Errorf("ethtool set coalesce %s rx-usecs %d tx-usecs %d: %w", t.Link.Name, t.Opt.RxUsecs, t.Opt.TxUsecs, err)
	}
	d["mode"] = "static"
	return nil
}

// setAdaptive asks for adaptive RX and reports whether the driver kept it
// (read back at once: a driver may accept what it does not have).
func (t *Tuner) setAdaptive(c ethtool.Coalesce) (kept bool, err error) {
	if _, err := t.Ethtool.SetCoalesce(t.Link.Name, c); err != nil {
		return false, err
	}
	got, err := t.Ethtool.GetCoalesce(t.Link.Name)
	if err != nil {
		return false, fmt.Errorf("ethtool get coalesce %s after adaptive-rx: %w", t.Link.Name, err)
	}
	return got.UseAdaptiveRxCoalesce == 1, nil
}

// coalescePlan is the moderation nic-coalesce set: adaptive RX, or the
// static values.
type coalescePlan struct {
	adaptive bool
	rx, tx   uint32 // static µs, as asked (the device may round them)
}

// verifyCoalesce reads the moderation back. Static values are compared
// as the device rounds them: ENA stores usecs / intr_delay_resolution and
// reports the quotient times the resolution, so 20 µs on a device with a
// resolution of 8 reads back 16 (see RoundsTo).
func (t *Tuner) verifyCoalesce(p *coalescePlan, d boot.Detail) error {
	got, err := t.Ethtool.GetCoalesce(t.Link.Name)
	if err != nil {
		return fmt.Errorf("ethtool get coalesce %s: %w", t.Link.Name, err)
	}
	if p.adaptive {
		if got.UseAdaptiveRxCoalesce != 1 {
			return fmt.Errorf("adaptive-rx reads %d after setting it", got.UseAdaptiveRxCoalesce)
		}
		return nil
	}
	d["rx_usecs"] = strconv.Itoa(int(got.RxCoalesceUsecs))
	d["tx_usecs"] = strconv.Itoa(int(got.TxCoalesceUsecs))
	if got.UseAdaptiveRxCoalesce != 0 {
		return fmt.Errorf("adaptive-rx reads %d after static moderation was set", got.UseAdaptiveRxCoalesce)
	}
	var errs []error
	for _, v := range []struct {
		what      string
		want, got uint32
	}{{"rx-usecs", p.rx, got.RxCoalesceUsecs}, {"tx-usecs", p.tx, got.TxCoalesceUsecs}} {
		if !RoundsTo(v.want, v.got) {
			errs = append(errs, fmt.Errorf("%s reads %d, want %d (or %d rounded down to the device's resolution)", v.what, v.got, v.want, v.want))
		} else if v.got != v.want {
			d[v.what+"_rounded"] = fmt.Sprintf("%d -> %d", v.want, v.got)
		}
	}
	return errors.Join(errs...)
}

// RoundsTo reports whether a device that stores moderation in units of
// some resolution r (and reports floor(want/r)*r) can have turned want
// into got: got == want, or 0 < got < want with want-got < got (r divides
// got, so r <= got, and the remainder is below r). A value rounded to 0
// is not accepted: moderation would be off, which is not what was asked.
func RoundsTo(want, got uint32) bool {
	return got == want || got > 0 && got < want && want-got < got
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

// applyLinkUp sets the link up and waits, bounded by nic.carrier_wait,
// for its carrier (see waitCarrier).
func (t *Tuner) applyLinkUp(ctx context.Context, d boot.Detail) error {
	if err := t.Netlink.LinkSetUp(t.Link.Name); err != nil {
		return fmt.Errorf("link set %s up: %w", t.Link.Name, err)
	}
	return t.waitCarrier(ctx, d)
}

func (t *Tuner) verifyLinkUp(context.Context, boot.Detail) error {
	up, err := t.Netlink.LinkIsUp(t.Link.Name)
	if err != nil {
		return fmt.Errorf("link %s: %w", t.Link.Name, err)
	}
	if !up {
		return fmt.Errorf("link %s is not up", t.Link.Name)
	}
	if t.Opt.CarrierWait > 0 {
		c, err := t.carrier()
		if err != nil {
			return fmt.Errorf("carrier of %s: %w", t.Link.Name, err)
		}
		if !c {
			return fmt.Errorf("link %s has lost its carrier", t.Link.Name)
		}
	}
	return nil
}

// applyQdisc makes the root qdisc mq, whose children are created with
// net.core.default_qdisc (set by the sysctl steps; DefaultQdisc): one
// qdisc per tx queue, each used by one CPU (XPS), so its lock is never
// contended. A single-queue device cannot have mq; its root is the
// default qdisc itself.
func (t *Tuner) applyQdisc(p *qdiscPlan, d boot.Detail) error {
	if t.Opt.Qdisc == config.QdiscKeep {
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
	kind := t.defaultQdisc()
	want := "mq"
	if len(txq) <= 1 {
		want = kind
	}
	p.root, p.child = want, kind
	d["want"] = want
	if root == want && (want == kind || allKind(children, kind)) {
		d["changed"] = "no"
		return nil
	}
	if err := t.Netlink.ReplaceRoot(t.Link.Name, want); err != nil {
		return fmt.Errorf("qdisc replace %s root %s: %w", t.Link.Name, want, err)
	}
	d["changed"] = "yes"
	return nil
}

// defaultQdisc is DefaultQdisc, noqueue when unset.
func (t *Tuner) defaultQdisc() string {
	if t.DefaultQdisc == "" {
		return "noqueue"
	}
	return t.DefaultQdisc
}

func allKind(kinds []string, kind string) bool {
	for _, k := range kinds {
		if k != kind {
			return false
		}
	}
	return len(kinds) > 0
}

// qdiscPlan is the root qdisc nic-qdisc settled on and the kind of mq's
// children.
type qdiscPlan struct {
	root  string // mq, or the default qdisc on a single-queue device
	child string // net.core.default_qdisc
}

func (t *Tuner) verifyQdisc(p *qdiscPlan, d boot.Detail) error {
	root, children, err := t.Netlink.Qdiscs(t.Link.Name)
	if err != nil {
		return fmt.Errorf("qdisc list %s: %w", t.Link.Name, err)
	}
	d["root"] = root
	d["children"] = strings.Join(children, ",")
	if root != p.root {
		return fmt.Errorf("root qdisc %s, want %s", root, p.root)
	}
	if root == "mq" && !allKind(children, p.child) {
		return fmt.Errorf("mq children %v, want %s (is net.core.default_qdisc %s?)", children, p.child, p.child)
	}
	return nil
}

func (t *Tuner) irqPlan() ([]QueueIRQ, map[int]int, error) {
	irqs, err := DeviceQueueIRQs(t.SysRoot, t.ProcRoot, t.Link)
	if err != nil {
		return nil, nil, err
	}
	cpu := map[int]int{}
	cpus := t.queueOrder(queueCount(irqs))
	for _, q := range irqs {
		cpu[q.IRQ] = cpus[q.Queue%len(cpus)]
	}
	return irqs, cpu, nil
}

func (t *Tuner) applyIRQ(_ context.Context, d boot.Detail) error {
	if !t.Opt.IRQAffinity {
		return boot.Skip("nic.irq_affinity=off")
	}
	irqs, cpu, err := t.irqPlan()
	var shared *ErrSharedLine
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
	if irqs[0].Shared {
		// One vector for every queue (I219, r8169, a device short of
		// MSI-X vectors): it goes to queue 0's CPU, the one nic-spread
		// and nic-rps plan the single rx queue's softirq on.
		d["mode"] = "single-vector"
	}
	var errs []error
	for _, q := range irqs {
		p := filepath.Join(t.ProcRoot, "irq", strconv.Itoa(q.IRQ), "smp_affinity_list")
		if err := t.writeAttr(p, strconv.Itoa(cpu[q.IRQ])); err != nil {
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
		got, err := t.files().ReadFile(filepath.Join(t.ProcRoot, "irq", strconv.Itoa(q.IRQ), "smp_affinity_list"))
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

// Files is the sysfs and procfs attribute access of the steps.
type Files interface {
	ReadFile(name string) ([]byte, error)
	// WriteFile writes an attribute that must already exist: a missing
	// file is an error, never a file to create.
	WriteFile(name string, data []byte) error
}

// OSFiles are the real attributes.
type OSFiles struct{}

// ReadFile is os.ReadFile.
func (OSFiles) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }

// WriteFile writes data to the existing file name in one write, as the
// kernel's attribute store functions expect.
func (OSFiles) WriteFile(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	return errors.Join(werr, f.Close())
}

func (t *Tuner) files() Files {
	if t.Files == nil {
		return OSFiles{}
	}
	return t.Files
}

func (t *Tuner) writeAttr(p, v string) error { return t.files().WriteFile(p, []byte(v)) }

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
		plan[q] = t.queueCPUSet(q, len(txq))
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
	if len(plan) == 1 {
		// The kernel has no xps_cpus on a single-queue device: every CPU
		// transmits on tx-0, there is nothing to choose.
		return boot.Skip("%s has a single tx queue: every CPU transmits on tx-0", t.Link.Name)
	}
	if _, err := os.Stat(t.queueFile("tx", 0, "xps_cpus")); err != nil {
		return boot.Skip("no %s (kernel without CONFIG_XPS?)", t.queueFile("tx", 0, "xps_cpus"))
	}
	var errs []error
	for _, q := range sortedKeys(plan) {
		mask := cpuset.FormatMask(plan[q], t.NrCPUs)
		if err := t.writeAttr(t.queueFile("tx", q, "xps_cpus"), mask); err != nil {
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
		got, err := t.readMask(t.queueFile("tx", q, "xps_cpus"))
		if err != nil {
			errs = append(errs, err)
		} else if !slices.Equal(got, plan[q]) {
			errs = append(errs, fmt.Errorf("xps tx-%d reads cpus %v, want %v", q, got, plan[q]))
		}
	}
	return errors.Join(errs...)
}

// rpsPlan maps each rx queue to the CPUs RPS steers its flows to: none
// when every workload CPU owns a queue, else (nic.spread=rps) the
// workload CPUs that share the queue, CPU k with queue k mod n.
func (t *Tuner) rpsPlan() (map[int][]int, error) {
	rxq, err := Queues(t.SysRoot, t.Link.Name, "rx")
	if err != nil {
		return nil, err
	}
	cpus := t.WorkloadCPUs()
	plan := map[int][]int{}
	for _, q := range rxq {
		plan[q] = nil
		if len(rxq) < len(cpus) {
			plan[q] = t.queueCPUSet(q, len(rxq))
		}
	}
	return plan, nil
}

func (t *Tuner) applyRPS(_ context.Context, d boot.Detail) error {
	if t.Opt.RPS {
		return boot.Skip("nic.rps=on: rps_cpus left as they are")
	}
	plan, err := t.rpsPlan()
	if err != nil {
		return err
	}
	if len(plan) == 0 {
		return boot.Skip("%s has no rx queues in sysfs", t.Link.Name)
	}
	rxq := sortedKeys(plan)
	if _, err := os.Stat(t.queueFile("rx", rxq[0], "rps_cpus")); err != nil {
		return boot.Skip("no %s (kernel without CONFIG_RPS?)", t.queueFile("rx", rxq[0], "rps_cpus"))
	}
	var errs []error
	for _, q := range rxq {
		mask := "0"
		if len(plan[q]) > 0 {
			mask = cpuset.FormatMask(plan[q], t.NrCPUs)
			d[fmt.Sprintf("rx-%d", q)] = mask
		}
		if err := t.writeAttr(t.queueFile("rx", q, "rps_cpus"), mask); err != nil {
			errs = append(errs, fmt.Errorf("rps rx-%d = %s: %w", q, mask, err))
		}
	}
	d["rx_queues"] = strconv.Itoa(len(rxq))
	return errors.Join(errs...)
}

func (t *Tuner) verifyRPS(context.Context, boot.Detail) error {
	plan, err := t.rpsPlan()
	if err != nil {
		return err
	}
	var errs []error
	for _, q := range sortedKeys(plan) {
		got, err := t.readMask(t.queueFile("rx", q, "rps_cpus"))
		if err != nil {
			errs = append(errs, err)
		} else if !slices.Equal(got, plan[q]) {
			errs = append(errs, fmt.Errorf("rps rx-%d reads cpus %v, want %v", q, got, plan[q]))
		}
	}
	return errors.Join(errs...)
}

func (t *Tuner) readMask(p string) ([]int, error) {
	b, err := t.files().ReadFile(p)
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
