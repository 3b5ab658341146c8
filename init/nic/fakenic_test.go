package nic

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/cpuset"
	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// fakeENA is an ENA NIC as the kernel and the driver show it, stricter
// than fakeEthtool over the plain files of fakeTree: a channel change
// re-creates queues and interrupt vectors, attribute writes are parsed,
// refused and normalised as the kernel's store functions do, and reads
// print the kernel's state, not the bytes last written. It is the Ethtool
// and the Files of a Tuner.
type fakeENA struct {
	t      *testing.T
	ft     *fakeTree
	link   Link
	online []int // cpu_online_mask
	nrCPUs int   // nr_cpu_ids

	ch             ethtool.Channels
	co             ethtool.Coalesce
	getCoalesceErr error           // what GetCoalesce answers, if not nil
	features       map[string]bool // active features
	fixed          map[string]bool // features not in hw_features
	managedQueues  map[int]bool    // queues whose vector has kernel-managed affinity

	// The LLQ push buffer (ethtool netlink rings), as ena_get_ringparam
	// and ena_set_ringparam show it: llq is ENA_ADMIN_PLACEMENT_POLICY_DEV
	// (off: host placement, no push buffer offered, the zero fake);
	// largeLLQ is a device that offers large LLQ headers (Nitro v4+);
	// pushLen is tx_max_header_size.
	llq, largeLLQ bool
	pushLen       uint32

	nextIRQ int
	irqs    []int // the Linux IRQ of queue i's vector
	resets  int   // channel or push buffer changes, each a device reset
}

// ENA's LLQ header sizes (drivers/net/ethernet/amazon/ena/ena_eth_com.h,
// 6.12): the LLQ entry less the 32-byte descriptor.
const (
	enaLLQHeader      = 128 - 32 // ENA_LLQ_HEADER
	enaLLQLargeHeader = 256 - 32 // ENA_LLQ_LARGE_HEADER
)

// enaNetlink is the fake ENA's Netlink: the qdisc and link fake, with the
// ethtool netlink rings of the device.
type enaNetlink struct {
	*fakeNetlink
	f *fakeENA
}

// TxPushBuf is ena_get_ringparam: in LLQ mode the current header size
// and the largest the device offers; outside it no push buffer (the
// kernel then leaves both attributes out of the reply).
func (n enaNetlink) TxPushBuf(string) (uint32, uint32, error) {
	f := n.f
	switch {
	case !f.llq:
		return 0, 0, nil
	case f.largeLLQ:
		return f.pushLen, enaLLQLargeHeader, nil
	}
	return f.pushLen, enaLLQHeader, nil
}

// SetTxPushBufLen is ethnl_set_rings then ena_set_ringparam: EINVAL above
// the maximum (net/ethtool/rings.c), nothing done for the current value
// (no attribute changed: the driver is not called), EOPNOTSUPP in host
// placement, EINVAL for a size other than the two LLQ header sizes, and
// a change resets the device (ena_update_queue_params:
// ena_destroy_device, ena_restore_device): new vectors.
func (n enaNetlink) SetTxPushBufLen(_ string, v uint32) error {
	f := n.f
	_, max, _ := n.TxPushBuf("")
	switch {
	case v > max:
		return unix.EINVAL
	case v == f.pushLen:
		return nil
	case !f.llq:
		return unix.EOPNOTSUPP
	case v != enaLLQHeader && v != enaLLQLargeHeader:
		return unix.EINVAL
	}
	f.pushLen = v
	f.resets++
	f.setQueues(int(f.ch.CombinedCount))
	return nil
}

const enaMgmtIRQ = 20

func newFakeENA(t *testing.T, combined, max uint32, online []int, nrCPUs int) *fakeENA {
	t.Helper()
	f := &fakeENA{t: t, ft: newTree(t), online: online, nrCPUs: nrCPUs, nextIRQ: 24,
		ch:       ethtool.Channels{MaxCombined: max, CombinedCount: combined},
		features: map[string]bool{groFeature: true}, fixed: map[string]bool{}, managedQueues: map[int]bool{}}
	f.ft.addNIC(t, "eth0", 2, "0000:00:05.0", "ena", 0, false)
	f.link = Link{Name: "eth0", Driver: "ena", Device: "0000:00:05.0"}
	f.ft.write(t, filepath.Join(f.ft.proc, "irq", strconv.Itoa(enaMgmtIRQ), "smp_affinity_list"), cpuset.FormatList(online)+"\n")
	f.setQueues(int(combined))
	return f
}

func (f *fakeENA) tuner(opt Options, cpus []int) *Tuner {
	return &Tuner{SysRoot: f.ft.sys, ProcRoot: f.ft.proc, Link: f.link, CPUs: cpus, NrCPUs: f.nrCPUs,
		Ethtool: f, Netlink: enaNetlink{&fakeNetlink{root: "mq", defQdisc: "noqueue", ntx: int(f.ch.CombinedCount)}, f}, Files: f, Opt: opt}
}

// setQueues brings the device to n queues the way a channel change does
// on ENA: ena_set_channels -> ena_update_queue_count closes the device
// (ena_down: ena_free_io_irq) and opens it again (ena_up:
// ena_request_io_irq), drivers/net/ethernet/amazon/ena/ena_netdev.c. The
// fake takes the strict case of a device reset (ena_destroy_device /
// ena_restore_device: MSI-X disabled and enabled again): every queue
// vector is allocated anew, under a new Linux IRQ number, with
// irq_default_affinity (kernel/irq/irqdesc.c desc_smp_init), so nothing
// written for the old vectors survives. The queue directories follow
// netif_set_real_num_{rx,tx}_queues: queues beyond n go
// (net/core/net-sysfs.c netdev_queue_update_kobjects,
// net_rx_queue_update_kobjects; XPS maps past n are reset by
// netif_reset_xps_queues_gt), new ones come with no RPS or XPS map.
func (f *fakeENA) setQueues(n int) {
	t := f.t
	for _, irq := range f.irqs {
		os.RemoveAll(filepath.Join(f.ft.proc, "irq", strconv.Itoa(irq)))
	}
	f.irqs = nil
	names := []string{fmt.Sprintf("ena-mgmnt@pci:%s", f.link.Device)}
	nums := []int{enaMgmtIRQ}
	for q := 0; q < n; q++ {
		irq := f.nextIRQ
		f.nextIRQ++
		f.irqs = append(f.irqs, irq)
		names, nums = append(names, fmt.Sprintf("%s-Tx-Rx-%d", f.link.Name, q)), append(nums, irq)
		f.ft.write(t, filepath.Join(f.ft.proc, "irq", strconv.Itoa(irq), "smp_affinity_list"), cpuset.FormatList(f.online)+"\n")
	}
	f.writeInterrupts(names, nums)
	qdir := filepath.Join(f.ft.sys, "class/net", f.link.Name, "queues")
	for _, kind := range []string{"rx", "tx"} {
		have, _ := Queues(f.ft.sys, f.link.Name, kind)
		for _, q := range have {
			if q >= n {
				os.RemoveAll(filepath.Join(qdir, fmt.Sprintf("%s-%d", kind, q)))
			}
		}
		for q := len(have); q < n; q++ {
			attr := map[string]string{"rx": "rps_cpus", "tx": "xps_cpus"}[kind]
			f.ft.write(t, filepath.Join(qdir, fmt.Sprintf("%s-%d", kind, q), attr), cpuset.FormatMask(nil, f.nrCPUs)+"\n")
		}
	}
}

// writeInterrupts renders /proc/interrupts: a header of the online CPUs
// (kernel/irq/proc.c show_interrupts prints online CPUs only), then one
// line per vector.
func (f *fakeENA) writeInterrupts(names []string, irqs []int) {
	var b strings.Builder
	for _, c := range f.online {
		fmt.Fprintf(&b, "  CPU%d", c)
	}
	b.WriteString("\n")
	for i, n := range names {
		fmt.Fprintf(&b, "%3d:", irqs[i])
		for range f.online {
			b.WriteString(" 0")
		}
		fmt.Fprintf(&b, "  PCI-MSIX-0000:00:05.0 %d-edge  %s\n", i, n)
	}
	f.ft.write(f.t, filepath.Join(f.ft.proc, "interrupts"), b.String())
}

// queueIRQs are the current queue vectors, queue i first.
func (f *fakeENA) queueIRQs() []int { return slices.Clone(f.irqs) }

func (f *fakeENA) GetChannels(string) (ethtool.Channels, error) { return f.ch, nil }

// SetChannels refuses counts above the maximum as ethnl_set_channels
// does (net/ethtool/channels.c: "requested channel count exceeds
// maximum", EINVAL) and zero combined channels (ena_set_channels), and
// re-creates the queues on a change.
func (f *fakeENA) SetChannels(_ string, c ethtool.Channels) (ethtool.Channels, error) {
	if c.CombinedCount > f.ch.MaxCombined || c.CombinedCount == 0 || c.RxCount != 0 || c.TxCount != 0 {
		return c, unix.EINVAL
	}
	if c.CombinedCount != f.ch.CombinedCount {
		f.ch.CombinedCount = c.CombinedCount
		f.resets++
		f.setQueues(int(c.CombinedCount))
	}
	return f.ch, nil
}

func (f *fakeENA) GetCoalesce(string) (ethtool.Coalesce, error) {
	if f.getCoalesceErr != nil {
		return ethtool.Coalesce{}, f.getCoalesceErr
	}
	return f.co, nil
}

func (f *fakeENA) SetCoalesce(_ string, c ethtool.Coalesce) (ethtool.Coalesce, error) {
	f.co = c
	return c, nil
}

func (f *fakeENA) Features(string) (map[string]bool, error) { return maps.Clone(f.features), nil }

// Change leaves a fixed feature as it is and still succeeds: the kernel
// drops the bits outside hw_features from the request and answers
// ETHTOOL_F_UNSUPPORTED, a positive value, not an error
// (net/ethtool/ioctl.c ethtool_set_features), and safchain/ethtool's
// Change returns only the ioctl's error.
func (f *fakeENA) Change(_ string, c map[string]bool) error {
	for k, v := range c {
		if _, ok := f.features[k]; !ok {
			return fmt.Errorf("unsupported feature %q", k)
		}
		if !f.fixed[k] {
			f.features[k] = v
		}
	}
	return nil
}

func (f *fakeENA) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }

// WriteFile is the kernel's attribute store: the file must exist (kernfs
// creates nothing on write), the value is parsed and checked as the
// store function does, and what is kept is the kernel's rendering of its
// new state, which the next read prints.
func (f *fakeENA) WriteFile(name string, data []byte) error {
	if _, err := os.Stat(name); err != nil {
		return err
	}
	var (
		out string
		err error
	)
	switch filepath.Base(name) {
	case "smp_affinity_list":
		out, err = f.storeIRQAffinity(name, string(data))
	case "xps_cpus", "rps_cpus":
		out, err = f.storeQueueMask(string(data))
	default:
		return fmt.Errorf("fake kernel: no store function for %s", name)
	}
	if err != nil {
		return &fs.PathError{Op: "write", Path: name, Err: err}
	}
	return os.WriteFile(name, []byte(out+"\n"), 0o644)
}

// storeIRQAffinity follows kernel/irq/proc.c write_irq_affinity: EIO when
// user space may not set the affinity (irq_can_set_affinity_usr is false
// for a managed interrupt, kernel/irq/manage.c), the list parsed by
// cpumask_parselist_user (EINVAL for a malformed list, ERANGE for a CPU
// at or past nr_cpu_ids: lib/bitmap.c bitmap_parselist), and EINVAL when
// the mask holds no online CPU. The mask is kept as given and printed as
// a list (show_irq_affinity, "%*pbl").
func (f *fakeENA) storeIRQAffinity(name, v string) (string, error) {
	irq, _ := strconv.Atoi(filepath.Base(filepath.Dir(name)))
	if q := slices.Index(f.irqs, irq); q >= 0 && f.managedQueues[q] {
		return "", unix.EIO
	}
	cpus, err := cpuset.ParseList(strings.TrimSpace(v))
	if err != nil {
		return "", unix.EINVAL
	}
	if len(cpus) > 0 && cpus[len(cpus)-1] >= f.nrCPUs {
		return "", unix.ERANGE
	}
	if !slices.ContainsFunc(cpus, func(c int) bool { return slices.Contains(f.online, c) }) {
		return "", unix.EINVAL
	}
	return cpuset.FormatList(cpus), nil
}

// storeQueueMask follows net/core/net-sysfs.c xps_cpus_store and
// store_rps_map: a hex mask parsed by bitmap_parse over nr_cpu_ids bits
// (EINVAL when malformed, EOVERFLOW past nr_cpu_ids), of which only the
// online CPUs enter the map (net/core/dev.c __netif_set_xps_queue walks
// mask & cpu_online_mask; store_rps_map keeps for_each_cpu_and(mask,
// cpu_online_mask)); the read prints the CPUs in the map, "%*pb" wide.
func (f *fakeENA) storeQueueMask(v string) (string, error) {
	cpus, err := cpuset.ParseMask(strings.TrimSpace(v))
	if err != nil {
		return "", unix.EINVAL
	}
	if len(cpus) > 0 && cpus[len(cpus)-1] >= f.nrCPUs {
		return "", unix.EOVERFLOW
	}
	var kept []int
	for _, c := range cpus {
		if slices.Contains(f.online, c) {
			kept = append(kept, c)
		}
	}
	return cpuset.FormatMask(kept, f.nrCPUs), nil
}
