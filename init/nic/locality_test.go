package nic

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/cpuset"
	"github.com/hotpath-dev/hotpath/init/report"
)

// TestQueueOrder: 4 workload CPUs, 2 queues, the NIC on the node of CPUs
// 2-3 (QueueOrder 2,3,0,1). The queue interrupts go to CPUs 2 and 3; RPS
// and XPS pair each queue with one remote CPU (rps), or the workload gets
// CPUs 2-3 only (queues). With a queue per CPU the order is ignored:
// queue i stays on CPU i.
func TestQueueOrder(t *testing.T) {
	for _, tc := range []struct {
		spread   config.Spread
		nq       int
		workload string
		irq      []string // affinity of input.q
		rps, xps []string
	}{
		{config.SpreadRPS, 2, "0-3", []string{"2", "3"}, []string{"5", "a"}, []string{"5", "a"}},
		{config.SpreadQueues, 2, "2-3", []string{"2", "3"}, []string{"0", "0"}, []string{"4", "8"}},
		{config.SpreadRPS, 4, "0-3", []string{"0", "1", "2", "3"}, []string{"0", "0", "0", "0"}, []string{"1", "2", "4", "8"}},
	} {
		t.Run(fmt.Sprintf("%s-%dq", tc.spread, tc.nq), func(t *testing.T) {
			ft := newTree(t)
			ft.addNIC(t, "eth0", 2, "virtio0", "virtio_net", tc.nq, false)
			var names []string
			for q := 0; q < tc.nq; q++ {
				names = append(names, fmt.Sprintf("virtio0-input.%d", q), fmt.Sprintf("virtio0-output.%d", q))
			}
			irqs := ft.interrupts(t, 4, names...)
			opt := defaultOpts()
			opt.Spread = tc.spread
			tu := &Tuner{SysRoot: ft.sys, ProcRoot: ft.proc, Link: Link{Name: "eth0", Driver: "virtio_net", Device: "virtio0"},
				CPUs: []int{0, 1, 2, 3}, NrCPUs: 4, Opt: opt, QueueOrder: []int{2, 3, 0, 1}}
			for _, name := range []string{"nic-spread", "nic-irq-affinity", "nic-xps", "nic-rps"} {
				if r := boot.RunOne(context.Background(), stepNamed(t, tu.Steps(), name)); r.Status != report.Applied {
					t.Errorf("%s %s: %s%s", name, r.Status, r.Reason, r.Error)
				}
			}
			if got := cpuset.FormatList(tu.WorkloadCPUs()); got != tc.workload {
				t.Errorf("workload cpus %s, want %s", got, tc.workload)
			}
			for q := 0; q < tc.nq; q++ {
				for _, n := range []string{"input", "output"} {
					irq := irqs[fmt.Sprintf("virtio0-%s.%d", n, q)]
					if got := ft.read(t, filepath.Join(ft.proc, "irq", fmt.Sprint(irq), "smp_affinity_list")); got != tc.irq[q] {
						t.Errorf("%s.%d affinity %s, want %s", n, q, got, tc.irq[q])
					}
				}
				if got := ft.read(t, filepath.Join(ft.sys, "class/net/eth0/queues", fmt.Sprintf("rx-%d", q), "rps_cpus")); got != tc.rps[q] {
					t.Errorf("rx-%d rps_cpus %s, want %s", q, got, tc.rps[q])
				}
				if got := ft.read(t, filepath.Join(ft.sys, "class/net/eth0/queues", fmt.Sprintf("tx-%d", q), "xps_cpus")); got != tc.xps[q] {
					t.Errorf("tx-%d xps_cpus %s, want %s", q, got, tc.xps[q])
				}
			}
		})
	}
}
