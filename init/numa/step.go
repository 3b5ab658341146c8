package numa

import (
	"context"
	"strconv"
	"strings"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/cpuset"
	"github.com/hotpath-dev/hotpath/init/report"
)

// StepName is the locality step in the boot report.
const StepName = "numa-locality"

// Locality is the numa-locality step: it reads the nodes and the NIC's
// node for the report and, when the NIC has a node and nic.numa_local is
// on, hands the NIC tuner the order in which queues take the workload's
// CPUs (package doc).
type Locality struct {
	SysRoot string // "/sys"
	Link    string // the primary NIC
	CPUs    []int  // the workload's CPUs, sorted
	Enabled bool   // nic.numa_local
	Out     *report.NUMA
	// Set receives the queue order (the NIC's node's CPUs first); it is
	// not called when the placement does not apply.
	Set func(order []int)
}

// Step returns the step.
func (l Locality) Step() boot.Step {
	return boot.Step{Name: StepName, Apply: func(_ context.Context, d boot.Detail) error {
		nodes, err := Nodes(l.SysRoot)
		if err != nil {
			return err
		}
		nicNode, err := DeviceNode(l.SysRoot, l.Link)
		if err != nil {
			return err
		}
		*l.Out = report.NUMA{NICNode: nicNode}
		for _, n := range nodes {
			l.Out.Nodes = append(l.Out.Nodes, report.NUMANode{ID: n.ID, CPUs: cpuset.FormatList(n.CPUs)})
		}
		d["nodes"], d["nic_node"] = Format(nodes), strconv.Itoa(nicNode)
		switch {
		case !l.Enabled:
			return boot.Skip("nic.numa_local=off")
		case len(nodes) < 2:
			return boot.Skip("one NUMA node")
		case nicNode < 0:
			return boot.Skip("%s has no NUMA node (no _PXM for its PCI root)", l.Link)
		}
		var local []int
		for _, c := range CPUsOf(nodes, nicNode) {
			for _, w := range l.CPUs {
				if c == w {
					local = append(local, c)
				}
			}
		}
		if len(local) == 0 {
			return boot.Skip("no workload CPU on node %d, the NIC's", nicNode)
		}
		order := LocalFirst(l.CPUs, local)
		l.Out.QueueCPUs = join(order)
		d["queue_cpus"] = l.Out.QueueCPUs
		l.Set(order)
		return nil
	}}
}

func join(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}
