package nic

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// /proc/interrupts as Linux 6.1 prints it on arm64 (kernel/irq/proc.c with
// GENERIC_IRQ_SHOW_LEVEL, which arm64 selects): chip name, hwirq, a
// Level/Edge column, then the actions. The MSI-X vectors of PCI devices
// come from the GICv3 ITS (ITS-MSI, Graviton and QEMU virt with
// gic-version=3) or from GICv2m (GICv2m-PCI-MSI, virt with a GICv2); the
// ACPI power button arrives as the Generic Event Device's GIC interrupt.
// The IPI lines have names with spaces and no number.
const arm64Interrupts = `           CPU0       CPU1       CPU2       CPU3       
 11:      18443      17120      16804      17355     GICv3  27 Level     arch_timer
 13:        412          0          0          0     GICv3  33 Level     uart-pl011
 14:          0          0          0          0     GICv3  39 Edge      ACPI:Ged
 15:          0          0          0          0     GICv3  23 Level     arm-pmu
 16:          0          0          0          0   ITS-MSI 16384 Edge      virtio0-config
 17:        310          0          0          0   ITS-MSI 16385 Edge      virtio0-input.0
 18:          2          0          0          0   ITS-MSI 16386 Edge      virtio0-output.0
 19:          0        287          0          0   ITS-MSI 16387 Edge      virtio0-input.1
 20:          0          1          0          0   ITS-MSI 16388 Edge      virtio0-output.1
 21:          0          0        301          0   ITS-MSI 16389 Edge      virtio0-input.2
 22:          0          0          3          0   ITS-MSI 16390 Edge      virtio0-output.2
 23:          0          0          0        296   ITS-MSI 16391 Edge      virtio0-input.3
 24:          0          0          0          2   ITS-MSI 16392 Edge      virtio0-output.3
 25:         40          0          0          0   ITS-MSI 524288 Edge      ena-mgmnt@pci:0000:00:05.0
 26:       1022          0          0          0   ITS-MSI 524289 Edge      eth1-Tx-Rx-0
 27:          0        998          0          0   ITS-MSI 524290 Edge      eth1-Tx-Rx-1
 28:          0          0          0          0 GICv2m-PCI-MSI 32768 Edge      virtio1-virtqueues
 29:          0          0          0          0   ITS-MSI 16393 Edge    
IPI0:       2210       2561       2406       2385       Rescheduling interrupts
IPI1:         80        119        102         97       Function call interrupts
IPI2:          0          0          0          0       CPU stop interrupts
IPI5:          0          0          0          0       IRQ work interrupts
IPI6:          0          0          0          0       CPU wake-up interrupts
Err:          0
`

func TestQueueIRQsArm64(t *testing.T) {
	ints, err := ParseInterrupts(strings.NewReader(arm64Interrupts))
	if err != nil {
		t.Fatal(err)
	}
	if len(ints) != 19 || ints[0].IRQ != 11 || ints[2].Names[0] != "ACPI:Ged" {
		t.Fatalf("ParseInterrupts: %d lines, first %+v", len(ints), ints[:3])
	}
	proc := t.TempDir()
	if err := os.WriteFile(filepath.Join(proc, "interrupts"), []byte(arm64Interrupts), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		link Link
		want []QueueIRQ
		err  string
	}{
		{Link{Name: "eth0", Driver: "virtio_net", Device: "virtio0"}, []QueueIRQ{
			{17, "virtio0-input.0", 0, false}, {18, "virtio0-output.0", 0, false}, {19, "virtio0-input.1", 1, false}, {20, "virtio0-output.1", 1, false},
			{21, "virtio0-input.2", 2, false}, {22, "virtio0-output.2", 2, false}, {23, "virtio0-input.3", 3, false}, {24, "virtio0-output.3", 3, false},
		}, ""},
		// ENA on Graviton: the admin vector is not a queue.
		{Link{Name: "eth1", Driver: "ena", Device: "0000:00:05.0"}, []QueueIRQ{
			{26, "eth1-Tx-Rx-0", 0, false}, {27, "eth1-Tx-Rx-1", 1, false},
		}, ""},
		// Too few vectors under GICv2m: the one shared interrupt, as queue 0.
		{Link{Name: "eth2", Driver: "virtio_net", Device: "virtio1"}, []QueueIRQ{{28, "virtio1-virtqueues", 0, true}}, ""},
	} {
		got, err := QueueIRQs(proc, tc.link)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.link.Name, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, %v\nwant %+v", tc.link.Name, got, err, tc.want)
		}
	}
}
