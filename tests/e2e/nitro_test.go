package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/image"
	"github.com/hotpath-dev/hotpath/init/pstore"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/inspector"
	"github.com/hotpath-dev/hotpath/tests/vm"
)

// TestNitroNVMeNUMA boots the inspector image the way a two-socket Nitro
// instance presents itself, in one boot: the disk is an NVMe controller
// (OVMF reads the ESP from it; there is no virtio-blk), the guest has two
// NUMA nodes (vCPUs 0-1 and 2-3) and the NIC hangs off node 1 behind a
// pxb-pcie bridge, with 2 queues for 4 vCPUs. QEMU's own view of the PCI
// tree (query-pci) is the independent check of where the disk and the
// NIC are; the inspector's reading of the guest (the nodes' CPUs, the
// NIC's PCI function's node, where each queue interrupt is delivered, the
// XPS and RPS masks, the workload threads' CPUs) is judged against the
// set-up alone (CheckNUMAPlacement); the report must say the same
// (checkNUMA), and say it as the inspector reads it.
func TestNitroNVMeNUMA(t *testing.T) {
	requireE2E(t)
	disk := buildImage(t, inspectorPkg)
	start := time.Now()
	setup := NUMASetup{Nodes: []string{"0-1", "2-3"}, NICNode: 1, Queues: 2}
	b := bootConfig(t, vm.Config{Disk: disk, CPUs: 4, Queues: setup.Queues, MemoryMB: 1024,
		Nitro: vm.Nitro{NVMe: true, NUMA: setup.Nodes, NICNode: setup.NICNode}}, 0)
	fmt.Fprintf(os.Stderr, "e2e: NVMe + 2 NUMA nodes, NIC on node 1: QEMU start to report %v, kernel start to ready %d ms\n",
		time.Since(start).Round(time.Millisecond), b.rep.ReadyMillis)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Run("pci", func(t *testing.T) {
		devs, err := queryPCI(ctx, b.QMP)
		if err != nil {
			t.Fatal(err)
		}
		reportErrs(t, checkNitroPCI(devs))
	})
	t.Run("placement", func(t *testing.T) {
		// Fresh connections: new source ports, which RSS spreads over both
		// rx queues, answered from whichever CPU serves them (XPS picks
		// the tx queue), so that every vector fires and the kernel
		// finishes moving it (Settled).
		client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: b.Netns.DialContext, DisableKeepAlives: true}}
		base := "http://" + net.JoinHostPort(b.Addr, b.port)
		traffic := func() {
			for range 8 {
				var m map[string]string
				if err := getJSON(ctx, client, base+"/json", &m); err != nil {
					t.Fatal(err)
				}
			}
		}
		read := func() *NUMAReading {
			var snap inspector.Snapshot
			if err := getJSON(ctx, client, base+"/inspect", &snap); err != nil {
				t.Fatal(err)
			}
			r, err := ReadNUMA(&snap)
			if err != nil {
				t.Fatalf("inspector: %v (errors %v)", err, snap.Errors)
			}
			return r
		}
		var r *NUMAReading
		deadline := time.Now().Add(30 * time.Second)
		for polls := 1; ; polls++ {
			r = read()
			if r.Settled() || time.Now().After(deadline) {
				t.Logf("inspector, read %d times (settled: %v): nodes %v, NIC %s (%s, %s) on node %d, IRQs %+v, XPS %v, RPS %v, threads %v",
					polls, r.Settled(), r.Nodes, r.NIC, r.PCI, r.Virtio, r.NICNode, r.IRQs, r.XPS, r.RPS, r.Threads)
				break
			}
			t.Logf("inspector: a vector not yet moved: %+v", r.IRQs)
			traffic()
		}
		reportErrs(t, CheckNUMAPlacement(setup, r))
		reportErrs(t, DiffNUMA(b.rep, r))
		// Where the interrupts are really taken: the per-CPU counts of
		// /proc/interrupts grow only on each queue's CPU.
		traffic()
		after := read()
		for _, q := range after.IRQs {
			t.Logf("%s counts per CPU %v", q.Name, q.Counts)
		}
		reportErrs(t, CheckDelivered(setup, r, after))
	})
	t.Run("report", func(t *testing.T) { reportErrs(t, checkNUMA(b.rep, setup.Nodes, setup.NICNode)) })
	t.Run("http", func(t *testing.T) {
		if err := CheckGet(ctx, b.dial, JSON); err != nil {
			t.Error(err)
		}
	})
}

// checkNUMA checks the report of a guest with the given nodes and the
// NIC on nicNode, 2 queues on 4 CPUs: both nodes, the NIC's node, and
// every queue interrupt on a CPU of the NIC's node, one queue per CPU
// there.
func checkNUMA(rep *report.Report, nodes []string, nicNode int) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if st, ok := rep.Step("numa-locality"); !ok || st.Status != report.Applied {
		bad("step numa-locality: %+v, want applied", st)
	}
	n := rep.NUMA
	if n == nil {
		return append(errs, fmt.Errorf("report without numa"))
	}
	var got []string
	for _, nd := range n.Nodes {
		got = append(got, nd.CPUs)
	}
	if !slices.Equal(got, nodes) {
		bad("report nodes %v, want %v", got, nodes)
	}
	if n.NICNode != nicNode {
		bad("report NIC node %d, want %d", n.NICNode, nicNode)
	}
	local := map[string]bool{}
	for _, c := range strings.Split(cpuListExpand(nodes[nicNode]), ",") {
		local[c] = true
	}
	nic := rep.Facts.NIC
	if nic == nil || len(nic.IRQs) == 0 {
		return append(errs, fmt.Errorf("no NIC interrupts reported: %+v", nic))
	}
	owner := map[int]string{}
	for _, irq := range nic.IRQs {
		if !local[irq.Affinity] {
			bad("IRQ %d (%s, queue %d) on CPU %q, not on node %d (%s)", irq.IRQ, irq.Name, irq.Queue, irq.Affinity, nicNode, nodes[nicNode])
		}
		if o, ok := owner[irq.Queue]; ok && o != irq.Affinity {
			bad("queue %d's interrupts on CPUs %s and %s", irq.Queue, o, irq.Affinity)
		}
		owner[irq.Queue] = irq.Affinity
	}
	if len(owner) != 2 || owner[0] == owner[1] {
		bad("queues' CPUs %v, want queue 0 and 1 on two different CPUs of node %d", owner, nicNode)
	}
	if rep.Workload == nil || rep.Workload.CPUs != "0-3" {
		bad("workload CPUs %+v, want 0-3 (nic.spread=rps keeps every CPU)", rep.Workload)
	}
	return errs
}

// cpuListExpand expands "2-3" to "2,3" (single ranges, as the rigs use).
func cpuListExpand(s string) string {
	lo, hi, ok := strings.Cut(s, "-")
	if !ok {
		return s
	}
	var a, z int
	fmt.Sscan(lo, &a)
	fmt.Sscan(hi, &z)
	var out []string
	for c := a; c <= z; c++ {
		out = append(out, fmt.Sprint(c))
	}
	return strings.Join(out, ",")
}

// pciDev is one device of QEMU's query-pci.
type pciDev struct {
	Bus, Slot      int
	Class          int
	Vendor, Device int
}

// queryPCI lists every PCI device QEMU emulates, behind bridges too.
func queryPCI(ctx context.Context, q *vm.QMP) ([]pciDev, error) {
	raw, err := q.Execute(ctx, "query-pci", nil)
	if err != nil {
		return nil, err
	}
	type dev struct {
		Bus       int `json:"bus"`
		Slot      int `json:"slot"`
		ClassInfo struct {
			Class int `json:"class"`
		} `json:"class_info"`
		ID struct {
			Vendor int `json:"vendor"`
			Device int `json:"device"`
		} `json:"id"`
		Bridge *struct {
			Devices json.RawMessage `json:"devices"`
		} `json:"pci_bridge"`
	}
	var out []pciDev
	var walk func(json.RawMessage) error
	walk = func(m json.RawMessage) error {
		var devs []dev
		if err := json.Unmarshal(m, &devs); err != nil {
			return err
		}
		for _, d := range devs {
			out = append(out, pciDev{Bus: d.Bus, Slot: d.Slot, Class: d.ClassInfo.Class, Vendor: d.ID.Vendor, Device: d.ID.Device})
			if d.Bridge != nil && len(d.Bridge.Devices) > 0 {
				if err := walk(d.Bridge.Devices); err != nil {
					return err
				}
			}
		}
		return nil
	}
	var buses []struct {
		Bus     int             `json:"bus"`
		Devices json.RawMessage `json:"devices"`
	}
	if err := json.Unmarshal(raw, &buses); err != nil {
		return nil, fmt.Errorf("query-pci: %w", err)
	}
	for _, b := range buses {
		if err := walk(b.Devices); err != nil {
			return nil, fmt.Errorf("query-pci bus %d: %w", b.Bus, err)
		}
	}
	return out, nil
}

// checkNitroPCI: an NVMe controller and no virtio-blk; the virtio-net
// NIC on a bus behind the pxb-pcie (bus_nr 128), not on the main root.
func checkNitroPCI(devs []pciDev) []error {
	var errs []error
	nvme, nic := false, false
	for _, d := range devs {
		switch {
		case d.Class == 0x0108:
			nvme = true
		case d.Vendor == 0x1af4 && (d.Device == 0x1001 || d.Device == 0x1042):
			errs = append(errs, fmt.Errorf("a virtio-blk device on bus %d: the disk must be NVMe only", d.Bus))
		case d.Vendor == 0x1af4 && (d.Device == 0x1000 || d.Device == 0x1041):
			nic = true
			if d.Bus < 128 {
				errs = append(errs, fmt.Errorf("virtio-net on bus %d, want behind the node-1 pxb-pcie (bus 128 on)", d.Bus))
			}
		}
	}
	if !nvme {
		errs = append(errs, fmt.Errorf("no NVMe controller in query-pci: %+v", devs))
	}
	if !nic {
		errs = append(errs, fmt.Errorf("no virtio-net in query-pci: %+v", devs))
	}
	return errs
}

// TestArm64Graviton builds the default arm64 image and boots it as
// Graviton presents itself (checkGraviton). It runs with the arm64 boots
// (make test-arm64).
func TestArm64Graviton(t *testing.T) {
	requireArm64(t)
	checkGraviton(t, buildWith(t, image.Options{Arch: "arm64"}).Disk)
}

// checkGraviton boots an arm64 image as Graviton presents itself, in one
// boot: the PL011 connected to nothing, the console a PCI 16550 whose
// output QEMU writes to a file (the harness's Console follows that file,
// so the report below came through it), -cpu neoverse-n1 (no RNDR) and no
// virtio-rng. The report and /json must both arrive, the DHCP lease
// too, and the report must say when the CRNG became ready (or the
// crng-ready event must follow it).
func checkGraviton(t *testing.T, disk string) {
	start := time.Now()
	b := bootConfig(t, vm.Config{Disk: disk, CPUs: 2, Arch: "arm64", Accel: "tcg", CPUModel: "neoverse-n1",
		Nitro: vm.Nitro{PCISerial: true, SerialNull: true, NoRNG: true}}, arm64BootTimeout)
	wall := time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t.Run("pci-uart", func(t *testing.T) {
		raw, err := os.ReadFile(filepath.Join(b.Dir, vm.PCISerialLog))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"Linux version", report.ReportPrefix} {
			if !strings.Contains(string(raw), want) {
				t.Errorf("the PCI UART's file lacks %q", want)
			}
		}
		if s := b.Serial0.String(); s != "" {
			t.Errorf("the PL011 is on -serial null, yet stdout got %d bytes", len(s))
		}
	})
	t.Run("lease", func(t *testing.T) {
		if st, _ := b.rep.Step("net-dhcp"); st.Status != report.Applied {
			t.Errorf("net-dhcp %s: %s", st.Status, st.Error)
		}
	})
	t.Run("http", func(t *testing.T) {
		if err := CheckGet(ctx, b.dial, JSON); err != nil {
			t.Error(err)
		}
	})
	crng := "none"
	t.Run("crng", func(t *testing.T) {
		c := b.rep.CRNG
		if c == nil {
			t.Fatal("report without crng")
		}
		crng = fmt.Sprintf("ready at init %v, ready_ms %d", c.ReadyAtInit, c.ReadyMillis)
		if c.ReadyMillis >= 0 {
			return
		}
		ev, _, err := b.Console.WaitEvent(ctx, 0, report.EventCRNGReady)
		if err != nil {
			t.Fatalf("CRNG not ready at report time and no crng-ready event: %v", err)
		}
		crng += fmt.Sprintf(", crng-ready event at %d ms", ev.Millis)
	})
	dhcp, _ := b.rep.Step("net-dhcp")
	fmt.Fprintf(os.Stderr, "e2e: arm64 Graviton-like (PCI UART, -serial null, neoverse-n1, no virtio-rng): "+
		"QEMU start to report %v, kernel start to ready %d ms, net-dhcp %.0f ms, crng: %s\n",
		wall.Round(time.Millisecond), b.rep.ReadyMillis, dhcp.Millis, crng)
}

// checkPreviousBoot checks the report of the boot after a panic: it
// names the panic, and its last kernel lines are lines the crashed boot
// really printed (panicConsole: the console up to the reset); the same
// summary and lines are on the second boot's console (console: from the
// reset on).
func checkPreviousBoot(rep *report.Report, panicConsole, console string) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	pb := rep.PreviousBoot
	if pb == nil {
		return []error{fmt.Errorf("second boot's report has no previous_boot")}
	}
	const headline = "Kernel panic - not syncing: sysrq triggered crash"
	if !pb.Crashed || pb.Reason != "panic" || !strings.Contains(pb.Summary, "previous boot: panic, "+headline) {
		bad("previous_boot %+v, want the sysrq panic", pb)
	}
	if !pb.Cleared || pb.Records == 0 || pb.Backend != "efi_pstore" {
		bad("previous_boot: %d records from %q, cleared %v", pb.Records, pb.Backend, pb.Cleared)
	}
	if !slices.ContainsFunc(pb.Lines, func(l string) bool { return strings.Contains(l, headline) }) {
		bad("previous_boot lines lack the panic line: %q", pb.Lines)
	}
	// "[   41.2] msg": the crashed boot's console printed msg (with the
	// same time stamp, unless it was one of the init's own lines, which it
	// prints on the console itself and copies to /dev/kmsg). From the
	// panic's first line on, every line; before it, the kernel's
	// informational lines printed while the init wrote its report were
	// kept off the console (init/console.Hold lowers the console's log
	// level meanwhile; the kernel log keeps them): at most 3 of those.
	crash := slices.IndexFunc(pb.Lines, func(l string) bool { return strings.Contains(l, headline) })
	var held []string
	for i, l := range pb.Lines {
		msg := l
		if i := strings.Index(l, "] "); strings.HasPrefix(l, "[") && i > 0 {
			msg = l[i+2:]
		}
		switch {
		case strings.Contains(panicConsole, msg):
		case crash >= 0 && i < crash:
			held = append(held, l)
		default:
			bad("previous_boot line %q is not on the crashed boot's console", l)
		}
	}
	if len(held) > 3 {
		bad("previous_boot lines %q before the panic are not on the crashed boot's console (at most 3 held back by the init's console hold)", held)
	}
	if !strings.Contains(console, pb.Summary) {
		bad("second boot's console lacks %q", pb.Summary)
	}
	if !strings.Contains(console, pstore.ConsolePrefix) || !strings.Contains(console, headline) {
		bad("second boot's console lacks the previous boot's lines (%q)", pstore.ConsolePrefix)
	}
	return errs
}

// checkPanicCaptured checks crash capture around TestInitPanicReboots's
// panic: the boot before it had a pstore backend and nothing to report;
// the boot after it (whose kernel starts after offset at, the panic's
// line) reports the
// panic, as checkPreviousBoot says.
func checkPanicCaptured(ctx context.Context, t *testing.T, b *booted, at int) {
	if st, _ := b.rep.Step("previous-boot"); st.Status != report.Applied || st.Detail["backend"] != "efi_pstore" {
		t.Errorf("first boot: step previous-boot %+v, want applied with backend efi_pstore", st)
	}
	if pb := b.rep.PreviousBoot; pb == nil || pb.Crashed {
		t.Errorf("first boot: previous_boot %+v, want no crash", pb)
	}
	reboot, err := b.Console.WaitString(ctx, at, "Linux version")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := waitReportSince(ctx, b.Console, reboot)
	if err != nil {
		t.Fatalf("no report from the boot after the panic: %v", err)
	}
	out := b.Console.String()
	reportErrs(t, checkPreviousBoot(rep, out[:reboot], out[reboot:]))
	// The management endpoint's metrics say so too.
	body, err := b.metrics()
	if want := `hotpath_previous_boot_crashed{reason="panic"} 1`; err != nil || !strings.Contains(body, want) {
		t.Errorf("/metrics after the panic lacks %q (%v)", want, err)
	}
	if rep.PreviousBoot != nil {
		fmt.Fprintf(os.Stderr, "e2e: after the panic: %s (%d pstore records, %d lines in the report)\n",
			rep.PreviousBoot.Summary, rep.PreviousBoot.Records, len(rep.PreviousBoot.Lines))
	}
}

// waitReportSince waits for a boot report after offset since.
func waitReportSince(ctx context.Context, c *vm.Console, since int) (*report.Report, error) {
	end, err := c.WaitString(ctx, since, report.ReportPrefix)
	if err != nil {
		return nil, err
	}
	reps, _, err := report.Parse(strings.NewReader(c.String()[since:end]))
	if err != nil {
		return nil, err
	}
	if len(reps) == 0 {
		return nil, fmt.Errorf("no report parsed between %d and %d", since, end)
	}
	return &reps[0], nil
}
