package nic

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// physInterrupts is /proc/interrupts of an x86 machine as Linux 6.12
// prints it (kernel/irq/proc.c: counts, then the chip name "PCI-MSIX-<bdf>"
// with the hwirq and trigger "N-edge", then the actions), with the drivers
// of a dedicated server side by side: an e1000e (QEMU's 82574L), two mlx5
// ports whose vectors differ only by PCI address, an igb, an i40e and
// virtio-net.
const physInterrupts = `            CPU0       CPU1       CPU2       CPU3
   0:         46          0          0          0   IO-APIC   2-edge      timer
   4:          0          0        812          0   IO-APIC   4-edge      ttyS0
  24:        101          0          0          0  PCI-MSIX-0000:00:02.0    0-edge      eth0-rx-0
  25:         88          0          0          0  PCI-MSIX-0000:00:02.0    1-edge      eth0-tx-0
  26:          3          0          0          0  PCI-MSIX-0000:00:02.0    2-edge      eth0
  27:         12          0          0          0  PCI-MSIX-0000:3b:00.0    0-edge      mlx5_async0@pci:0000:3b:00.0
  28:        310          0          0          0  PCI-MSIX-0000:3b:00.0    1-edge      mlx5_comp0@pci:0000:3b:00.0
  29:          0        290          0          0  PCI-MSIX-0000:3b:00.0    2-edge      mlx5_comp1@pci:0000:3b:00.0
  30:          9          0          0          0  PCI-MSIX-0000:3b:00.1    0-edge      mlx5_async0@pci:0000:3b:00.1
  31:          0          0        77          0  PCI-MSIX-0000:3b:00.1    1-edge      mlx5_comp0@pci:0000:3b:00.1
  32:          0          0          0         61  PCI-MSIX-0000:3b:00.1    2-edge      mlx5_comp1@pci:0000:3b:00.1
  33:          1          0          0          0  PCI-MSIX-0000:01:00.0    0-edge      enp1s0
  34:        500          0          0          0  PCI-MSIX-0000:01:00.0    1-edge      enp1s0-TxRx-0
  35:          0        400          0          0  PCI-MSIX-0000:01:00.0    2-edge      enp1s0-TxRx-1
  36:          2          0          0          0  PCI-MSIX-0000:5e:00.0    0-edge      i40e-0000:5e:00.0:misc
  37:         44          0          0          0  PCI-MSIX-0000:5e:00.0    1-edge      i40e-ens2f0-TxRx-0
  38:          0         45          0          0  PCI-MSIX-0000:5e:00.0    2-edge      i40e-ens2f0-TxRx-1
  39:          0          0          0          0  PCI-MSIX-0000:00:03.0    0-edge      virtio0-config
  40:         70          0          0          0  PCI-MSIX-0000:00:03.0    1-edge      virtio0-input.0
  41:          5          0          0          0  PCI-MSIX-0000:00:03.0    2-edge      virtio0-output.0
 NMI:          0          0          0          0   Non-maskable interrupts
 LOC:      10000       9000       9100       9300   Local timer interrupts
`

// addPCI gives the fake NIC name a PCI function bdf with the MSI vectors
// irqs (its msi_irqs/ directory); with virtio, the interface's device is
// the virtio device under the function.
func (ft *fakeTree) addPCI(t *testing.T, name, bdf, virtio, driver string, irqs ...int) {
	t.Helper()
	fn := filepath.Join(ft.sys, "devices/pci0000:00", bdf)
	dev := fn
	if virtio != "" {
		dev = filepath.Join(fn, virtio)
	}
	for _, irq := range irqs {
		ft.write(t, filepath.Join(fn, "msi_irqs", fmt.Sprint(irq)), "msix\n")
	}
	drv := filepath.Join(ft.sys, "bus/pci/drivers", driver)
	for _, d := range []string{dev, drv, filepath.Join(ft.sys, "class/net", name)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ft.write(t, filepath.Join(ft.sys, "class/net", name, "type"), "1\n")
	for _, l := range [][2]string{{dev, filepath.Join(ft.sys, "class/net", name, "device")}, {drv, filepath.Join(dev, "driver")}} {
		if err := os.Symlink(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDeviceQueueIRQs(t *testing.T) {
	ft := newTree(t)
	ft.write(t, filepath.Join(ft.proc, "interrupts"), physInterrupts)
	ft.addPCI(t, "eth0", "0000:00:02.0", "", "e1000e", 24, 25, 26)
	ft.addPCI(t, "enp59s0f0", "0000:3b:00.0", "", "mlx5_core", 27, 28, 29)
	ft.addPCI(t, "enp59s0f1", "0000:3b:00.1", "", "mlx5_core", 30, 31, 32)
	ft.addPCI(t, "enp1s0", "0000:01:00.0", "", "igb", 33, 34, 35)
	ft.addPCI(t, "ens2f0", "0000:5e:00.0", "", "i40e", 36, 37, 38)
	ft.addPCI(t, "eth1", "0000:00:03.0", "virtio0", "virtio_net", 39, 40, 41)
	for _, tc := range []struct {
		ifname string
		want   string
	}{
		{"eth0", "24 eth0-rx-0 q0, 25 eth0-tx-0 q0"},
		{"enp59s0f0", "28 mlx5_comp0@pci:0000:3b:00.0 q0, 29 mlx5_comp1@pci:0000:3b:00.0 q1"},
		{"enp59s0f1", "31 mlx5_comp0@pci:0000:3b:00.1 q0, 32 mlx5_comp1@pci:0000:3b:00.1 q1"},
		{"enp1s0", "34 enp1s0-TxRx-0 q0, 35 enp1s0-TxRx-1 q1"},
		{"ens2f0", "37 i40e-ens2f0-TxRx-0 q0, 38 i40e-ens2f0-TxRx-1 q1"},
		{"eth1", "40 virtio0-input.0 q0, 41 virtio0-output.0 q0"},
	} {
		t.Run(tc.ifname, func(t *testing.T) {
			l, err := Discover(ft.sys, tc.ifname)
			if err != nil {
				t.Fatal(err)
			}
			irqs, err := DeviceQueueIRQs(ft.sys, ft.proc, l)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, q := range irqs {
				got = append(got, fmt.Sprintf("%d %s q%d", q.IRQ, q.Name, q.Queue))
			}
			if s := strings.Join(got, ", "); s != tc.want {
				t.Errorf("%+v: %q, want %q", l, s, tc.want)
			}
		})
	}
	l, _ := Discover(ft.sys, "enp59s0f1")
	if l.PCI != "0000:3b:00.1" || l.Driver != "mlx5_core" {
		t.Errorf("Discover(enp59s0f1) = %+v, want PCI 0000:3b:00.1 driver mlx5_core", l)
	}
}

// TestDeviceQueueIRQsStaleName: a driver names its vectors when the device
// opens, so after a rename the old name can be another interface's. The
// e1000e at 00:02.0 opened as eth0 and was renamed eno1; eth0 is now a
// closed e1000e at 00:04.0 (vectors allocated, none requested). By name
// the lines are eth0's; by device they are not.
func TestDeviceQueueIRQsStaleName(t *testing.T) {
	ft := newTree(t)
	ft.write(t, filepath.Join(ft.proc, "interrupts"), physInterrupts)
	ft.addPCI(t, "eno1", "0000:00:02.0", "", "e1000e", 24, 25, 26)
	ft.addPCI(t, "eth0", "0000:00:04.0", "", "e1000e", 50, 51, 52)
	l, err := Discover(ft.sys, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	if byName, _ := QueueIRQs(ft.proc, l); len(byName) != 2 {
		t.Fatalf("by name: %+v, want the two stale eth0 vectors (the case this test is about)", byName)
	}
	if byDev, err := DeviceQueueIRQs(ft.sys, ft.proc, l); err != nil || len(byDev) != 0 {
		t.Errorf("by device: %+v, %v; want none (00:04.0 has requested no vector)", byDev, err)
	}
}
