package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/inspector"
)

var numaRig = NUMASetup{Nodes: []string{"0-1", "2-3"}, NICNode: 1, Queues: 2}

const nicPCI = inspector.PCIDir + "/0000:81:00.0"

// numaSnapshot is what the inspector reads in TestNitroNVMeNUMA's guest
// when the init placed everything right: queue 0 on CPU 2, queue 1 on CPU
// 3 (node 1 first), XPS/RPS tx-q/rx-q = {q, q+2}, the workload on 0-3.
// The NVMe controller and a second virtio device (rng) are on node 0.
func numaSnapshot() *inspector.Snapshot {
	f := map[string]string{
		inspector.NodeDir + "/node0/cpulist":         "0-1\n",
		inspector.NodeDir + "/node1/cpulist":         "2-3\n",
		nicPCI + "/vendor":                           "0x1af4\n",
		nicPCI + "/device":                           "0x1041\n",
		nicPCI + "/numa_node":                        "1\n",
		nicPCI + "/virtio1/net/eth0/ifindex":         "2\n",
		inspector.PCIDir + "/0000:00:04.0/vendor":    "0x1b36\n",
		inspector.PCIDir + "/0000:00:04.0/device":    "0x0010\n",
		inspector.PCIDir + "/0000:00:04.0/numa_node": "0\n",
		inspector.PCIDir + "/0000:00:05.0/vendor":    "0x1af4\n",
		inspector.PCIDir + "/0000:00:05.0/device":    "0x1044\n",
		inspector.PCIDir + "/0000:00:05.0/numa_node": "0\n",
		"/proc/interrupts": "           CPU0       CPU1       CPU2       CPU3\n" +
			" 24:          0          0          0          0  PCI-MSIX-0000:81:00.0   0-edge      virtio1-config\n" +
			" 25:          0          0         40          0  PCI-MSIX-0000:81:00.0   1-edge      virtio1-input.0\n" +
			" 26:          0          0          9          0  PCI-MSIX-0000:81:00.0   2-edge      virtio1-output.0\n" +
			" 27:          0          0          0         31  PCI-MSIX-0000:81:00.0   3-edge      virtio1-input.1\n" +
			" 28:          0          0          0          7  PCI-MSIX-0000:81:00.0   4-edge      virtio1-output.1\n" +
			" 29:          0          0          0          0  PCI-MSIX-0000:00:05.0   0-edge      virtio0-requests\n" +
			"NMI:          0          0          0          0   Non-maskable interrupts\n",
		"/sys/class/net/eth0/queues/tx-0/xps_cpus": "5\n",
		"/sys/class/net/eth0/queues/tx-1/xps_cpus": "a\n",
		"/sys/class/net/eth0/queues/rx-0/rps_cpus": "05\n",
		"/sys/class/net/eth0/queues/rx-1/rps_cpus": "0a\n",
		"/proc/self/task/180/status":               "Name:\tinspector\nCpus_allowed:\tf\nCpus_allowed_list:\t0-3\n",
		"/proc/self/task/181/status":               "Name:\tinspector\nCpus_allowed:\tf\nCpus_allowed_list:\t0-3\n",
	}
	for irq, cpu := range map[string]string{"24": "0-3", "25": "2", "26": "2", "27": "3", "28": "3", "29": "0-3"} {
		f["/proc/irq/"+irq+"/smp_affinity_list"] = cpu + "\n"
		eff := cpu
		if cpu == "0-3" {
			eff = "1" // x86 delivers a multi-CPU affinity to one of them
		}
		f["/proc/irq/"+irq+"/effective_affinity_list"] = eff + "\n"
	}
	return &inspector.Snapshot{Files: f, Errors: map[string]string{}}
}

func TestReadNUMA(t *testing.T) {
	r, err := ReadNUMA(numaSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	if r.NIC != "eth0" || r.PCI != "0000:81:00.0" || r.Virtio != "virtio1" || r.NICNode != 1 {
		t.Errorf("NIC %s %s %s node %d", r.NIC, r.PCI, r.Virtio, r.NICNode)
	}
	if !maps.EqualFunc(r.Nodes, map[int][]int{0: {0, 1}, 1: {2, 3}}, slices.Equal) {
		t.Errorf("nodes %v", r.Nodes)
	}
	want := []QueueIRQ{
		{25, "virtio1-input.0", "rx", 0, []int{2}, []int{2}, []uint64{0, 0, 40, 0}},
		{26, "virtio1-output.0", "tx", 0, []int{2}, []int{2}, []uint64{0, 0, 9, 0}},
		{27, "virtio1-input.1", "rx", 1, []int{3}, []int{3}, []uint64{0, 0, 0, 31}},
		{28, "virtio1-output.1", "tx", 1, []int{3}, []int{3}, []uint64{0, 0, 0, 7}},
	}
	if !slices.EqualFunc(r.IRQs, want, func(a, b QueueIRQ) bool {
		return a.IRQ == b.IRQ && a.Name == b.Name && a.Kind == b.Kind && a.Queue == b.Queue &&
			slices.Equal(a.Affinity, b.Affinity) && slices.Equal(a.Effective, b.Effective) && slices.Equal(a.Counts, b.Counts)
	}) {
		t.Errorf("IRQs %+v, want %+v", r.IRQs, want)
	}
	masks := map[int][]int{0: {0, 2}, 1: {1, 3}}
	if !maps.EqualFunc(r.XPS, masks, slices.Equal) || !maps.EqualFunc(r.RPS, masks, slices.Equal) {
		t.Errorf("XPS %v RPS %v", r.XPS, r.RPS)
	}
	if !maps.EqualFunc(r.Threads, map[int][]int{180: {0, 1, 2, 3}, 181: {0, 1, 2, 3}}, slices.Equal) {
		t.Errorf("threads %v", r.Threads)
	}
	if errs := CheckNUMAPlacement(numaRig, r); len(errs) > 0 {
		t.Errorf("the right placement fails: %v", errs)
	}
}

// Each way the init can get the placement wrong, written into the files
// the inspector reads, fails the check with the reason named.
func TestCheckNUMAPlacementCatches(t *testing.T) {
	set := func(kv ...string) func(f map[string]string) {
		return func(f map[string]string) {
			for i := 0; i < len(kv); i += 2 {
				f[kv[i]] = kv[i+1]
			}
		}
	}
	for _, c := range []struct {
		name   string
		change func(map[string]string)
		want   string
	}{
		// nic.numa_local ignored: plain CPU order, queue q on CPU q.
		{"node ignored", set("/proc/irq/25/smp_affinity_list", "0", "/proc/irq/25/effective_affinity_list", "0",
			"/proc/irq/26/smp_affinity_list", "0", "/proc/irq/26/effective_affinity_list", "0",
			"/proc/irq/27/smp_affinity_list", "1", "/proc/irq/27/effective_affinity_list", "1",
			"/proc/irq/28/smp_affinity_list", "1", "/proc/irq/28/effective_affinity_list", "1"),
			"virtio1-input.0 (IRQ 25) smp_affinity_list [0], want CPU 2"},
		// Only the rx interrupts placed: tx keeps virtio-net's own spread
		// (queue 0 on CPUs 0-1), which the init's report does not list.
		{"tx left alone", set("/proc/irq/26/smp_affinity_list", "0-1", "/proc/irq/26/effective_affinity_list", "0"),
			"virtio1-output.0 (IRQ 26) smp_affinity_list [0 1], want CPU 2"},
		{"delivered elsewhere", set("/proc/irq/27/effective_affinity_list", "0"),
			"virtio1-input.1 (IRQ 27) delivered to CPUs [0]"},
		{"queues swapped", set("/proc/irq/25/smp_affinity_list", "3", "/proc/irq/25/effective_affinity_list", "3",
			"/proc/irq/27/smp_affinity_list", "2", "/proc/irq/27/effective_affinity_list", "2"),
			"virtio1-input.0 (IRQ 25) smp_affinity_list [3], want CPU 2"},
		{"NIC on node 0", set(nicPCI+"/numa_node", "0\n"), "is on node 0, QEMU put it behind node 1's bridge"},
		{"no NUMA node", set(nicPCI+"/numa_node", "-1\n"), "is on node -1"},
		{"nodes swapped", set(inspector.NodeDir+"/node0/cpulist", "2-3\n", inspector.NodeDir+"/node1/cpulist", "0-1\n"),
			"node 0 has CPUs [2 3]"},
		{"one node", func(f map[string]string) {
			delete(f, inspector.NodeDir+"/node1/cpulist")
			f[inspector.NodeDir+"/node0/cpulist"] = "0-3\n"
		}, "1 nodes read"},
		{"xps", set("/sys/class/net/eth0/queues/tx-1/xps_cpus", "8\n"), "xps_cpus of tx-1: CPUs [3], want [1 3]"},
		{"rps off", set("/sys/class/net/eth0/queues/rx-0/rps_cpus", "0\n"), "rps_cpus of rx-0: CPUs [], want [0 2]"},
		{"no tx interrupt", set("/proc/interrupts", strings.ReplaceAll(numaSnapshot().Files["/proc/interrupts"], "virtio1-output.1", "virtio1-control")),
			"no tx interrupt of queue 1"},
		{"thread pinned", set("/proc/self/task/181/status", "Cpus_allowed_list:\t2\n"), "workload thread 181 may run on CPUs [2]"},
		{"workload on node 1 only", set("/proc/self/task/180/status", "Cpus_allowed_list:\t2-3\n"), "workload thread 180 may run on CPUs [2 3]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := numaSnapshot()
			c.change(s.Files)
			r, err := ReadNUMA(s)
			if err != nil {
				t.Fatal(err)
			}
			errs := CheckNUMAPlacement(numaRig, r)
			if !slices.ContainsFunc(errs, func(e error) bool { return strings.Contains(e.Error(), c.want) }) {
				t.Errorf("errors %v, want one with %q", errs, c.want)
			}
		})
	}
}

// A snapshot the test cannot judge is an error, never a pass.
func TestReadNUMAUnreadable(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(*inspector.Snapshot)
		want   string
	}{
		{"no virtio-net", func(s *inspector.Snapshot) { delete(s.Files, nicPCI+"/virtio1/net/eth0/ifindex") }, "no virtio-net netdev"},
		{"not a NIC", func(s *inspector.Snapshot) { s.Files[nicPCI+"/device"] = "0x1044\n" }, "no virtio-net netdev"},
		{"numa_node unread", func(s *inspector.Snapshot) {
			delete(s.Files, nicPCI+"/numa_node")
			s.Errors[nicPCI+"/numa_node"] = "no such file"
		}, "numa_node"},
		{"effective affinity unread", func(s *inspector.Snapshot) { delete(s.Files, "/proc/irq/26/effective_affinity_list") },
			"/proc/irq/26/effective_affinity_list (virtio1-output.0) unread"},
		{"bad cpulist", func(s *inspector.Snapshot) { s.Files[inspector.NodeDir+"/node1/cpulist"] = "3-2\n" }, "bad range"},
		{"bad mask", func(s *inspector.Snapshot) { s.Files["/sys/class/net/eth0/queues/rx-1/rps_cpus"] = "xyz\n" }, "not hex"},
		{"no Cpus_allowed_list", func(s *inspector.Snapshot) { s.Files["/proc/self/task/180/status"] = "Name:\tx\n" }, "no Cpus_allowed_list"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := numaSnapshot()
			c.change(s)
			if _, err := ReadNUMA(s); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("ReadNUMA: %v, want an error with %q", err, c.want)
			}
		})
	}
}

func TestParseCPUList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		err  bool
	}{
		{"0-3\n", []int{0, 1, 2, 3}, false},
		{"2", []int{2}, false},
		{"0,2-3,7", []int{0, 2, 3, 7}, false},
		{"\n", nil, false},
		{"3-1", nil, true},
		{"a", nil, true},
		{"1-", nil, true},
		{"-1", nil, true},
	} {
		got, err := parseCPUList(c.in)
		if (err != nil) != c.err || !slices.Equal(got, c.want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v (error %v)", c.in, got, err, c.want, c.err)
		}
	}
}

func TestMaskCPUs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		err  bool
	}{
		{"5\n", []int{0, 2}, false},
		{"0000000a", []int{1, 3}, false},
		{"00000001,00000000", []int{32}, false},
		{"0", nil, false},
		{"", nil, true},
		{"g", nil, true},
	} {
		got, err := maskCPUs(c.in)
		if (err != nil) != c.err || !slices.Equal(got, c.want) {
			t.Errorf("maskCPUs(%q) = %v, %v; want %v (error %v)", c.in, got, err, c.want, c.err)
		}
	}
}

func TestDiffNUMA(t *testing.T) {
	r, err := ReadNUMA(numaSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	good := func() *report.Report {
		return &report.Report{NUMA: &report.NUMA{NICNode: 1}, Facts: report.Facts{NIC: &report.NIC{IRQs: []report.IRQ{
			{IRQ: 25, Name: "virtio1-input.0", Queue: 0, Affinity: "2"}, {IRQ: 26, Name: "virtio1-output.0", Queue: 0, Affinity: "2"},
			{IRQ: 27, Name: "virtio1-input.1", Queue: 1, Affinity: "3"}, {IRQ: 28, Name: "virtio1-output.1", Queue: 1, Affinity: "3"},
		}}}}
	}
	if errs := DiffNUMA(good(), r); len(errs) > 0 {
		t.Errorf("a true report: %v", errs)
	}
	for _, c := range []struct {
		name   string
		change func(*report.Report)
		want   string
	}{
		{"node", func(rep *report.Report) { rep.NUMA.NICNode = 0 }, "NIC node 0, the inspector reads 1"},
		{"no numa", func(rep *report.Report) { rep.NUMA = nil }, "has no numa"},
		// The init's reader misses the tx interrupts: what it lists is true.
		{"tx unlisted", func(rep *report.Report) { rep.Facts.NIC.IRQs = rep.Facts.NIC.IRQs[:1] }, "queue interrupts"},
		{"affinity", func(rep *report.Report) { rep.Facts.NIC.IRQs[2].Affinity = "1" }, `virtio1-input.1="1"`},
	} {
		rep := good()
		c.change(rep)
		errs := DiffNUMA(rep, r)
		if !slices.ContainsFunc(errs, func(e error) bool { return strings.Contains(e.Error(), c.want) }) {
			t.Errorf("%s: %v, want an error with %q", c.name, errs, c.want)
		}
	}
}

func TestSettled(t *testing.T) {
	for _, c := range []struct {
		aff, eff []int
		want     bool
	}{
		{[]int{2}, []int{2}, true},
		{[]int{0, 1}, []int{0}, true},
		{[]int{0}, []int{1}, false}, // the move to CPU 0 is pending
		{[]int{2}, []int{2, 3}, false},
	} {
		r := &NUMAReading{IRQs: []QueueIRQ{{Name: "ok", Affinity: []int{3}, Effective: []int{3}}, {Name: "q", Affinity: c.aff, Effective: c.eff}}}
		if got := r.Settled(); got != c.want {
			t.Errorf("affinity %v effective %v: settled %v, want %v", c.aff, c.eff, got, c.want)
		}
	}
}

// Interrupts taken between two readings must be on their queue's CPU.
func TestCheckDelivered(t *testing.T) {
	before, err := ReadNUMA(numaSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	line := func(irq, name string, c0, c1, c2, c3 int) string {
		return fmt.Sprintf(" %s: %d %d %d %d PCI-MSIX-0000:81:00.0 1-edge %s\n", irq, c0, c1, c2, c3, name)
	}
	for _, c := range []struct {
		name  string
		lines string
		want  string // "" for no error
	}{
		{"on their CPUs", line("25", "virtio1-input.0", 0, 0, 45, 0) + line("28", "virtio1-output.1", 0, 0, 0, 9), ""},
		{"rx on node 0", line("25", "virtio1-input.0", 3, 0, 40, 0), "virtio1-input.0 (IRQ 25) fired 3 times on CPU 0"},
		{"tx on the other node-1 CPU", line("26", "virtio1-output.0", 0, 0, 9, 2), "virtio1-output.0 (IRQ 26) fired 2 times on CPU 3 between two readings, want CPU 2 only"},
		{"nothing fired", "", "no queue interrupt fired"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := numaSnapshot()
			var text strings.Builder
			text.WriteString("           CPU0       CPU1       CPU2       CPU3\n")
			for _, l := range strings.Split(s.Files["/proc/interrupts"], "\n")[1:] {
				f := strings.Fields(l)
				if len(f) > 0 && strings.Contains(c.lines, " "+f[0]+" ") {
					continue // replaced
				}
				text.WriteString(l + "\n")
			}
			text.WriteString(c.lines)
			s.Files["/proc/interrupts"] = text.String()
			after, err := ReadNUMA(s)
			if err != nil {
				t.Fatal(err)
			}
			errs := CheckDelivered(numaRig, before, after)
			switch {
			case c.want == "" && len(errs) > 0:
				t.Errorf("errors %v, want none", errs)
			case c.want != "" && !slices.ContainsFunc(errs, func(e error) bool { return strings.Contains(e.Error(), c.want) }):
				t.Errorf("errors %v, want one with %q", errs, c.want)
			}
		})
	}
}
