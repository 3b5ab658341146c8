package nic

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/report"
)

// i219Interrupts is /proc/interrupts of a rented server with an Intel I219-LM
// (e1000e, PCI 0000:00:1f.6, named eno1) as Linux 6.12 prints it on x86
// (kernel/irq/proc.c show_interrupts: the online CPUs' header, "%10u" counts,
// the per-device MSI domain's chip name "PCI-MSI-<bdf>" (with interrupt
// remapping "IR-PCI-MSI-<bdf>"), the hwirq, which is the MSI index, with the
// flow handler "-edge", then the actions). The I219 has no MSI-X
// (FLAG_HAS_MSIX is the 82574's only): e1000_request_irq asks for its single
// MSI vector under netdev->name. The NVMe and AHCI vectors are other
// devices'; irq 16 is the INTx line the I219 would share with the SMBus
// controller under pci=nomsi.
const i219Interrupts = `            CPU0       CPU1       CPU2       CPU3       
   0:         36          0          0          0   IO-APIC   2-edge      timer
   8:          0          0          0          0   IO-APIC   8-edge      rtc0
   9:          0          4          0          0   IO-APIC   9-fasteoi   acpi
  16:          0          0          0          0   IO-APIC  16-fasteoi   i801_smbus
 120:          0          0          0          0  PCI-MSI-0000:00:17.0    0-edge      ahci[0000:00:17.0]
 121:      48213          0          0          0  PCI-MSI-0000:00:1f.6    0-edge      eno1
 122:         29          0          0          0  PCI-MSIX-0000:01:00.0    0-edge      nvme0q0
 123:       1410          0          0          0  PCI-MSIX-0000:01:00.0    1-edge      nvme0q1
 NMI:          0          0          0          0   Non-maskable interrupts
 LOC:      21034      19877      20411      19003   Local timer interrupts
 ERR:          0
 MIS:          0
`

// addI219 builds eno1's sysfs as the kernel shows an I219: the PCI function
// with one MSI vector in msi_irqs/ (the file holds "msi"), e1000e as its
// driver, one rx and one tx queue, and /proc/irq/N/smp_affinity_list at
// the default (every CPU).
func addI219(t *testing.T, ft *fakeTree, interrupts string, msi ...int) {
	t.Helper()
	ft.write(t, filepath.Join(ft.proc, "interrupts"), interrupts)
	ft.addPCI(t, "eno1", "0000:00:1f.6", "", "e1000e")
	for _, irq := range msi {
		ft.write(t, filepath.Join(ft.sys, "devices/pci0000:00/0000:00:1f.6/msi_irqs", strconv.Itoa(irq)), "msi\n")
	}
	dir := filepath.Join(ft.sys, "class/net/eno1")
	ft.write(t, filepath.Join(dir, "ifindex"), "2\n")
	ft.write(t, filepath.Join(dir, "queues/rx-0/rps_cpus"), "0\n")
	ft.write(t, filepath.Join(dir, "queues/tx-0/xps_cpus"), "0\n")
	for _, irq := range []int{16, 121} {
		ft.write(t, filepath.Join(ft.proc, "irq", strconv.Itoa(irq), "smp_affinity_list"), "0-3\n")
	}
}

func irqStep(t *testing.T, tu *Tuner) report.Step {
	t.Helper()
	return boot.RunOne(context.Background(), stepNamed(t, tu.Steps(), "nic-irq-affinity"))
}

// TestSingleVectorI219: the I219's one MSI vector, named after the
// interface, is put on queue 0's CPU (the first workload CPU), read back
// and reported; before, no queue naming matched it and the step was
// skipped.
func TestSingleVectorI219(t *testing.T) {
	for _, variant := range []struct{ name, text string }{
		{"6.12", i219Interrupts},
		{"interrupt remapping", strings.ReplaceAll(i219Interrupts, "PCI-MSI-", "IR-PCI-MSI-")},
		// Before per-device MSI domains (Linux 6.1): one "PCI-MSI" chip,
		// the hwirq a global number.
		{"6.1", strings.Replace(i219Interrupts, "PCI-MSI-0000:00:1f.6    0-edge", "IR-PCI-MSI 520192-edge", 1)},
	} {
		t.Run(variant.name, func(t *testing.T) {
			ft := newTree(t)
			addI219(t, ft, variant.text, 121)
			l, err := Discover(ft.sys, "")
			if err != nil || l.Name != "eno1" || l.Driver != "e1000e" || l.PCI != "0000:00:1f.6" {
				t.Fatalf("Discover = %+v, %v", l, err)
			}
			tu := &Tuner{SysRoot: ft.sys, ProcRoot: ft.proc, Link: l, CPUs: []int{1, 2, 3}, NrCPUs: 4, Opt: defaultOpts()}
			r := irqStep(t, tu)
			if r.Status != report.Applied || r.Detail["mode"] != "single-vector" || r.Detail["eno1"] != "irq 121 -> cpu 1" {
				t.Fatalf("nic-irq-affinity = %+v", r)
			}
			if got := ft.read(t, filepath.Join(ft.proc, "irq/121/smp_affinity_list")); got != "1" {
				t.Errorf("irq 121 affinity %q, want 1", got)
			}
			if got := ft.read(t, filepath.Join(ft.proc, "irq/16/smp_affinity_list")); got != "0-3" {
				t.Errorf("irq 16 (another device's) touched: %q", got)
			}
			// The read-back catches a change behind the step's back.
			ft.write(t, filepath.Join(ft.proc, "irq/121/smp_affinity_list"), "0-3\n")
			if err := stepNamed(t, tu.Steps(), "nic-irq-affinity").Verify(context.Background(), boot.Detail{}); err == nil {
				t.Error("verify passed with the affinity reset to 0-3")
			}
		})
	}
}

// TestSingleVectorLegacyLine: an I219 without MSI (pci=nomsi) gets an
// INTx line. Alone on it, it is placed like the MSI vector; shared with
// another device's handler, moving it would move that device too: the
// step is skipped and says why.
func TestSingleVectorLegacyLine(t *testing.T) {
	alone := strings.Replace(i219Interrupts, " 121:      48213          0          0          0  PCI-MSI-0000:00:1f.6    0-edge      eno1\n", "", 1)
	alone = strings.Replace(alone, "i801_smbus", "eno1", 1)
	shared := strings.Replace(alone, "   eno1", "   i801_smbus, eno1", 1)
	for _, tc := range []struct {
		name, text string
		status     report.Status
		want       string
	}{
		{"alone", alone, report.Applied, "irq 16 -> cpu 1"},
		{"shared", shared, report.Skipped, "irq 16, is a line shared with other handlers (i801_smbus, eno1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := newTree(t)
			addI219(t, ft, tc.text) // no msi_irqs/: legacy INTx
			l, _ := Discover(ft.sys, "eno1")
			tu := &Tuner{SysRoot: ft.sys, ProcRoot: ft.proc, Link: l, CPUs: []int{1, 2, 3}, NrCPUs: 4, Opt: defaultOpts()}
			r := irqStep(t, tu)
			if r.Status != tc.status || !strings.Contains(r.Detail["eno1"]+r.Reason, tc.want) {
				t.Fatalf("nic-irq-affinity = %+v, want %s with %q", r, tc.status, tc.want)
			}
			want := map[report.Status]string{report.Applied: "1", report.Skipped: "0-3"}[tc.status]
			if got := ft.read(t, filepath.Join(ft.proc, "irq/16/smp_affinity_list")); got != want {
				t.Errorf("irq 16 affinity %q, want %q", got, want)
			}
		})
	}
}

// TestSingleVectorNotLinkVector: an 82574 in MSI-X mode (QEMU's e1000e)
// also has a vector named after the interface, its link vector: with
// queue vectors present it is never taken for one.
func TestSingleVectorNotLinkVector(t *testing.T) {
	ft := newTree(t)
	ft.write(t, filepath.Join(ft.proc, "interrupts"), physInterrupts)
	ft.addPCI(t, "eth0", "0000:00:02.0", "", "e1000e", 24, 25, 26)
	l, _ := Discover(ft.sys, "eth0")
	irqs, err := DeviceQueueIRQs(ft.sys, ft.proc, l)
	if err != nil || len(irqs) != 2 || irqs[0].Shared || irqs[1].Shared {
		t.Errorf("DeviceQueueIRQs = %+v, %v; want rx-0 and tx-0 only", irqs, err)
	}
}
