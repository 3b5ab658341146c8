package e2e

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/inspector"
)

// NUMASetup is the NUMA layout a test gave QEMU, known without asking
// the guest.
type NUMASetup struct {
	Nodes   []string // each node's CPUs, "0-1", in node order (-numa node,cpus=)
	NICNode int      // the node of the pxb-pcie the NIC sits behind
	Queues  int      // virtio-net queue pairs
}

// NUMAReading is the NUMA placement as the inspector reads it in the
// guest: raw /sys and /proc files, parsed here, by code that shares
// nothing with the init (whose report says the same things of itself).
type NUMAReading struct {
	// Nodes maps each node to its CPUs (nodeN/cpulist, parsed).
	Nodes map[int][]int
	// PCI is the virtio-net function's address, NIC the netdev that hangs
	// off it, Virtio its virtio device (virtio1), NICNode its numa_node.
	PCI, NIC, Virtio string
	NICNode          int
	// IRQs are the NIC's queue interrupts (virtioN-input.q, -output.q).
	IRQs []QueueIRQ
	// XPS and RPS map each tx/rx queue to the CPUs of its mask.
	XPS, RPS map[int][]int
	// Threads maps each of the workload's threads (tid) to the CPUs it may
	// run on (Cpus_allowed_list).
	Threads map[int][]int
}

// QueueIRQ is one queue interrupt and where it is pointed: Affinity is
// smp_affinity_list (what was asked), Effective is
// effective_affinity_list (where the interrupt controller delivers it).
type QueueIRQ struct {
	IRQ       int
	Name      string
	Kind      string // "rx" (virtio input) or "tx" (output)
	Queue     int
	Affinity  []int
	Effective []int
	// Counts is the interrupt's count on each CPU (/proc/interrupts'
	// columns, CPU0 first).
	Counts []uint64
}

// virtioNet are virtio-net's PCI device ids: transitional and modern.
var virtioNet = map[string]bool{"0x1000": true, "0x1041": true}

// virtioIRQ matches a virtio device's queue interrupt in /proc/interrupts:
// "virtio1-input.0" (drivers/virtio/virtio_pci_common.c names each vector
// dev_name-vq_name; virtio_net.c names the vqs input.N and output.N).
var virtioIRQ = regexp.MustCompile(`^(virtio\d+)-(input|output)\.(\d+)$`)

// ReadNUMA parses the inspector's snapshot into a NUMAReading: the NIC is
// the virtio-net PCI function (vendor 0x1af4), the netdev the one under its
// virtio device, its interrupts those /proc/interrupts names after that
// virtio device.
func ReadNUMA(s *inspector.Snapshot) (*NUMAReading, error) {
	r := &NUMAReading{Nodes: map[int][]int{}, NICNode: -2, XPS: map[int][]int{}, RPS: map[int][]int{}, Threads: map[int][]int{}}
	for p, v := range s.Files {
		id, ok := strings.CutPrefix(p, inspector.NodeDir+"/node")
		id, ok2 := strings.CutSuffix(id, "/cpulist")
		if !ok || !ok2 {
			continue
		}
		n, err := strconv.Atoi(id)
		if err != nil {
			return nil, fmt.Errorf("%s: node %q", p, id)
		}
		cpus, err := parseCPUList(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		r.Nodes[n] = cpus
	}
	// The virtio-net function: 0000:81:00.0/virtio1/net/eth0/ifindex.
	for p := range s.Files {
		rest, ok := strings.CutPrefix(p, inspector.PCIDir+"/")
		parts := strings.Split(rest, "/")
		if !ok || len(parts) != 5 || parts[2] != "net" || parts[4] != "ifindex" || !strings.HasPrefix(parts[1], "virtio") {
			continue
		}
		dir := inspector.PCIDir + "/" + parts[0]
		if strings.TrimSpace(s.Files[dir+"/vendor"]) != "0x1af4" || !virtioNet[strings.TrimSpace(s.Files[dir+"/device"])] {
			continue
		}
		if r.NIC != "" {
			return nil, fmt.Errorf("two virtio-net NICs: %s (%s) and %s (%s)", r.PCI, r.NIC, parts[0], parts[3])
		}
		r.PCI, r.Virtio, r.NIC = parts[0], parts[1], parts[3]
		node, err := strconv.Atoi(strings.TrimSpace(s.Files[dir+"/numa_node"]))
		if err != nil {
			return nil, fmt.Errorf("%s/numa_node %q: %v", dir, s.Files[dir+"/numa_node"], s.Errors[dir+"/numa_node"])
		}
		r.NICNode = node
	}
	if r.NIC == "" {
		return nil, fmt.Errorf("no virtio-net netdev under %s/*/virtio*/net", inspector.PCIDir)
	}
	irqs, err := virtioQueueIRQs(s, r.Virtio)
	if err != nil {
		return nil, err
	}
	r.IRQs = irqs
	qdir := "/sys/class/net/" + r.NIC + "/queues/"
	for p, v := range s.Files {
		rest, ok := strings.CutPrefix(p, qdir)
		if !ok {
			continue
		}
		q, file := path.Split(rest)
		var dst map[int][]int
		var num string
		switch {
		case file == "xps_cpus" && strings.HasPrefix(q, "tx-"):
			dst, num = r.XPS, strings.TrimSuffix(strings.TrimPrefix(q, "tx-"), "/")
		case file == "rps_cpus" && strings.HasPrefix(q, "rx-"):
			dst, num = r.RPS, strings.TrimSuffix(strings.TrimPrefix(q, "rx-"), "/")
		default:
			continue
		}
		n, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("%s: queue %q", p, num)
		}
		cpus, err := maskCPUs(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		dst[n] = cpus
	}
	for p, v := range s.Files {
		tid, ok := strings.CutPrefix(p, "/proc/self/task/")
		tid, ok2 := strings.CutSuffix(tid, "/status")
		if !ok || !ok2 {
			continue
		}
		n, err := strconv.Atoi(tid)
		if err != nil {
			return nil, fmt.Errorf("%s: tid %q", p, tid)
		}
		cpus, err := statusCPUs(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		r.Threads[n] = cpus
	}
	return r, nil
}

// virtioQueueIRQs finds dev's queue interrupts in /proc/interrupts ("N:"
// first, the action name last) with both affinity files of each.
func virtioQueueIRQs(s *inspector.Snapshot, dev string) ([]QueueIRQ, error) {
	var out []QueueIRQ
	for _, l := range interruptLines(s) {
		num := l.num
		m := virtioIRQ.FindStringSubmatch(l.name())
		if m == nil || m[1] != dev {
			continue
		}
		q := QueueIRQ{IRQ: num, Name: m[0], Kind: map[string]string{"input": "rx", "output": "tx"}[m[2]]}
		q.Queue, _ = strconv.Atoi(m[3])
		for _, f := range l.fields[1:] {
			n, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				break // the chip's name: the counts are over
			}
			q.Counts = append(q.Counts, n)
		}
		for _, f := range []struct {
			file string
			dst  *[]int
		}{{"smp_affinity_list", &q.Affinity}, {"effective_affinity_list", &q.Effective}} {
			p := fmt.Sprintf("/proc/irq/%d/%s", num, f.file)
			v, ok := s.Files[p]
			if !ok {
				return nil, fmt.Errorf("%s (%s) unread: %s", p, q.Name, s.Errors[p])
			}
			cpus, err := parseCPUList(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			*f.dst = cpus
		}
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].IRQ < out[j].IRQ })
	return out, nil
}

// parseCPUList parses a kernel CPU list ("0-1,3", "" for none).
func parseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	var out []int
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		z := a
		if isRange {
			if z, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q: %w", s, err)
			}
		}
		if a < 0 || z < a {
			return nil, fmt.Errorf("cpu list %q: bad range %q", s, part)
		}
		for c := a; c <= z; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// maskCPUs lists the CPUs of a sysfs CPU bitmap ("00000005" -> 0, 2).
func maskCPUs(s string) ([]int, error) {
	m, err := parseMask(s)
	if err != nil {
		return nil, err
	}
	var out []int
	for c := 0; c < m.BitLen(); c++ {
		if m.Bit(c) == 1 {
			out = append(out, c)
		}
	}
	return out, nil
}

// statusCPUs reads Cpus_allowed_list from a /proc/PID/status.
func statusCPUs(status string) ([]int, error) {
	for _, l := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			return parseCPUList(v)
		}
	}
	return nil, fmt.Errorf("no Cpus_allowed_list")
}

// CheckNUMAPlacement compares the inspector's reading with the set-up
// alone, never with the boot report. What the init must have done
// (package numa and nic.numa_local, DESIGN.md): with fewer queues than
// CPUs, the queues take the CPUs in the order "the NIC's node's CPUs
// first, in CPU order, then the others"; queue q's interrupts (rx and
// tx) go to order[q], and queue q's XPS and RPS masks hold order[k] for
// every k with k mod queues == q; nic.spread=rps keeps every CPU for the
// workload, so each of its threads may run on every CPU.
func CheckNUMAPlacement(want NUMASetup, r *NUMAReading) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	var all []int
	for i, n := range want.Nodes {
		cpus, err := parseCPUList(n)
		if err != nil {
			return []error{fmt.Errorf("set-up: %w", err)}
		}
		all = append(all, cpus...)
		if got, ok := r.Nodes[i]; !ok || !slices.Equal(got, cpus) {
			bad("node %d has CPUs %v (%s/node%d/cpulist), QEMU was given %s", i, got, inspector.NodeDir, i, n)
		}
	}
	if len(r.Nodes) != len(want.Nodes) {
		bad("%d nodes read (%v), QEMU was given %d", len(r.Nodes), r.Nodes, len(want.Nodes))
	}
	slices.Sort(all)
	if r.NICNode != want.NICNode {
		bad("the NIC's PCI function %s (%s) is on node %d, QEMU put it behind node %d's bridge", r.PCI, r.NIC, r.NICNode, want.NICNode)
	}
	order := want.queueOrder()
	if want.Queues >= len(all) || want.Queues <= 0 {
		return append(errs, fmt.Errorf("set-up: %d queues for %d CPUs: the NUMA order only applies with fewer queues", want.Queues, len(all)))
	}
	seen := map[string]bool{}
	for _, q := range r.IRQs {
		seen[fmt.Sprintf("%s-%d", q.Kind, q.Queue)] = true
		if q.Queue >= want.Queues {
			bad("%s (IRQ %d): queue %d, QEMU gave %d", q.Name, q.IRQ, q.Queue, want.Queues)
			continue
		}
		cpu := order[q.Queue]
		if !slices.Equal(q.Affinity, []int{cpu}) {
			bad("%s (IRQ %d) smp_affinity_list %v, want CPU %d (queue %d's CPU, node %d first)", q.Name, q.IRQ, q.Affinity, cpu, q.Queue, want.NICNode)
		}
		if !slices.Equal(q.Effective, []int{cpu}) {
			bad("%s (IRQ %d) delivered to CPUs %v (effective_affinity_list), want CPU %d", q.Name, q.IRQ, q.Effective, cpu)
		}
	}
	for q := range want.Queues {
		var share []int
		for k, c := range order {
			if k%want.Queues == q {
				share = append(share, c)
			}
		}
		slices.Sort(share)
		for _, kind := range []string{"rx", "tx"} {
			if !seen[fmt.Sprintf("%s-%d", kind, q)] {
				bad("no %s interrupt of queue %d (%s) in /proc/interrupts", kind, q, r.Virtio)
			}
		}
		if got, ok := r.XPS[q]; !ok || !slices.Equal(got, share) {
			bad("xps_cpus of tx-%d: CPUs %v, want %v", q, got, share)
		}
		if got, ok := r.RPS[q]; !ok || !slices.Equal(got, share) {
			bad("rps_cpus of rx-%d: CPUs %v, want %v", q, got, share)
		}
	}
	if len(r.Threads) == 0 {
		bad("no thread of the workload read")
	}
	for _, tid := range slices.Sorted(maps.Keys(r.Threads)) {
		if got := r.Threads[tid]; !slices.Equal(got, all) {
			bad("workload thread %d may run on CPUs %v, want %v (nic.spread=rps keeps every CPU)", tid, got, all)
		}
	}
	return errs
}

// DiffNUMA names what the boot report says of the NUMA placement
// differently from the inspector's reading: the NIC's node, and the
// queue interrupts (every one the inspector finds, with its affinity).
func DiffNUMA(rep *report.Report, r *NUMAReading) []error {
	var errs []error
	if rep.NUMA == nil {
		errs = append(errs, fmt.Errorf("the boot report has no numa, the inspector reads the NIC on node %d", r.NICNode))
	} else if rep.NUMA.NICNode != r.NICNode {
		errs = append(errs, fmt.Errorf("the boot report lies: NIC node %d, the inspector reads %d", rep.NUMA.NICNode, r.NICNode))
	}
	said, read := map[string]string{}, map[string]string{}
	if rep.Facts.NIC != nil {
		for _, q := range rep.Facts.NIC.IRQs {
			said[q.Name] = q.Affinity
		}
	}
	for _, q := range r.IRQs {
		s := make([]string, len(q.Affinity))
		for i, c := range q.Affinity {
			s[i] = strconv.Itoa(c)
		}
		read[q.Name] = strings.Join(s, ",")
	}
	if a, b := sortedMap(said), sortedMap(read); a != b {
		errs = append(errs, fmt.Errorf("the boot report lies: queue interrupts %s, the inspector reads %s", a, b))
	}
	return errs
}

// Settled reports whether every queue interrupt is delivered within the
// CPUs it is pointed at. On x86 without interrupt remapping the kernel
// moves an MSI's vector only when it next fires (irq_move_irq from the
// ack); until then smp_affinity_list shows the new (pending) mask and
// effective_affinity_list the CPU still receiving it. A test that reads
// right after the init wrote the affinity waits for traffic to settle it.
func (r *NUMAReading) Settled() bool {
	for _, q := range r.IRQs {
		for _, c := range q.Effective {
			if !slices.Contains(q.Affinity, c) {
				return false
			}
		}
	}
	return true
}

// queueOrder is the order in which the queues take the CPUs, as the
// set-up implies it (CheckNUMAPlacement): the NIC's node's CPUs first,
// then the others, each in CPU order.
func (w NUMASetup) queueOrder() []int {
	var all, local []int
	for i, n := range w.Nodes {
		cpus, _ := parseCPUList(n)
		all = append(all, cpus...)
		if i == w.NICNode {
			local = cpus
		}
	}
	slices.Sort(all)
	order := slices.Clone(local)
	for _, c := range all {
		if !slices.Contains(local, c) {
			order = append(order, c)
		}
	}
	return order
}

// CheckDelivered compares two readings taken with traffic in between:
// every queue interrupt that fired in between fired on its queue's CPU
// only (the count columns of /proc/interrupts, where the interrupts were
// really taken), and at least one did.
func CheckDelivered(want NUMASetup, before, after *NUMAReading) []error {
	var errs []error
	order := want.queueOrder()
	prev := map[int]QueueIRQ{}
	for _, q := range before.IRQs {
		prev[q.IRQ] = q
	}
	fired := 0
	for _, q := range after.IRQs {
		p, ok := prev[q.IRQ]
		if !ok || q.Queue >= len(order) {
			errs = append(errs, fmt.Errorf("%s (IRQ %d) in one reading only, or queue %d beyond the CPUs", q.Name, q.IRQ, q.Queue))
			continue
		}
		for c, n := range q.Counts {
			var was uint64
			if c < len(p.Counts) {
				was = p.Counts[c]
			}
			if n <= was {
				continue
			}
			fired++
			if c != order[q.Queue] {
				errs = append(errs, fmt.Errorf("%s (IRQ %d) fired %d times on CPU %d between two readings, want CPU %d only (queue %d's)",
					q.Name, q.IRQ, n-was, c, order[q.Queue], q.Queue))
			}
		}
	}
	if fired == 0 {
		errs = append(errs, fmt.Errorf("no queue interrupt fired between the two readings: nothing to judge"))
	}
	return errs
}
