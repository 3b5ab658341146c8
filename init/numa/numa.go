// Package numa reads the machine's NUMA topology and the node a network
// device hangs off, and orders CPUs so that a NIC's queue interrupts go to
// the CPUs of its own node first.
//
// # The decision
//
// The two-socket EC2 sizes (c5n.18xlarge, c6in.32xlarge, c7i.48xlarge)
// have two nodes, and their ENA device sits behind one socket's PCIe root.
// Its descriptor rings, the packet buffers the driver allocates (on the
// device's node: dev_to_node) and the MSI-X writes all live there, so a
// queue interrupt served on the other socket pays a cross-socket round
// trip for every packet it touches, and the worker that then reads the
// request does too.
//
// With a queue per workload CPU every CPU serves one queue whatever its
// node, and the init keeps queue i -> CPU i. With fewer queues than CPUs
// (ENA gives 32 queues on a 192-vCPU c7i.48xlarge; nic.channels can ask for
// fewer) the init chooses which CPUs own a queue: the NIC's node's CPUs
// first, in CPU order, then the others. The CPUs without a queue still
// serve connections (nic.spread=rps steers flows to them) or stay idle
// (nic.spread=queues); either way the interrupt work stays on the NIC's
// node. nic.numa_local=off restores plain CPU order. Memory placement is
// the kernel's (first touch by the pinned worker); nothing here migrates
// pages.
package numa

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hotpath-dev/hotpath/init/cpuset"
)

// Node is one NUMA node and its CPUs.
type Node struct {
	ID   int
	CPUs []int
}

// Nodes reads the nodes that have CPUs from
// /sys/devices/system/node/nodeN/cpulist, in node order. A kernel without
// CONFIG_NUMA has no such directory: one node, all CPUs, reported as nil.
func Nodes(sysRoot string) ([]Node, error) {
	dir := filepath.Join(sysRoot, "devices/system/node")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Node
	for _, e := range ents {
		id, ok := strings.CutPrefix(e.Name(), "node")
		n, err := strconv.Atoi(id)
		if !ok || err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "cpulist"))
		if err != nil {
			return nil, err
		}
		cpus, err := cpuset.ParseList(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("%s/cpulist: %w", e.Name(), err)
		}
		if len(cpus) > 0 {
			out = append(out, Node{ID: n, CPUs: cpus})
		}
	}
	slices.SortFunc(out, func(a, b Node) int { return a.ID - b.ID })
	return out, nil
}

// DeviceNode is the NUMA node of a network interface's device: -1 when
// the firmware gives it none (no ACPI _PXM on its root bridge) or the
// kernel has no NUMA. ENA's netdev hangs off its PCI device, whose
// numa_node it reads; virtio-net's hangs off a virtio device (virtio0),
// which has no numa_node of its own but inherits its PCI parent's, so
// the parents are tried in turn.
func DeviceNode(sysRoot, ifname string) (int, error) {
	dev, err := filepath.EvalSymlinks(filepath.Join(sysRoot, "class/net", ifname, "device"))
	if errors.Is(err, os.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return -1, err
	}
	root, err := filepath.EvalSymlinks(sysRoot)
	if err != nil {
		return -1, err
	}
	top := filepath.Join(root, "devices")
	for p := dev; strings.HasPrefix(p, top+"/"); p = filepath.Dir(p) {
		b, err := os.ReadFile(filepath.Join(p, "numa_node"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return -1, err
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return -1, fmt.Errorf("%s numa_node: %w", ifname, err)
		}
		return n, nil
	}
	return -1, nil
}

// CPUsOf returns the CPUs of node id, nil if there is no such node.
func CPUsOf(nodes []Node, id int) []int {
	for _, n := range nodes {
		if n.ID == id {
			return n.CPUs
		}
	}
	return nil
}

// LocalFirst orders cpus with those in local first, each group in the
// order of cpus. It returns a new slice.
func LocalFirst(cpus, local []int) []int {
	out := make([]int, 0, len(cpus))
	for _, c := range cpus {
		if slices.Contains(local, c) {
			out = append(out, c)
		}
	}
	for _, c := range cpus {
		if !slices.Contains(local, c) {
			out = append(out, c)
		}
	}
	return out
}

// Format is the nodes as the report and the step detail give them:
// "0:0-1 1:2-3".
func Format(nodes []Node) string {
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = strconv.Itoa(n.ID) + ":" + cpuset.FormatList(n.CPUs)
	}
	return strings.Join(parts, " ")
}
