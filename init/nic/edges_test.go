package nic

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/safchain/ethtool"
)

// The tests in this file were written for mutants of init/nic that the
// other tests let live (tests/mutation/README.md): each is a behaviour
// a user would see go wrong.

// TestDiscoverSkipsNonEthernet: with no device-backed NIC, Discover takes
// the first Ethernet device by ifindex; a tunnel (ARPHRD_NONE, a lower
// ifindex) or loopback is never the primary NIC, and listing them first
// (ReadDir sorts by name: "lo" and "a-tun" before "veth0") does not end
// the search.
func TestDiscoverSkipsNonEthernet(t *testing.T) {
	ft := newTree(t)
	ft.write(t, filepath.Join(ft.sys, "class/net/lo/type"), "772\n")
	ft.write(t, filepath.Join(ft.sys, "class/net/lo/ifindex"), "1\n")
	ft.write(t, filepath.Join(ft.sys, "class/net/a-tun/type"), "65534\n")
	ft.write(t, filepath.Join(ft.sys, "class/net/a-tun/ifindex"), "2\n")
	ft.addNIC(t, "veth0", 5, "", "", 1, false)
	l, err := Discover(ft.sys, "")
	if err != nil || l.Name != "veth0" {
		t.Errorf("Discover = %+v, %v; want veth0, the only Ethernet device", l, err)
	}
}

// TestSelectSkipsVirtual: Select without matches takes every
// device-backed Ethernet NIC; a virtual one listed before them (a bond,
// "bond0" < "eth0") is left out and does not end the search.
func TestSelectSkipsVirtual(t *testing.T) {
	ft := newTree(t)
	ft.addNIC(t, "bond0", 2, "", "", 1, false)
	ft.addNIC(t, "eth1", 4, "0000:00:06.0", "ena", 1, false)
	ft.addNIC(t, "eth0", 3, "0000:00:05.0", "ena", 1, false)
	sel, _, err := Select(ft.sys, nil)
	var names []string
	for _, l := range sel {
		names = append(names, l.Name)
	}
	if err != nil || strings.Join(names, ",") != "eth0,eth1" {
		t.Errorf("Select = %v, %v; want eth0,eth1 (by ifindex, no bond0)", names, err)
	}
}

// TestQueueCPUsNoQueues: a device that reports no queues gets no CPUs
// (and the init no division by zero).
func TestQueueCPUsNoQueues(t *testing.T) {
	if got := QueueCPUs(0, 0, []int{0, 1}); got != nil {
		t.Errorf("QueueCPUs(0, 0, [0 1]) = %v, want nil", got)
	}
	if got := QueueCPUs(0, 2, nil); got != nil {
		t.Errorf("QueueCPUs(0, 2, []) = %v, want nil", got)
	}
}

// TestParseInterruptsManyCPUs: a machine at the kernel's NR_CPUS limit
// (8192) prints lines of ~90 KB in /proc/interrupts, more than the
// scanner's first 64 KiB buffer: they are read whole, not an error that
// would leave every queue unbound.
func TestParseInterruptsManyCPUs(t *testing.T) {
	const ncpu = 8192
	var b strings.Builder
	for c := 0; c < ncpu; c++ {
		fmt.Fprintf(&b, " CPU%d", c)
	}
	b.WriteString("\n 24:")
	for c := 0; c < ncpu; c++ {
		fmt.Fprintf(&b, " %10d", c)
	}
	b.WriteString("  PCI-MSIX-0000:00:05.0 1-edge      eth0-Tx-Rx-0\n")
	in, err := ParseInterrupts(strings.NewReader(b.String()))
	if err != nil || len(in) != 1 || len(in[0].Counts) != ncpu || in[0].Counts[ncpu-1] != ncpu-1 ||
		!slices.Equal(in[0].Names, []string{"eth0-Tx-Rx-0"}) {
		var got any = in
		if len(in) == 1 {
			got = fmt.Sprintf("%d counts, names %v", len(in[0].Counts), in[0].Names)
		}
		t.Errorf("ParseInterrupts of %d CPUs: %v, %v", ncpu, got, err)
	}
}

// separateEthtool is a driver with separate RX and TX channels and no
// combined ones (MaxCombined 0, as e1000e-style and some mlx4 setups
// report), which records the channel changes asked of it.
type separateEthtool struct {
	fakeEthtool
	sets []ethtool.Channels
}

func (s *separateEthtool) SetChannels(_ string, c ethtool.Channels) (ethtool.Channels, error) {
	if c.RxCount > c.MaxRx || c.TxCount > c.MaxTx || c.CombinedCount > c.MaxCombined {
		return c, fmt.Errorf("fake: channels %+v over the maxima", c)
	}
	s.sets = append(s.sets, c)
	s.ch = c
	return c, nil
}

// TestSeparateChannels: on a driver without combined channels,
// nic-channels sets RX and TX to min(CPUs, max) each, and leaves a
// device already there alone (no change asked: on ENA-like devices a
// channel change is a reset).
func TestSeparateChannels(t *testing.T) {
	for _, tc := range []struct {
		name       string
		have       ethtool.Channels
		wantSets   int
		wantRx, tx uint32
		changed    string
	}{
		{"to the CPU count", ethtool.Channels{MaxRx: 8, MaxTx: 8, RxCount: 1, TxCount: 1}, 1, 4, 4, "yes"},
		{"capped by the maxima", ethtool.Channels{MaxRx: 2, MaxTx: 3, RxCount: 1, TxCount: 1}, 1, 2, 3, "yes"},
		{"already right", ethtool.Channels{MaxRx: 8, MaxTx: 8, RxCount: 4, TxCount: 4}, 0, 4, 4, "no"},
		{"rx right, tx not", ethtool.Channels{MaxRx: 8, MaxTx: 8, RxCount: 4, TxCount: 1}, 1, 4, 4, "yes"},
		{"tx right, rx not", ethtool.Channels{MaxRx: 8, MaxTx: 8, RxCount: 1, TxCount: 4}, 1, 4, 4, "yes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			et := &separateEthtool{fakeEthtool: fakeEthtool{ch: tc.have}}
			tu := &Tuner{Link: Link{Name: "eth0", Driver: "e1000e"}, CPUs: []int{0, 1, 2, 3}, NrCPUs: 4, Ethtool: et, Opt: defaultOpts()}
			st := stepNamed(t, tu.Steps(), "nic-channels")
			d := boot.Detail{}
			if err := st.Apply(context.Background(), d); err != nil {
				t.Fatal(err)
			}
			if st.Verify != nil {
				if err := st.Verify(context.Background(), d); err != nil {
					t.Errorf("verify: %v", err)
				}
			}
			if len(et.sets) != tc.wantSets || et.ch.RxCount != tc.wantRx || et.ch.TxCount != tc.tx {
				t.Errorf("%d changes, channels %+v; want %d, rx %d tx %d", len(et.sets), et.ch, tc.wantSets, tc.wantRx, tc.tx)
			}
			if d["changed"] != tc.changed || d["rx"] != strconv.Itoa(int(tc.wantRx)) || d["tx"] != strconv.Itoa(int(tc.tx)) {
				t.Errorf("detail %v, want changed=%s rx=%d tx=%d", d, tc.changed, tc.wantRx, tc.tx)
			}
		})
	}
}

// TestIRQAffinityPartialFailure: when the kernel refuses one queue's
// vector (EIO: a managed interrupt), the queues after it are bound all
// the same, and the step reports the one that failed.
func TestIRQAffinityPartialFailure(t *testing.T) {
	f := newFakeENA(t, 4, 8, []int{0, 1, 2, 3}, 4)
	f.managedQueues[0] = true
	res := runAll(t, f.tuner(defaultOpts(), []int{0, 1, 2, 3}).Steps())
	if r := res["nic-irq-affinity"]; r.Status != report.Failed || !strings.Contains(r.Error, "-> cpu 0: write") {
		t.Errorf("nic-irq-affinity: %s %q, want failed on queue 0", r.Status, r.Error)
	}
	for q, irq := range f.queueIRQs()[1:] {
		if got := f.ft.read(t, filepath.Join(f.ft.proc, "irq", strconv.Itoa(irq), "smp_affinity_list")); got != strconv.Itoa(q+1) {
			t.Errorf("queue %d (irq %d) affinity %s, want %d: a failure before it stopped the binding", q+1, irq, got, q+1)
		}
	}
}

// TestIRQAffinityVerifyCatchesChange: nic-irq-affinity's verify reads
// the kernel's affinity back: a vector moved after the apply (irqbalance,
// an administrator, a driver) fails it, naming the queue.
func TestIRQAffinityVerifyCatchesChange(t *testing.T) {
	f := newFakeENA(t, 2, 8, []int{0, 1}, 2)
	st := stepNamed(t, f.tuner(defaultOpts(), []int{0, 1}).Steps(), "nic-irq-affinity")
	d := boot.Detail{}
	if err := st.Apply(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if err := st.Verify(context.Background(), d); err != nil {
		t.Fatalf("verify right after apply: %v", err)
	}
	irq := f.queueIRQs()[1]
	if err := f.WriteFile(filepath.Join(f.ft.proc, "irq", strconv.Itoa(irq), "smp_affinity_list"), []byte("0")); err != nil {
		t.Fatal(err)
	}
	if err := st.Verify(context.Background(), boot.Detail{}); err == nil || !strings.Contains(err.Error(), strconv.Itoa(irq)) {
		t.Errorf("verify after irq %d moved to cpu 0: %v, want an error naming it", irq, err)
	}
}

// TestQdiscEdges: a one-queue device gets the default qdisc as its root
// (mq needs several), a multi-queue one mq over children of the default
// qdisc's kind; mq over children of another kind than the Tuner's
// DefaultQdisc (net.core.default_qdisc set otherwise) fails the verify.
func TestQdiscEdges(t *testing.T) {
	for _, tc := range []struct {
		name     string
		nq       int
		defQdisc string // the kernel's net.core.default_qdisc
		want     string // Tuner.DefaultQdisc
		root     string
		status   report.Status
	}{
		{"one queue", 1, "noqueue", "", "noqueue", report.Applied},
		{"two queues", 2, "noqueue", "", "mq", report.Applied},
		{"mq over pfifo_fast, noqueue wanted", 2, "pfifo_fast", "", "mq", report.Failed},
		{"one queue, pfifo_fast", 1, "pfifo_fast", "pfifo_fast", "pfifo_fast", report.Applied},
		{"two queues, pfifo_fast", 2, "pfifo_fast", "pfifo_fast", "mq", report.Applied},
		{"mq over noqueue, pfifo_fast wanted", 2, "noqueue", "pfifo_fast", "mq", report.Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := newTree(t)
			ft.addNIC(t, "eth0", 2, "virtio0", "virtio_net", tc.nq, false)
			nl := &fakeNetlink{root: "noqueue", defQdisc: tc.defQdisc, ntx: tc.nq}
			link, _ := Discover(ft.sys, "")
			tu := &Tuner{SysRoot: ft.sys, ProcRoot: ft.proc, Link: link, CPUs: []int{0, 1}, NrCPUs: 2,
				Ethtool: &fakeEthtool{noChannelsGet: true, features: map[string]bool{}}, Netlink: nl, Opt: defaultOpts(), DefaultQdisc: tc.want}
			st := stepNamed(t, tu.Steps(), "nic-qdisc")
			r := runAll(t, []boot.Step{st})["nic-qdisc"]
			if r.Status != tc.status || nl.root != tc.root {
				t.Errorf("nic-qdisc %s (%q), root %s; want %s, root %s", r.Status, r.Error, nl.root, tc.status, tc.root)
			}
		})
	}
}

// TestFixedQueues: a driver that reports no channel maxima at all has a
// fixed number of queues: nic-channels is skipped with that reason rather
// than asking for a change the driver would refuse, or failing the boot
// report.
func TestFixedQueues(t *testing.T) {
	et := &separateEthtool{fakeEthtool: fakeEthtool{ch: ethtool.Channels{RxCount: 1, TxCount: 1}}}
	tu := &Tuner{Link: Link{Name: "eth0", Driver: "8139too"}, CPUs: []int{0, 1}, NrCPUs: 2, Ethtool: et, Opt: defaultOpts()}
	r := runAll(t, []boot.Step{stepNamed(t, tu.Steps(), "nic-channels")})["nic-channels"]
	if r.Status != report.Skipped || !strings.Contains(r.Reason, "fixed number of queues") || len(et.sets) != 0 {
		t.Errorf("nic-channels on a fixed-queue driver: %s %q%q, %d changes; want skipped, none", r.Status, r.Error, r.Reason, len(et.sets))
	}
}

// TestRPSVerifyCatchesChange: nic-rps's verify reads the masks back: RPS
// turned on for a queue after the apply (sysctl scripts, a driver reset
// that kept it) fails it, naming the queue.
func TestRPSVerifyCatchesChange(t *testing.T) {
	f := newFakeENA(t, 2, 8, []int{0, 1}, 2)
	st := stepNamed(t, f.tuner(defaultOpts(), []int{0, 1}).Steps(), "nic-rps")
	if err := st.Apply(context.Background(), boot.Detail{}); err != nil {
		t.Fatal(err)
	}
	if err := st.Verify(context.Background(), boot.Detail{}); err != nil {
		t.Fatalf("verify right after apply: %v", err)
	}
	if err := f.WriteFile(filepath.Join(f.ft.sys, "class/net/eth0/queues/rx-1/rps_cpus"), []byte("3")); err != nil {
		t.Fatal(err)
	}
	if err := st.Verify(context.Background(), boot.Detail{}); err == nil || !strings.Contains(err.Error(), "rx-1") {
		t.Errorf("verify after rx-1's RPS was set to cpus 0-1: %v, want an error naming rx-1", err)
	}
}
