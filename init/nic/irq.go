package nic

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
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
}

// naming returns the per-queue IRQ name pattern of a driver (group 1 is the
// queue number) and the name of a shared all-queues IRQ, if the driver has
// one. Drivers name their queue IRQs differently:
//   - virtio-net: "virtio0-input.0", "virtio0-output.0" (the virtio device,
//     not the interface); with too few MSI-X vectors every queue shares
//     "virtio0-virtqueues", and there is nothing per queue to bind.
//   - ENA: "eth0-Tx-Rx-0" (ena_setup_io_intr: "%s-Tx-Rx-%d" with the netdev
//     name); its admin IRQ is "ena-mgmnt@pci:0000:00:05.0" and not a queue.
//   - others (ixgbevf, ice, i40e, ...): "<ifname>-TxRx-0" and variants.
func naming(l Link) (queue *regexp.Regexp, shared string) {
	switch l.Driver {
	case "virtio_net":
		return regexp.MustCompile(`^` + regexp.QuoteMeta(l.Device) + `-(?:input|output)\.(\d+)$`),
			l.Device + "-virtqueues"
	case "ena":
		return regexp.MustCompile(`^` + regexp.QuoteMeta(l.Name) + `-Tx-Rx-(\d+)$`), ""
	default:
		return regexp.MustCompile(`^(?:[a-z0-9]+-)?` + regexp.QuoteMeta(l.Name) + `-(?:TxRx|Tx-Rx|rx|tx|txrx)-(\d+)$`), ""
	}
}

// ErrSharedIRQ reports that the device's queues share a single interrupt.
type ErrSharedIRQ struct{ Name string }

func (e *ErrSharedIRQ) Error() string {
	return fmt.Sprintf("all queues share one interrupt (%s): no per-queue MSI-X vectors", e.Name)
}

// QueueIRQs finds the per-queue interrupts of l in procRoot/interrupts,
// sorted by queue then IRQ (virtio has an input and an output IRQ per queue).
func QueueIRQs(procRoot string, l Link) ([]QueueIRQ, error) {
	f, err := os.Open(filepath.Join(procRoot, "interrupts"))
	if err != nil {
		return nil, fmt.Errorf("nic: %w", err)
	}
	defer f.Close()
	ints, err := ParseInterrupts(f)
	if err != nil {
		return nil, fmt.Errorf("nic: parse interrupts: %w", err)
	}
	re, shared := naming(l)
	var out []QueueIRQ
	sharedSeen := false
	for _, in := range ints {
		for _, name := range in.Names {
			if shared != "" && name == shared {
				sharedSeen = true
			}
			m := re.FindStringSubmatch(name)
			if m == nil {
				continue
			}
			q, _ := strconv.Atoi(m[1])
			out = append(out, QueueIRQ{IRQ: in.IRQ, Name: name, Queue: q})
		}
	}
	if len(out) == 0 && sharedSeen {
		return nil, &ErrSharedIRQ{Name: shared}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Queue != out[j].Queue {
			return out[i].Queue < out[j].Queue
		}
		return out[i].IRQ < out[j].IRQ
	})
	return out, nil
}
