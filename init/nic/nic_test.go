package nic

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/cpuset"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// fakeTree builds /sys and /proc for one NIC.
type fakeTree struct {
	root, sys, proc string
}

func newTree(t *testing.T) *fakeTree {
	root := t.TempDir()
	ft := &fakeTree{root: root, sys: filepath.Join(root, "sys"), proc: filepath.Join(root, "proc")}
	return ft
}

func (ft *fakeTree) write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// addNIC adds /sys/class/net/<name> with its device and driver links and
// nq rx/tx queues (xps/rps files unless noXPS).
func (ft *fakeTree) addNIC(t *testing.T, name string, ifindex int, device, driver string, nq int, noXPS bool) {
	t.Helper()
	dir := filepath.Join(ft.sys, "class/net", name)
	ft.write(t, filepath.Join(dir, "type"), "1\n")
	ft.write(t, filepath.Join(dir, "ifindex"), fmt.Sprintf("%d\n", ifindex))
	ft.write(t, filepath.Join(dir, "carrier"), "1\n")
	if device != "" {
		devDir := filepath.Join(ft.sys, "devices/pci0000:00", device)
		drvDir := filepath.Join(ft.sys, "bus/drivers", driver)
		os.MkdirAll(devDir, 0o755)
		os.MkdirAll(drvDir, 0o755)
		if err := os.Symlink(devDir, filepath.Join(dir, "device")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(drvDir, filepath.Join(devDir, "driver")); err != nil {
			t.Fatal(err)
		}
	}
	for q := 0; q < nq; q++ {
		ft.write(t, filepath.Join(dir, "queues", fmt.Sprintf("rx-%d", q), "rps_cpus"), "0\n")
		if !noXPS {
			ft.write(t, filepath.Join(dir, "queues", fmt.Sprintf("tx-%d", q), "xps_cpus"), "0\n")
		} else {
			os.MkdirAll(filepath.Join(dir, "queues", fmt.Sprintf("tx-%d", q)), 0o755)
		}
	}
}

// interrupts writes /proc/interrupts with the given IRQ names (IRQ numbers
// from 24) and creates /proc/irq/N/smp_affinity_list for each.
func (ft *fakeTree) interrupts(t *testing.T, ncpu int, names ...string) map[string]int {
	t.Helper()
	var b strings.Builder
	b.WriteString("           ")
	for c := 0; c < ncpu; c++ {
		fmt.Fprintf(&b, "CPU%-8d", c)
	}
	b.WriteString("\n  0:         40          0   IO-APIC   2-edge      timer\n")
	b.WriteString("  4:          0        339   IO-APIC   4-edge      ttyS0\n")
	irqs := map[string]int{}
	for i, n := range names {
		irq := 24 + i
		irqs[n] = irq
		fmt.Fprintf(&b, "%3d:", irq)
		for c := 0; c < ncpu; c++ {
			fmt.Fprintf(&b, " %10d", 7*c)
		}
		fmt.Fprintf(&b, "  PCI-MSIX-0000:00:05.0 %d-edge      %s\n", i, n)
		ft.write(t, filepath.Join(ft.proc, "irq", fmt.Sprint(irq), "smp_affinity_list"), fmt.Sprintf("0-%d\n", ncpu-1))
	}
	b.WriteString("NMI:          0          0   Non-maskable interrupts\nLOC:      10000       9000   Local timer interrupts\n")
	ft.write(t, filepath.Join(ft.proc, "interrupts"), b.String())
	return irqs
}

func (ft *fakeTree) read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestDiscover(t *testing.T) {
	ft := newTree(t)
	ft.write(t, filepath.Join(ft.sys, "class/net/lo/type"), "772\n")
	ft.addNIC(t, "veth0", 2, "", "", 1, false)
	ft.addNIC(t, "eth1", 4, "0000:00:06.0", "ena", 1, false)
	ft.addNIC(t, "eth0", 3, "virtio0", "virtio_net", 2, false)
	ft.write(t, filepath.Join(ft.sys, "class/net/wg0/type"), "65534\n")
	l, err := Discover(ft.sys, "")
	if err != nil {
		t.Fatal(err)
	}
	if l != (Link{Name: "eth0", Driver: "virtio_net", Device: "virtio0"}) {
		t.Errorf("Discover = %+v, want eth0 virtio_net virtio0 (lowest ifindex with a device)", l)
	}
	l, err = Discover(ft.sys, "eth1")
	if err != nil || l.Driver != "ena" || l.Device != "0000:00:06.0" {
		t.Errorf("Discover(eth1) = %+v, %v", l, err)
	}
	if _, err := Discover(ft.sys, "eth9"); err == nil {
		t.Error("Discover(eth9) found a missing interface")
	}
	empty := newTree(t)
	empty.write(t, filepath.Join(empty.sys, "class/net/lo/type"), "772\n")
	if _, err := Discover(empty.sys, ""); err != errNoNIC {
		t.Errorf("Discover on loopback only = %v, want errNoNIC", err)
	}
}

func TestQueueIRQNaming(t *testing.T) {
	for _, tc := range []struct {
		name string
		link Link
		irqs []string
		want []string // "name:queue"
	}{
		{
			name: "virtio",
			link: Link{Name: "eth0", Driver: "virtio_net", Device: "virtio1"},
			irqs: []string{"virtio0-config", "virtio0-requestq", "virtio1-config", "virtio1-input.0", "virtio1-output.0",
				"virtio1-input.1", "virtio1-output.1", "virtio1-control", "virtio10-input.0"},
			want: []string{"virtio1-input.0:0", "virtio1-output.0:0", "virtio1-input.1:1", "virtio1-output.1:1"},
		},
		{
			name: "virtio shared vector",
			link: Link{Name: "eth0", Driver: "virtio_net", Device: "virtio0"},
			irqs: []string{"virtio0-config", "virtio0-virtqueues"},
			want: []string{"virtio0-virtqueues:0"},
		},
		{
			name: "ena",
			link: Link{Name: "eth0", Driver: "ena", Device: "0000:00:05.0"},
			irqs: []string{"ena-mgmnt@pci:0000:00:05.0", "eth0-Tx-Rx-0", "eth0-Tx-Rx-1", "eth0-Tx-Rx-2",
				"eth0-Tx-Rx-3", "eth1-Tx-Rx-0", "nvme0q1"},
			want: []string{"eth0-Tx-Rx-0:0", "eth0-Tx-Rx-1:1", "eth0-Tx-Rx-2:2", "eth0-Tx-Rx-3:3"},
		},
		{
			name: "generic TxRx",
			link: Link{Name: "ens5", Driver: "ixgbevf"},
			irqs: []string{"ens5-TxRx-0", "ens5-TxRx-1", "ens5"},
			want: []string{"ens5-TxRx-0:0", "ens5-TxRx-1:1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := newTree(t)
			ft.interrupts(t, 2, tc.irqs...)
			got, err := QueueIRQs(ft.proc, tc.link)
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, q := range got {
				s = append(s, fmt.Sprintf("%s:%d", q.Name, q.Queue))
			}
			if strings.Join(s, " ") != strings.Join(tc.want, " ") {
				t.Errorf("got %v, want %v", s, tc.want)
			}
		})
	}
}

// TestParseInterruptsShared: a shared line's actions, and counts under the
// CPU numbers of the header (CPU1 offline has no column).
func TestParseInterruptsShared(t *testing.T) {
	in := "           CPU0       CPU2\n 11:   5  6   IO-APIC  11-fasteoi   uhci_hcd:usb1, virtio3-input.0\nNMI: 0 0 Non-maskable interrupts\n"
	ints, err := ParseInterrupts(strings.NewReader(in))
	if err != nil || len(ints) != 1 || strings.Join(ints[0].Names, "|") != "uhci_hcd:usb1|virtio3-input.0" ||
		fmt.Sprint(ints[0].CPUs, ints[0].Counts) != "[0 2] [5 6]" {
		t.Errorf("ParseInterrupts = %+v, %v", ints, err)
	}
	if _, err := ParseInterrupts(strings.NewReader("CPU0 CPUx\n")); err == nil {
		t.Error("a bad header parsed")
	}
}

// fakeEthtool is the ethtool surface of a driver in memory: it records
// what was set and refuses what the driver would refuse.
type fakeEthtool struct {
	ch            ethtool.Channels
	co            ethtool.Coalesce
	features      map[string]bool
	noAdaptive    bool // EOPNOTSUPP on use_adaptive_rx (virtio)
	noCoalesce    bool // EOPNOTSUPP on any coalesce set
	noChannelsGet bool
}

func (f *fakeEthtool) GetChannels(string) (ethtool.Channels, error) {
	if f.noChannelsGet {
		return ethtool.Channels{}, unix.EOPNOTSUPP
	}
	return f.ch, nil
}
func (f *fakeEthtool) SetChannels(_ string, c ethtool.Channels) (ethtool.Channels, error) {
	if c.CombinedCount > c.MaxCombined {
		return c, unix.EINVAL
	}
	f.ch = c
	return c, nil
}
func (f *fakeEthtool) GetCoalesce(string) (ethtool.Coalesce, error) { return f.co, nil }
func (f *fakeEthtool) SetCoalesce(_ string, c ethtool.Coalesce) (ethtool.Coalesce, error) {
	if f.noCoalesce || (f.noAdaptive && c.UseAdaptiveRxCoalesce != 0) {
		return c, unix.EOPNOTSUPP
	}
	f.co = c
	return c, nil
}
func (f *fakeEthtool) Features(string) (map[string]bool, error) { return f.features, nil }
func (f *fakeEthtool) Change(_ string, c map[string]bool) error {
	for k, v := range c {
		if _, ok := f.features[k]; !ok {
			return fmt.Errorf("unsupported feature %q", k)
		}
		f.features[k] = v
	}
	return nil
}

type fakeNetlink struct {
	up       bool
	root     string
	children []string
	defQdisc string
	ntx      int
	// pushLen and pushMax are the transmit push buffer (ethtool netlink
	// rings): pushMax 0 is a device that offers none (virtio-net, ENA
	// outside LLQ mode). A set is checked as ethnl_set_rings does
	// (EINVAL above the maximum).
	pushLen, pushMax uint32
}

func (f *fakeNetlink) TxPushBuf(string) (uint32, uint32, error) { return f.pushLen, f.pushMax, nil }
func (f *fakeNetlink) SetTxPushBufLen(_ string, n uint32) error {
	if n > f.pushMax {
		return unix.EINVAL
	}
	f.pushLen = n
	return nil
}

func (f *fakeNetlink) LinkSetUp(string) error                  { f.up = true; return nil }
func (f *fakeNetlink) LinkIsUp(string) (bool, error)           { return f.up, nil }
func (f *fakeNetlink) Qdiscs(string) (string, []string, error) { return f.root, f.children, nil }
func (f *fakeNetlink) ReplaceRoot(_ string, kind string) error {
	f.root = kind
	f.children = nil
	if kind == "mq" {
		for i := 0; i < f.ntx; i++ {
			f.children = append(f.children, f.defQdisc)
		}
	}
	return nil
}

func runSteps(t *testing.T, tu *Tuner) map[string]report.Step {
	t.Helper()
	res := boot.Run(context.Background(), tu.Steps(), t.Logf)
	m := map[string]report.Step{}
	for _, r := range res {
		m[r.Name] = r
	}
	return m
}

func defaultOpts() Options {
	return Options{Coalesce: "adaptive", RxUsecs: 20, TxUsecs: 64, IRQAffinity: true, XPS: true, Qdisc: "mq",
		CarrierWait: 10 * time.Second, TxPushBufLen: 224}
}

func TestVirtioSteps(t *testing.T) {
	ft := newTree(t)
	ft.addNIC(t, "eth0", 2, "virtio0", "virtio_net", 4, false)
	irqs := ft.interrupts(t, 4, "virtio0-config", "virtio0-input.0", "virtio0-output.0", "virtio0-input.1",
		"virtio0-output.1", "virtio0-input.2", "virtio0-output.2", "virtio0-input.3", "virtio0-output.3")
	et := &fakeEthtool{
		ch:         ethtool.Channels{MaxCombined: 4, CombinedCount: 1},
		features:   map[string]bool{"rx-gro": true, "rx-checksum": true},
		noAdaptive: true, noCoalesce: true,
	}
	nl := &fakeNetlink{root: "mq", children: []string{"pfifo_fast", "pfifo_fast", "pfifo_fast", "pfifo_fast"}, defQdisc: "noqueue", ntx: 4}
	link, _ := Discover(ft.sys, "")
	tu := &Tuner{SysRoot: ft.sys, ProcRoot: ft.proc, Link: link, CPUs: []int{0, 1, 2, 3}, NrCPUs: 4,
		Ethtool: et, Netlink: nl, Opt: defaultOpts()}
	res := runSteps(t, tu)
	want := map[string]report.Status{
		"nic-channels": report.Applied, "nic-coalesce": report.Skipped, "nic-gro": report.Applied,
		"nic-link-up": report.Applied, "nic-qdisc": report.Applied, "nic-irq-affinity": report.Applied,
		"nic-xps": report.Applied, "nic-rps": report.Applied,
	}
	for name, st := range want {
		if res[name].Status != st {
			t.Errorf("%s: %s (%s%s), want %s", name, res[name].Status, res[name].Reason, res[name].Error, st)
		}
	}
	if !strings.Contains(res["nic-coalesce"].Reason, "neither adaptive RX nor static") {
		t.Errorf("coalesce reason %q", res["nic-coalesce"].Reason)
	}
	if et.ch.CombinedCount != 4 || et.features["rx-gro"] || !nl.up || nl.root != "mq" || !allKind(nl.children, "noqueue") {
		t.Errorf("state after steps: channels %d gro %v up %v qdisc %s %v", et.ch.CombinedCount, et.features["rx-gro"], nl.up, nl.root, nl.children)
	}
	for q := 0; q < 4; q++ {
		for _, dir := range []string{"input", "output"} {
			irq := irqs[fmt.Sprintf("virtio0-%s.%d", dir, q)]
			if got := ft.read(t, filepath.Join(ft.proc, "irq", fmt.Sprint(irq), "smp_affinity_list")); got != fmt.Sprint(q) {
				t.Errorf("virtio0-%s.%d affinity %s, want %d", dir, q, got, q)
			}
		}
		if got := ft.read(t, filepath.Join(ft.sys, "class/net/eth0/queues", fmt.Sprintf("tx-%d", q), "xps_cpus")); got != fmt.Sprintf("%x", 1<<q) {
			t.Errorf("tx-%d xps %s", q, got)
		}
	}
	// The config IRQ is not a queue: untouched.
	if got := ft.read(t, filepath.Join(ft.proc, "irq", fmt.Sprint(irqs["virtio0-config"]), "smp_affinity_list")); got != "0-3" {
		t.Errorf("virtio0-config affinity changed to %s", got)
	}
}

func TestENASteps(t *testing.T) {
	ft := newTree(t)
	ft.addNIC(t, "eth0", 2, "0000:00:05.0", "ena", 2, false)
	irqs := ft.interrupts(t, 2, "ena-mgmnt@pci:0000:00:05.0", "eth0-Tx-Rx-0", "eth0-Tx-Rx-1")
	ft.write(t, filepath.Join(ft.sys, "class/net/eth0/queues/rx-1/rps_cpus"), "3\n")
	et := &fakeEthtool{ch: ethtool.Channels{MaxCombined: 8, CombinedCount: 8}, features: map[string]bool{"rx-gro": true},
		co: ethtool.Coalesce{RxCoalesceUsecs: 0, TxCoalesceUsecs: 64}}
	nl := &fakeNetlink{root: "mq", children: []string{"noqueue", "noqueue"}, defQdisc: "noqueue", ntx: 2, pushLen: 96, pushMax: 224}
	link, _ := Discover(ft.sys, "")
	tu := &Tuner{SysRoot: ft.sys, ProcRoot: ft.proc, Link: link, CPUs: []int{0, 1}, NrCPUs: 2,
		Ethtool: et, Netlink: nl, Opt: defaultOpts()}
	res := runSteps(t, tu)
	// Every step of the NIC ran, and each was applied: ENA takes them all.
	want := []string{"nic-channels", "nic-coalesce", "nic-gro", "nic-irq-affinity", "nic-link-up",
		"nic-qdisc", "nic-rps", "nic-spread", "nic-tx-push-buf", "nic-xps"}
	if got := slices.Sorted(maps.Keys(res)); !slices.Equal(got, want) {
		t.Errorf("steps run %q, want %q", got, want)
	}
	for name, r := range res {
		if r.Status != report.Applied {
			t.Errorf("%s: %s %s%s", name, r.Status, r.Reason, r.Error)
		}
	}
	if et.ch.CombinedCount != 2 || et.co.UseAdaptiveRxCoalesce != 1 || res["nic-coalesce"].Detail["mode"] != "adaptive-rx" {
		t.Errorf("channels %d adaptive %d", et.ch.CombinedCount, et.co.UseAdaptiveRxCoalesce)
	}
	if d := res["nic-tx-push-buf"].Detail; nl.pushLen != 224 || d["before"] != "96" || d["tx_push_buf_len"] != "224" {
		t.Errorf("push buffer %d, detail %v; want 224, read back", nl.pushLen, d)
	}
	if res["nic-qdisc"].Detail["changed"] != "no" {
		t.Errorf("qdisc already mq/noqueue was replaced: %v", res["nic-qdisc"].Detail)
	}
	for q := 0; q < 2; q++ {
		irq := irqs[fmt.Sprintf("eth0-Tx-Rx-%d", q)]
		if got := ft.read(t, filepath.Join(ft.proc, "irq", fmt.Sprint(irq), "smp_affinity_list")); got != fmt.Sprint(q) {
			t.Errorf("eth0-Tx-Rx-%d affinity %s", q, got)
		}
		if got := ft.read(t, filepath.Join(ft.sys, "class/net/eth0/queues", fmt.Sprintf("rx-%d", q), "rps_cpus")); got != "0" {
			t.Errorf("rx-%d rps %s", q, got)
		}
	}
	if got := ft.read(t, filepath.Join(ft.proc, "irq", fmt.Sprint(irqs["ena-mgmnt@pci:0000:00:05.0"]), "smp_affinity_list")); got != "0-1" {
		t.Errorf("management IRQ affinity changed to %s", got)
	}

	// Static moderation when asked for.
	tu.Opt.Coalesce = "static"
	r := boot.RunOne(context.Background(), stepNamed(t, tu.Steps(), "nic-coalesce"))
	if r.Status != report.Applied || r.Detail["mode"] != "static" || et.co.RxCoalesceUsecs != 20 || et.co.UseAdaptiveRxCoalesce != 0 {
		t.Errorf("static coalesce: %+v, driver state %+v", r, et.co)
	}
}

func TestXPSMasks(t *testing.T) {
	for _, tc := range []struct {
		ncpu, nq int
		want     []string // xps_cpus per tx queue as the kernel would print them
	}{
		{2, 2, []string{"1", "2"}},
		{4, 4, []string{"1", "2", "4", "8"}},
		{8, 8, []string{"01", "02", "04", "08", "10", "20", "40", "80"}},
		{8, 4, []string{"11", "22", "44", "88"}}, // more CPUs than queues: CPU k uses queue k mod 4
		{2, 4, []string{"1", "2", "1", "2"}},     // more queues than CPUs: every queue keeps a CPU
		{64, 64, nil},
	} {
		t.Run(fmt.Sprintf("%dcpu-%dq", tc.ncpu, tc.nq), func(t *testing.T) {
			ft := newTree(t)
			ft.addNIC(t, "eth0", 2, "virtio0", "virtio_net", tc.nq, false)
			cpus := make([]int, tc.ncpu)
			for i := range cpus {
				cpus[i] = i
			}
			tu := &Tuner{SysRoot: ft.sys, ProcRoot: ft.proc, Link: Link{Name: "eth0", Driver: "virtio_net", Device: "virtio0"},
				CPUs: cpus, NrCPUs: tc.ncpu, Opt: defaultOpts()}
			r := boot.RunOne(context.Background(), boot.Step{Name: "xps", Apply: tu.applyXPS, Verify: tu.verifyXPS})
			if r.Status != report.Applied {
				t.Fatalf("xps: %+v", r)
			}
			for q := 0; q < tc.nq; q++ {
				got := ft.read(t, filepath.Join(ft.sys, "class/net/eth0/queues", fmt.Sprintf("tx-%d", q), "xps_cpus"))
				want := ""
				if tc.want != nil {
					want = tc.want[q]
				} else { // 64 CPUs: one bit per queue, two comma-separated 32-bit words
					lo, hi := uint32(0), uint32(0)
					if q < 32 {
						lo = 1 << q
					} else {
						hi = 1 << (q - 32)
					}
					want = fmt.Sprintf("%08x,%08x", hi, lo)
				}
				if got != want {
					t.Errorf("tx-%d xps_cpus = %q, want %q", q, got, want)
				}
			}
		})
	}
}

// TestXPSVerifyAcceptsKernelWidth checks that a mask read back in the
// kernel's own width (nr_cpu_ids) verifies although written narrower.
func TestXPSVerifyAcceptsKernelWidth(t *testing.T) {
	ft := newTree(t)
	ft.addNIC(t, "eth0", 2, "virtio0", "virtio_net", 2, false)
	tu := &Tuner{SysRoot: ft.sys, Link: Link{Name: "eth0"}, CPUs: []int{32, 33}, NrCPUs: 64, Opt: defaultOpts()}
	ft.write(t, filepath.Join(ft.sys, "class/net/eth0/queues/tx-0/xps_cpus"), "00000001,00000000\n")
	ft.write(t, filepath.Join(ft.sys, "class/net/eth0/queues/tx-1/xps_cpus"), "2,00000000\n")
	if err := tu.verifyXPS(context.Background(), boot.Detail{}); err != nil {
		t.Errorf("verify: %v", err)
	}
	ft.write(t, filepath.Join(ft.sys, "class/net/eth0/queues/tx-1/xps_cpus"), "00000002,00000001\n")
	if err := tu.verifyXPS(context.Background(), boot.Detail{}); err == nil {
		t.Error("verify accepted an extra CPU")
	}
}

func TestMissingFilesSkip(t *testing.T) {
	ft := newTree(t)
	ft.addNIC(t, "eth0", 2, "virtio0", "virtio_net", 2, true) // no xps_cpus
	os.Remove(filepath.Join(ft.sys, "class/net/eth0/queues/rx-0/rps_cpus"))
	os.Remove(filepath.Join(ft.sys, "class/net/eth0/queues/rx-1/rps_cpus"))
	ft.interrupts(t, 2, "virtio0-config", "virtio0-virtqueues")
	et := &fakeEthtool{noChannelsGet: true, features: map[string]bool{"tx-checksum-ipv4": true}, noCoalesce: true}
	nl := &fakeNetlink{root: "noqueue", ntx: 1}
	tu := &Tuner{SysRoot: ft.sys, ProcRoot: ft.proc, Link: Link{Name: "eth0", Driver: "virtio_net", Device: "virtio0"},
		CPUs: []int{0, 1}, NrCPUs: 2, Ethtool: et, Netlink: nl, Opt: defaultOpts()}
	res := runSteps(t, tu)
	for name, sub := range map[string]string{
		"nic-channels": "does not report channels",
		"nic-gro":      "no rx-gro feature",
		"nic-xps":      "xps_cpus (kernel without CONFIG_XPS?)",
		"nic-rps":      "rps_cpus (kernel without CONFIG_RPS?)",
	} {
		if r := res[name]; r.Status != report.Skipped || !strings.Contains(r.Reason, sub) {
			t.Errorf("%s: %s %q%s, want skipped with %q", name, r.Status, r.Reason, r.Error, sub)
		}
	}
	// The shared vector is placed on queue 0's CPU.
	if r := res["nic-irq-affinity"]; r.Status != report.Applied || r.Detail["mode"] != "single-vector" ||
		r.Detail["virtio0-virtqueues"] != "irq 25 -> cpu 0" {
		t.Errorf("nic-irq-affinity: %+v", r)
	}
	// Without a NIC the report still lists every NIC step, skipped.
	var names []string
	for _, s := range SkippedSteps("no NIC") {
		r := boot.RunOne(context.Background(), s)
		if r.Status != report.Skipped || r.Reason != "no NIC" {
			t.Errorf("SkippedSteps: %+v", r)
		}
		names = append(names, r.Name)
	}
	if want := []string{"nic-channels", "nic-tx-push-buf", "nic-spread", "nic-gro", "nic-link-up", "nic-coalesce",
		"nic-qdisc", "nic-irq-affinity", "nic-xps", "nic-rps"}; !slices.Equal(names, want) {
		t.Errorf("SkippedSteps %q, want %q", names, want)
	}
}

func stepNamed(t *testing.T, steps []boot.Step, name string) boot.Step {
	t.Helper()
	for _, s := range steps {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no step %s", name)
	return boot.Step{}
}

// TestSpread: 4 workload CPUs on 2 queues. rps keeps every CPU and steers
// queue q's flows to CPUs q and q+2; queues gives the workload CPUs 0-1
// and RPS stays off. Either way queue i's IRQ is on the i-th workload CPU
// and the XPS and RPS masks cover exactly the workload's CPUs.
func TestSpread(t *testing.T) {
	for _, tc := range []struct {
		spread   config.Spread
		cpus     []int
		nq       int
		mode     string
		workload string
		rps, xps []string
	}{
		{config.SpreadRPS, []int{0, 1, 2, 3}, 2, "rps", "0-3", []string{"5", "a"}, []string{"5", "a"}},
		{config.SpreadQueues, []int{0, 1, 2, 3}, 2, "queues", "0-1", []string{"0", "0"}, []string{"1", "2"}},
		{config.SpreadRPS, []int{2, 3}, 2, "queue-per-cpu", "2-3", []string{"0", "0"}, []string{"4", "8"}},
		{config.SpreadRPS, []int{0, 1, 2}, 1, "rps", "0-2", []string{"7"}, nil},
		{config.SpreadQueues, []int{0, 1, 2}, 1, "queues", "0", []string{"0"}, nil},
	} {
		t.Run(fmt.Sprintf("%s-%dcpu-%dq", tc.spread, len(tc.cpus), tc.nq), func(t *testing.T) {
			ft := newTree(t)
			ft.addNIC(t, "eth0", 2, "virtio0", "virtio_net", tc.nq, tc.nq == 1)
			var names []string
			for q := 0; q < tc.nq; q++ {
				names = append(names, fmt.Sprintf("virtio0-input.%d", q), fmt.Sprintf("virtio0-output.%d", q))
			}
			irqs := ft.interrupts(t, 4, names...)
			opt := defaultOpts()
			opt.Spread = tc.spread
			tu := &Tuner{SysRoot: ft.sys, ProcRoot: ft.proc, Link: Link{Name: "eth0", Driver: "virtio_net", Device: "virtio0"},
				CPUs: tc.cpus, NrCPUs: 4, Opt: opt}
			res := map[string]report.Step{}
			for _, name := range []string{"nic-spread", "nic-irq-affinity", "nic-xps", "nic-rps"} {
				res[name] = boot.RunOne(context.Background(), stepNamed(t, tu.Steps(), name))
			}
			if m := res["nic-spread"].Detail["mode"]; m != tc.mode {
				t.Errorf("spread mode %q, want %q (%+v)", m, tc.mode, res["nic-spread"])
			}
			if got := cpuset.FormatList(tu.WorkloadCPUs()); got != tc.workload {
				t.Errorf("workload cpus %s, want %s", got, tc.workload)
			}
			// Each step applied (RPS too where it only clears the masks,
			// which a skip would leave as they were), but XPS on one tx
			// queue, checked below.
			for name, r := range res {
				if r.Status != report.Applied && !(name == "nic-xps" && tc.nq == 1) {
					t.Errorf("%s: %s %s%s, want applied", name, r.Status, r.Reason, r.Error)
				}
			}
			for q := 0; q < tc.nq; q++ {
				if got := ft.read(t, filepath.Join(ft.sys, "class/net/eth0/queues", fmt.Sprintf("rx-%d", q), "rps_cpus")); got != tc.rps[q] {
					t.Errorf("rx-%d rps_cpus %s, want %s", q, got, tc.rps[q])
				}
				irq := irqs[fmt.Sprintf("virtio0-input.%d", q)]
				if got := ft.read(t, filepath.Join(ft.proc, "irq", fmt.Sprint(irq), "smp_affinity_list")); got != fmt.Sprint(tu.WorkloadCPUs()[q]) {
					t.Errorf("input.%d affinity %s, want %d", q, got, tu.WorkloadCPUs()[q])
				}
				if tc.xps != nil {
					if got := ft.read(t, filepath.Join(ft.sys, "class/net/eth0/queues", fmt.Sprintf("tx-%d", q), "xps_cpus")); got != tc.xps[q] {
						t.Errorf("tx-%d xps_cpus %s, want %s", q, got, tc.xps[q])
					}
				}
			}
			if tc.nq == 1 {
				if r := res["nic-xps"]; r.Status != report.Skipped || !strings.Contains(r.Reason, "single tx queue") {
					t.Errorf("xps on one queue: %+v, want skipped", r)
				}
			}
		})
	}
}

func TestRoundsTo(t *testing.T) {
	for _, tc := range []struct {
		want, got uint32
		ok        bool
	}{
		{20, 20, true}, {0, 0, true}, {64, 64, true},
		{20, 16, true},  // resolution 8 (or 16)
		{20, 18, true},  // resolution 2, 3, 6, 9 or 18
		{21, 20, true},  // resolution 2 ... 20
		{64, 60, true},  // resolution 4 ... 60
		{20, 0, false},  // rounded to nothing: moderation off
		{20, 10, false}, // 10 would leave 20 exactly
		{20, 8, false},  // remainder 12 is not below any divisor of 8
		{20, 24, false}, // rounded up: not a truncating device
	} {
		if got := RoundsTo(tc.want, tc.got); got != tc.ok {
			t.Errorf("RoundsTo(%d, %d) = %v, want %v", tc.want, tc.got, got, tc.ok)
		}
	}
}

// roundingEthtool reports usecs rounded down to res (ENA's
// intr_delay_resolution) and, like ENA at open since Linux 6.9, may turn
// adaptive moderation back on behind the init's back.
type roundingEthtool struct {
	fakeEthtool
	res        uint32
	keepDIMOff bool
	forceDIMOn bool
	// noStatic refuses usecs moderation with EOPNOTSUPP, as virtio_net
	// does without VIRTIO_NET_F_NOTF_COAL (virtnet_coal_params_supported).
	noStatic bool
	// rxOnly refuses anything but rx-usecs with EOPNOTSUPP, as the kernel
	// does for e1000e (supported_coalesce_params RX_USECS only).
	rxOnly bool
}

func (r *roundingEthtool) SetCoalesce(n string, c ethtool.Coalesce) (ethtool.Coalesce, error) {
	if r.noStatic && (c.RxCoalesceUsecs != 0 || c.TxCoalesceUsecs != 0) {
		return ethtool.Coalesce{}, unix.EOPNOTSUPP
	}
	if r.rxOnly && (c.TxCoalesceUsecs != 0 || c.UseAdaptiveRxCoalesce != 0) {
		return ethtool.Coalesce{}, unix.EOPNOTSUPP
	}
	c.RxCoalesceUsecs = c.RxCoalesceUsecs / r.res * r.res
	c.TxCoalesceUsecs = c.TxCoalesceUsecs / r.res * r.res
	if r.forceDIMOn {
		c.UseAdaptiveRxCoalesce = 1
	}
	if r.keepDIMOff {
		c.UseAdaptiveRxCoalesce = 0
	}
	return r.fakeEthtool.SetCoalesce(n, c)
}

func TestCoalesceVerify(t *testing.T) {
	for _, tc := range []struct {
		name, mode string
		res        uint32
		rx, tx     int
		forceOn    bool
		keepOff    bool
		noStatic   bool
		status     report.Status
		detail     string
		rxOnly     bool
	}{
		{"static exact", "static", 1, 20, 64, false, false, false, report.Applied, "", false},
		{"static rounded", "static", 8, 20, 64, false, false, false, report.Applied, "20 -> 16", false},
		{"static rounded to zero", "static", 32, 20, 64, false, false, false, report.Failed, "rx-usecs reads 0", false},
		{"static reverted to adaptive", "static", 1, 20, 64, true, false, false, report.Failed, "adaptive-rx reads 1", false},
		{"adaptive", "adaptive", 1, 20, 64, false, false, false, report.Applied, "adaptive-rx", false},
		// A driver that accepts adaptive RX and does not keep it: static.
		{"adaptive not kept", "adaptive", 1, 20, 64, false, true, false, report.Applied, "adaptive_rx:unsupported: accepted, reads 0 afterwards mode:static", false},
		// virtio_net on Linux 6.12 without VIRTIO_NET_F_NOTF_COAL: adaptive
		// accepted and dropped, static refused.
		{"virtio 6.12", "adaptive", 1, 20, 64, false, true, true, report.Skipped, "", false},
		// e1000e: no adaptive RX, rx-usecs only: receive moderated, tx
		// refused and said.
		{"e1000e rx only", "adaptive", 1, 20, 64, false, false, false, report.Applied, "mode:static-rx rx_usecs:20 tx_usecs:0 tx_usecs_refused:driver ena moderates receive only", true},
		{"e1000e rx only, static", "static", 1, 20, 64, false, false, false, report.Applied, "mode:static-rx rx_usecs:20", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			et := &roundingEthtool{fakeEthtool: fakeEthtool{}, res: tc.res, forceDIMOn: tc.forceOn, keepDIMOff: tc.keepOff, noStatic: tc.noStatic, rxOnly: tc.rxOnly}
			opt := defaultOpts()
			opt.Coalesce, opt.RxUsecs, opt.TxUsecs = config.Coalesce(tc.mode), tc.rx, tc.tx
			tu := &Tuner{Link: Link{Name: "eth0", Driver: "ena"}, Ethtool: et, Opt: opt}
			r := boot.RunOne(context.Background(), stepNamed(t, tu.Steps(), "nic-coalesce"))
			if r.Status != tc.status {
				t.Fatalf("%+v, want %s", r, tc.status)
			}
			all := r.Error + r.Reason + fmt.Sprint(r.Detail)
			if tc.status == report.Skipped && !strings.Contains(r.Reason, "neither adaptive RX nor static") {
				t.Errorf("reason %q", r.Reason)
			}
			if !strings.Contains(all, tc.detail) {
				t.Errorf("%+v lacks %q", r, tc.detail)
			}
		})
	}
}

// TestCoalesceAfterLinkUp: moderation is set after the link is up (a
// driver resets it at open), and a link change re-applies it.
func TestCoalesceAfterLinkUp(t *testing.T) {
	tu := &Tuner{}
	var order []string
	for _, s := range tu.Steps() {
		order = append(order, s.Name)
	}
	if strings.Index(strings.Join(order, ","), "nic-link-up") > strings.Index(strings.Join(order, ","), "nic-coalesce") {
		t.Errorf("step order %v: coalesce before link-up", order)
	}
	var re []string
	for _, s := range tu.ReapplySteps() {
		re = append(re, s.Name)
	}
	for _, want := range []string{"nic-coalesce", "nic-irq-affinity", "nic-xps", "nic-rps"} {
		if !slices.Contains(re, want) {
			t.Errorf("ReapplySteps %v lacks %s", re, want)
		}
	}
	if slices.Contains(re, "nic-channels") {
		t.Errorf("ReapplySteps %v would change the queue count under the workload", re)
	}
}

func TestQueueCPUs(t *testing.T) {
	if got := cpuset.FormatList(QueueCPUs(1, 2, []int{0, 2, 4, 6})); got != "2,6" {
		t.Errorf("QueueCPUs(1, 2, 0,2,4,6) = %s", got)
	}
}
