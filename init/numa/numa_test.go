package numa

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/report"
)

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sys is a /sys with nodes (cpulist per node, "" for a memory-only node)
// and eth0's device on nicNode ("" for no numa_node file).
func sys(t *testing.T, nodes []string, nicNode string) string {
	root := t.TempDir()
	for i, cpus := range nodes {
		write(t, filepath.Join(root, "devices/system/node", "node"+string(rune('0'+i)), "cpulist"), cpus+"\n")
	}
	if len(nodes) > 0 {
		write(t, filepath.Join(root, "devices/system/node/possible"), "0-1\n")
	}
	// eth0 -> virtio0 (no numa_node) -> its PCI device (numa_node), as
	// virtio-net is in sysfs.
	pci := filepath.Join(root, "devices/pci0000:80/0000:80:00.0/0000:81:00.0")
	if err := os.MkdirAll(filepath.Join(pci, "virtio0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if nicNode != "" {
		write(t, filepath.Join(pci, "numa_node"), nicNode+"\n")
	}
	os.MkdirAll(filepath.Join(root, "class/net/eth0"), 0o755)
	if err := os.Symlink(filepath.Join(pci, "virtio0"), filepath.Join(root, "class/net/eth0/device")); err != nil {
		t.Fatal(err)
	}
	return root
}

// DeviceNode reads the NIC's own device first (ENA: the PCI device).
func TestDeviceNodeENA(t *testing.T) {
	root := t.TempDir()
	pci := filepath.Join(root, "devices/pci0000:00/0000:00:05.0")
	write(t, filepath.Join(pci, "numa_node"), "1\n")
	os.MkdirAll(filepath.Join(root, "class/net/eth0"), 0o755)
	if err := os.Symlink(pci, filepath.Join(root, "class/net/eth0/device")); err != nil {
		t.Fatal(err)
	}
	if n, err := DeviceNode(root, "eth0"); n != 1 || err != nil {
		t.Errorf("DeviceNode = %d, %v; want 1", n, err)
	}
	if n, err := DeviceNode(root, "eth9"); n != -1 || err != nil {
		t.Errorf("no such NIC: %d, %v; want -1", n, err)
	}
}

func TestLocalFirst(t *testing.T) {
	for _, c := range []struct {
		cpus, local, want []int
	}{
		{[]int{0, 1, 2, 3}, []int{2, 3}, []int{2, 3, 0, 1}},
		{[]int{0, 1, 2, 3, 4, 5}, []int{1, 3, 5}, []int{1, 3, 5, 0, 2, 4}},
		{[]int{0, 1}, nil, []int{0, 1}},
		{[]int{0, 1}, []int{0, 1, 7}, []int{0, 1}},
	} {
		if got := LocalFirst(c.cpus, c.local); !slices.Equal(got, c.want) {
			t.Errorf("LocalFirst(%v, %v) = %v, want %v", c.cpus, c.local, got, c.want)
		}
	}
}

// The step reports the nodes and the NIC's node, and hands the tuner an
// order only when there are two nodes, the NIC has one, a workload CPU
// is on it, and nic.numa_local is on.
func TestLocalityStep(t *testing.T) {
	for _, c := range []struct {
		name      string
		nodes     []string
		nicNode   string
		cpus      []int
		off       bool
		status    report.Status
		reason    string
		order     []int
		nodesText string
		wantNode  int
	}{
		{"nic on node 1", []string{"0-1", "2-3"}, "1", []int{0, 1, 2, 3}, false, report.Applied, "", []int{2, 3, 0, 1}, "0:0-1 1:2-3", 1},
		{"off", []string{"0-1", "2-3"}, "1", []int{0, 1, 2, 3}, true, report.Skipped, "nic.numa_local=off", nil, "0:0-1 1:2-3", 1},
		{"one node", []string{"0-3"}, "0", []int{0, 1, 2, 3}, false, report.Skipped, "one NUMA node", nil, "0:0-3", 0},
		{"no numa kernel", nil, "", []int{0, 1}, false, report.Skipped, "one NUMA node", nil, "", -1},
		{"no _PXM", []string{"0-1", "2-3"}, "-1", []int{0, 1, 2, 3}, false, report.Skipped, "no NUMA node", nil, "0:0-1 1:2-3", -1},
		{"memory-only node", []string{"0-3", ""}, "1", []int{0, 1, 2, 3}, false, report.Skipped, "one NUMA node", nil, "0:0-3", 1},
		{"workload elsewhere", []string{"0-1", "2-3"}, "1", []int{0, 1}, false, report.Skipped, "no workload CPU on node 1", nil, "0:0-1 1:2-3", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out report.NUMA
			var got []int
			l := Locality{SysRoot: sys(t, c.nodes, c.nicNode), Link: "eth0", CPUs: c.cpus, Enabled: !c.off, Out: &out,
				Set: func(o []int) { got = o }}
			r := boot.RunOne(context.Background(), l.Step())
			if r.Status != c.status || !strings.Contains(r.Reason, c.reason) {
				t.Errorf("step %s (%s%s), want %s %q", r.Status, r.Reason, r.Error, c.status, c.reason)
			}
			if !slices.Equal(got, c.order) {
				t.Errorf("order %v, want %v", got, c.order)
			}
			if r.Detail["nodes"] != c.nodesText || out.NICNode != c.wantNode {
				t.Errorf("detail %v, report %+v", r.Detail, out)
			}
			if c.order != nil && (len(out.Nodes) != 2 || out.Nodes[1].CPUs != "2-3" || out.QueueCPUs != "2,3,0,1") {
				t.Errorf("report %+v", out)
			}
		})
	}
}
