package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// bindQueueIRQ finds RX queue q's interrupt in proc/interrupts (the line
// whose last field ends in "-input.q", as virtio-net names its queues),
// writes cpu to its smp_affinity_list and returns the IRQ number and the
// list as the kernel reads it back.
func bindQueueIRQ(proc, q, cpu string) (irq, affinity string, err error) {
	if _, err := strconv.Atoi(q); err != nil {
		return "", "", fmt.Errorf("queue %q: %w", q, err)
	}
	if _, err := strconv.Atoi(cpu); err != nil {
		return "", "", fmt.Errorf("cpu %q: %w", cpu, err)
	}
	f, err := os.Open(filepath.Join(proc, "interrupts"))
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || !strings.HasSuffix(fields[len(fields)-1], "-input."+q) {
			continue
		}
		irq = strings.TrimSuffix(fields[0], ":")
		break
	}
	if err := sc.Err(); err != nil {
		return "", "", err
	}
	if irq == "" {
		return "", "", fmt.Errorf("no interrupt named *-input.%s in %s/interrupts", q, proc)
	}
	list := filepath.Join(proc, "irq", irq, "smp_affinity_list")
	if err := os.WriteFile(list, []byte(cpu), 0); err != nil {
		return irq, "", err
	}
	b, err := os.ReadFile(list)
	return irq, string(bytes.TrimSpace(b)), err
}
