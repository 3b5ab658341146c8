// Package irqname tells, from an interrupt's action name in
// /proc/interrupts, which queue of a network device it serves. Every
// driver names its MSI-X vectors its own way, and not always after the
// interface: mlx5 names them after the PCI function ("mlx5_comp3@pci:
// 0000:3b:00.0"), virtio-net after the virtio device ("virtio0-input.3").
// The table below holds one scheme per driver, each citing the kernel
// code (Linux 6.12) that prints the name; the unit tests hold a sample of
// each driver's lines.
//
// The caller narrows the lines to the device's own vectors first (the
// PCI function's msi_irqs/, see package nic), so a scheme only has to
// tell queue vectors from the driver's other vectors (admin, misc,
// link-state), never one device from another.
package irqname

import (
	"regexp"
	"sort"
	"strconv"
)

// Device is what a driver's IRQ names are made of.
type Device struct {
	Driver string // basename of /sys/class/net/IF/device/driver: "igb", "mlx5_core"
	Ifname string // the interface name: "eth0"
	// Dev is the basename of /sys/class/net/IF/device: "virtio0" for
	// virtio-net, the PCI address for a PCI NIC.
	Dev string
	// PCI is the address of the PCI function behind the interface
	// ("0000:3b:00.0"): Dev for a PCI NIC, the parent of the virtio device.
	PCI string
}

// Kind says which direction a queue vector serves.
type Kind string

// The kinds of queue vectors.
const (
	TxRx Kind = "TxRx" // one vector for rx queue N and tx queue N
	Rx   Kind = "rx"
	Tx   Kind = "tx"
	// All is the one vector of a device without per-queue vectors: it
	// serves every queue (and the link), and is reported as queue 0.
	All Kind = "all"
)

// Action is one interrupt action: its IRQ number and name.
type Action struct {
	IRQ  int
	Name string
}

// Vector is a queue's interrupt.
type Vector struct {
	IRQ   int
	Name  string
	Queue int
	Kind  Kind
}

// Scheme is one driver's naming of its queue vectors.
type Scheme struct {
	Driver string
	// Source is where the kernel prints the name (Linux 6.12).
	Source string
	// queue returns the pattern of a queue vector's name: group "kind"
	// (absent: TxRx) and group "n", the number in the name; nil for a
	// driver that never has per-queue vectors.
	queue func(d Device) string
	// shared are the names of the one vector every queue shares when the
	// device has no per-queue vectors: MSI or legacy INTx (I217/I218/I219,
	// r8169, igb/igc/ixgbe without MSI-X), or too few MSI-X vectors. nil
	// is the interface name, which is what request_irq gets from nearly
	// every driver in that mode (netdev->name).
	shared func(d Device) []string
	// txAfterRx: tx vectors are numbered after the rx vectors (bnxt's
	// "eth0-tx-4" is tx ring 0 when there are four rx rings).
	txAfterRx bool
}

var q = regexp.QuoteMeta

// kinds is the direction part that Intel and Broadcom drivers print.
const kinds = `(?P<kind>TxRx|rx|tx)`

// Table is every driver whose naming is known. A driver not in it gets
// Generic.
var Table = []Scheme{
	{Driver: "virtio_net",
		Source: "drivers/net/virtio_net.c virtnet_find_vqs (\"input.%d\", \"output.%d\") and " +
			"drivers/virtio/virtio_pci_common.c vp_find_vqs_msix (\"%s-%s\", dev_name(&vdev->dev), name; \"%s-virtqueues\" when shared) " +
			"and vp_find_vqs_intx (without MSI-X: one INTx line, IRQF_SHARED, named dev_name(&vdev->dev))",
		queue:  func(d Device) string { return `^` + q(d.Dev) + `-(?P<kind>input|output)\.(?P<n>\d+)$` },
		shared: func(d Device) []string { return []string{d.Dev + "-virtqueues", d.Dev} }},
	{Driver: "ena",
		Source: "drivers/net/ethernet/amazon/ena/ena_netdev.c ena_setup_io_intr (\"%s-Tx-Rx-%d\", netdev->name); " +
			"the admin vector is ena_setup_mgmnt_intr's \"ena-mgmnt@pci:%s\"",
		queue: func(d Device) string { return `^` + q(d.Ifname) + `-Tx-Rx-(?P<n>\d+)$` }},
	{Driver: "e1000e",
		Source: "drivers/net/ethernet/intel/e1000e/netdev.c e1000_request_msix (\"%.14s-rx-0\", \"%.14s-tx-0\"; " +
			"the link vector is netdev->name; a name of 11 characters or more is used bare for all three, and then no queue is told). " +
			"MSI-X is only for the 82574 (FLAG_HAS_MSIX); I217/I218/I219 (pch_lpt and later) and the 8257x take e1000_request_irq's " +
			"single MSI (or INTx) vector, named netdev->name",
		queue: func(d Device) string { return `^` + q(d.Ifname) + `-(?P<kind>rx|tx)-(?P<n>0)$` }},
	{Driver: "igb",
		Source: "drivers/net/ethernet/intel/igb/igb_main.c igb_request_msix (\"%s-TxRx-%u\", \"%s-tx-%u\", \"%s-rx-%u\" " +
			"with the ring's queue_index; the other vector is netdev->name); without MSI-X, igb_request_irq's one MSI or INTx vector is netdev->name",
		queue: ifKindN},
	{Driver: "igc",
		Source: "drivers/net/ethernet/intel/igc/igc_main.c igc_request_msix (as igb)",
		queue:  ifKindN},
	{Driver: "ixgbe",
		Source: "drivers/net/ethernet/intel/ixgbe/ixgbe_main.c ixgbe_request_msix_irqs (\"%s-TxRx-%u\", \"%s-rx-%u\", " +
			"\"%s-tx-%u\"; the other vector is netdev->name)",
		queue: ifKindN},
	{Driver: "i40e",
		Source: "drivers/net/ethernet/intel/i40e/i40e_main.c i40e_vsi_request_irq_msix (\"%s-%s-%d\", basename, \"TxRx\") " +
			"with basename \"%s-%s\", dev_driver_string, netdev->name (i40e_vsi_open); misc is \"i40e-<pci>:misc\"",
		queue: func(d Device) string { return `^i40e-` + q(d.Ifname) + `-` + kinds + `-(?P<n>\d+)$` }},
	{Driver: "ice",
		Source: "drivers/net/ethernet/intel/ice/ice_main.c ice_vsi_req_irq_msix (\"%s-%s-%d\", basename, \"TxRx\") " +
			"with basename \"%s-%s\", dev_driver_string, netdev->name (ice_vsi_open); misc is \"ice-<pci>:misc\"",
		queue: func(d Device) string { return `^ice-` + q(d.Ifname) + `-` + kinds + `-(?P<n>\d+)$` }},
	{Driver: "mlx5_core",
		Source: "drivers/net/ethernet/mellanox/mlx5/core/pci_irq.c irq_set_name (\"mlx5_comp%d\", vecidx - MLX5_IRQ_VEC_COMP_BASE; " +
			"vector 0 is \"mlx5_async0\"; one vector for everything is \"mlx5_combined0\") and mlx5_irq_alloc " +
			"(MLX5_IRQ_NAME_FORMAT_STR \"%s@pci:%s\", pci_name): completion vector N serves channel N",
		queue:  func(d Device) string { return `^mlx5_comp(?P<n>\d+)@pci:` + q(d.PCI) + `$` },
		shared: func(d Device) []string { return []string{"mlx5_combined0@pci:" + d.PCI} }},
	{Driver: "r8169",
		Source: "drivers/net/ethernet/realtek/r8169_main.c rtl_alloc_irq (pci_alloc_irq_vectors(pdev, 1, 1, ...): one vector, " +
			"MSI-X, MSI or INTx) and rtl_open (request_irq(tp->irq, ..., dev->name)): one queue, one vector named after the interface",
	},
	{Driver: "bnxt_en",
		Source: "drivers/net/ethernet/broadcom/bnxt/bnxt.c bnxt_setup_msix (\"%s-%s-%d\", dev->name, " +
			"\"TxRx\" with shared rings, else \"rx\" for i < rx_nr_rings and \"tx\" after, i counting on)",
		queue: ifKindN, txAfterRx: true},
}

// Generic is the scheme of a driver the table does not know: the
// interface name, optionally after a driver prefix, a direction and the
// queue number, as most drivers print it.
var Generic = Scheme{Driver: "", Source: "most drivers: \"<ifname>-TxRx-<n>\" and variants",
	queue: func(d Device) string {
		return `^(?:[a-z0-9_]+-)?` + q(d.Ifname) + `-(?P<kind>TxRx|Tx-Rx|rx|tx|txrx)-(?P<n>\d+)$`
	}}

func ifKindN(d Device) string { return `^` + q(d.Ifname) + `-` + kinds + `-(?P<n>\d+)$` }

// For returns the scheme of driver, or Generic.
func For(driver string) Scheme {
	for _, s := range Table {
		if s.Driver == driver {
			return s
		}
	}
	return Generic
}

// SharedNames are the names d's all-queues vector can have under s.
func (s Scheme) SharedNames(d Device) []string {
	if s.shared != nil {
		return s.shared(d)
	}
	return []string{d.Ifname}
}

// Match finds the queue vectors of d among actions, sorted by queue then
// IRQ. When there is none, the vectors named after the driver's
// all-queues vector (SharedNames, the first that is there) are returned instead, as queue 0 of kind
// All, and shared is that name: a device with a single vector (I219's
// MSI, r8169's) still has one interrupt to place. e1000e's 82574 with a
// name of 11 characters or more prints that name for its rx, tx and link
// vectors alike: all three are then returned, all serving queue 0.
//
// A device with per-queue vectors also has a vector named after the
// interface on most drivers (igb's and e1000e's link vector): it is never
// returned then, as it serves no queue.
func (s Scheme) Match(d Device, actions []Action) (vs []Vector, shared string) {
	vs = s.queueVectors(d, actions)
	if len(vs) > 0 {
		return vs, ""
	}
	for _, name := range s.SharedNames(d) {
		for _, a := range actions {
			if name != "" && a.Name == name {
				vs = append(vs, Vector{IRQ: a.IRQ, Name: a.Name, Queue: 0, Kind: All})
			}
		}
		if len(vs) > 0 {
			sort.Slice(vs, func(i, j int) bool { return vs[i].IRQ < vs[j].IRQ })
			return vs, name
		}
	}
	return nil, ""
}

func (s Scheme) queueVectors(d Device, actions []Action) []Vector {
	if s.queue == nil {
		return nil
	}
	re := regexp.MustCompile(s.queue(d))
	var vs []Vector
	nRx := 0
	for _, a := range actions {
		m := re.FindStringSubmatch(a.Name)
		if m == nil {
			continue
		}
		v := Vector{IRQ: a.IRQ, Name: a.Name, Kind: TxRx}
		v.Queue, _ = strconv.Atoi(m[re.SubexpIndex("n")])
		if i := re.SubexpIndex("kind"); i >= 0 {
			v.Kind = kindOf(m[i])
		}
		if v.Kind == Rx {
			nRx++
		}
		vs = append(vs, v)
	}
	if s.txAfterRx && nRx > 0 {
		for i := range vs {
			if vs[i].Kind == Tx {
				vs[i].Queue -= nRx
			}
		}
	}
	sort.Slice(vs, func(i, j int) bool {
		if vs[i].Queue != vs[j].Queue {
			return vs[i].Queue < vs[j].Queue
		}
		return vs[i].IRQ < vs[j].IRQ
	})
	return vs
}

func kindOf(s string) Kind {
	switch s {
	case "rx", "input":
		return Rx
	case "tx", "output":
		return Tx
	}
	return TxRx
}
