package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestBindQueueIRQ(t *testing.T) {
	proc := t.TempDir()
	interrupts := `           CPU0       CPU1
 24:          0          0   PCI-MSI 49152-edge      virtio0-config
 25:        310          0   PCI-MSI 49153-edge      virtio0-input.0
 26:          1          0   PCI-MSI 49154-edge      virtio0-output.0
 27:          0        212   PCI-MSI 49155-edge      virtio0-input.1
 28:          0          1   PCI-MSI 49156-edge      virtio0-output.1
`
	if err := os.WriteFile(filepath.Join(proc, "interrupts"), []byte(interrupts), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, irq := range []string{"25", "27"} {
		os.MkdirAll(filepath.Join(proc, "irq", irq), 0o755)
		os.WriteFile(filepath.Join(proc, "irq", irq, "smp_affinity_list"), []byte("0-1\n"), 0o644)
	}
	for _, tc := range []struct{ q, cpu, irq string }{{"0", "1", "25"}, {"1", "0", "27"}} {
		irq, aff, err := bindQueueIRQ(proc, tc.q, tc.cpu)
		if err != nil || irq != tc.irq || aff != tc.cpu {
			t.Errorf("queue %s to cpu %s: irq %q affinity %q, %v; want irq %s", tc.q, tc.cpu, irq, aff, err, tc.irq)
		}
	}
	// The other queue's file is untouched; 1 is not 11.
	if b, _ := os.ReadFile(filepath.Join(proc, "irq", "25", "smp_affinity_list")); string(b) != "1" {
		t.Errorf("irq 25: %q", b)
	}
	for _, bad := range [][2]string{{"2", "0"}, {"x", "0"}, {"0", "1,2"}} {
		if _, _, err := bindQueueIRQ(proc, bad[0], bad[1]); err == nil {
			t.Errorf("queue %q cpu %q: no error", bad[0], bad[1])
		}
	}
}
