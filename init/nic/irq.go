package nic

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hotpath-dev/hotpath/init/nic/irqname"
)

// Interrupt is one line of /proc/interrupts: its number, action names (a
// shared line has several) and counts.
type Interrupt struct {
	IRQ   int
	Names []string
	// CPUs are the CPU numbers of the count columns, from the header
	// (offline CPUs have no column); every line shares the one slice.
	CPUs   []int
	Counts []uint64 // interrupts taken on CPUs[i]
}

// ParseInterrupts reads /proc/interrupts. Only numbered lines are kept (not
// NMI, LOC, ...). The action names are what follows the per-CPU counts and
// the chip/hwirq/trigger columns; they are taken as the last
// whitespace-separated field, split on ",", which holds for every queue
// naming scheme this package matches (names without spaces). The metrics
// read the counts from here too, so that the NIC steps and the metrics
// agree on which line is which queue.
func ParseInterrupts(r io.Reader) ([]Interrupt, error) {
	var out []Interrupt
	var cpus []int
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if cpus == nil {
			// The header: "CPU0 CPU1 CPU3".
			for _, h := range f {
				n, ok := strings.CutPrefix(h, "CPU")
				cpu, err := strconv.Atoi(n)
				if !ok || err != nil {
					return nil, fmt.Errorf("/proc/interrupts header %q: not CPUn", h)
				}
				cpus = append(cpus, cpu)
			}
			continue
		}
		if len(f) < 2 {
			continue
		}
		n, ok := strings.CutSuffix(f[0], ":")
		if !ok {
			continue
		}
		irq, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		in := Interrupt{IRQ: irq, CPUs: cpus, Counts: make([]uint64, 0, len(cpus))}
		// The kernel prints a count for every CPU of the header; stop at
		// the first field that is not one all the same.
		for i := 1; i < len(f) && len(in.Counts) < len(cpus); i++ {
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				break
			}
			in.Counts = append(in.Counts, v)
		}
		// Shared actions are printed "a, b": the comma ends a field.
		for i := len(f) - 1; i > len(in.Counts); i-- {
			in.Names = append([]string{strings.TrimSuffix(f[i], ",")}, in.Names...)
			if !strings.HasSuffix(f[i-1], ",") {
				break
			}
		}
		out = append(out, in)
	}
	return out, sc.Err()
}

// QueueIRQ is one per-queue interrupt.
type QueueIRQ struct {
	IRQ   int
	Name  string
	Queue int
	// Shared marks the one vector of a device without per-queue vectors
	// (I219's MSI, r8169's, virtio's "virtqueues"): it serves every
	// queue and is given as queue 0.
	Shared bool
}

// ErrSharedLine reports that a device's only interrupt is a legacy line
// that other devices' handlers share: moving it would move theirs too.
type ErrSharedLine struct {
	IRQ     int
	Actions []string
}

func (e *ErrSharedLine) Error() string {
	return fmt.Sprintf("the device's only interrupt, irq %d, is a line shared with other handlers (%s): left where it is",
		e.IRQ, strings.Join(e.Actions, ", "))
}

// QueueIRQs finds the per-queue interrupts of l in procRoot/interrupts by
// their names alone (the driver's scheme in package irqname), sorted by
// queue then IRQ (virtio has an input and an output IRQ per queue). The
// tuning uses DeviceQueueIRQs, which first narrows the lines to the
// device's own vectors.
func QueueIRQs(procRoot string, l Link) ([]QueueIRQ, error) {
	return queueIRQs(procRoot, l, nil)
}

// DeviceQueueIRQs is QueueIRQs among the MSI vectors of l's PCI function
// only (sysRoot/class/net/IF/device, then its msi_irqs/): a name alone
// cannot tell two mlx5 ports' vectors apart once a port is renamed, nor
// a queue vector from another device's vector of the same name. A device
// without msi_irqs/ (legacy INTx, a fake tree) is matched by name alone.
func DeviceQueueIRQs(sysRoot, procRoot string, l Link) ([]QueueIRQ, error) {
	msi, err := MSIVectors(sysRoot, l.Name)
	if err != nil {
		return nil, err
	}
	return queueIRQs(procRoot, l, msi)
}

func queueIRQs(procRoot string, l Link, only map[int]bool) ([]QueueIRQ, error) {
	f, err := os.Open(filepath.Join(procRoot, "interrupts"))
	if err != nil {
		return nil, fmt.Errorf("nic: %w", err)
	}
	defer f.Close()
	ints, err := ParseInterrupts(f)
	if err != nil {
		return nil, fmt.Errorf("nic: parse interrupts: %w", err)
	}
	var actions []irqname.Action
	names := map[int][]string{}
	for _, in := range ints {
		if only != nil && !only[in.IRQ] {
			continue
		}
		names[in.IRQ] = in.Names
		for _, name := range in.Names {
			actions = append(actions, irqname.Action{IRQ: in.IRQ, Name: name})
		}
	}
	s := irqname.For(l.Driver)
	vs, shared := s.Match(irqname.Device{Driver: l.Driver, Ifname: l.Name, Dev: l.Device, PCI: l.PCI}, actions)
	out := make([]QueueIRQ, len(vs))
	for i, v := range vs {
		if shared != "" && len(names[v.IRQ]) > 1 {
			// An MSI vector is never shared (request_irq without
			// IRQF_SHARED); an INTx line may be (e1000e and r8169
			// request it IRQF_SHARED).
			return nil, &ErrSharedLine{IRQ: v.IRQ, Actions: names[v.IRQ]}
		}
		out[i] = QueueIRQ{IRQ: v.IRQ, Name: v.Name, Queue: v.Queue, Shared: shared != ""}
	}
	return out, nil
}
