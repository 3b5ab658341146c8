package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// checkMachineCheckCounted injects a machine check the kernel survives
// and looks for it from outside: the kernel's line on the console and
// the count on the management endpoint's /metrics (init/kernlog). QEMU's
// mce command: -b enters every CPU (Intel machine checks are broadcast,
// and the kernel waits up to a second for every CPU to arrive); CPU 0,
// bank 1, status VAL|UC|EN|S with MCA code 0x00C0 (a memory scrubbing
// error: "action optional", logged and survived), MCG_STATUS MCIP|RIPV
// (a machine check in progress; the interrupted code may go on: without
// MCIP the kernel panics, "MCIP not set in MCA handler"), no address.
func checkMachineCheckCounted(ctx context.Context, t *testing.T, b *booted) {
	t.Helper()
	mark, start := b.Console.Len(), time.Now()
	out, err := b.QMP.Execute(ctx, "human-monitor-command", map[string]string{
		"command-line": "mce -b 0 1 0xb1000000000000c0 0x5 0x0 0x0",
	})
	if err != nil || strings.Trim(string(out), `"`) != "" {
		t.Fatalf("injecting a machine check: %s %v", out, err)
	}
	if _, err := b.Console.WaitString(ctx, mark, "[Hardware Error]: CPU 0: Machine Check"); err != nil {
		t.Fatalf("the kernel did not log the machine check: %v", err)
	}
	want := `hotpath_hardware_errors_total{source="mce"} 1`
	var body string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		if m, err := b.metrics(); err == nil {
			if body = m; strings.Contains(body, want) {
				break
			}
		}
	}
	if !strings.Contains(body, want) {
		i := strings.Index(body, "hotpath_hardware_errors_total")
		t.Fatalf("/metrics lacks %q after the machine check; has %.300q", want, body[max(i, 0):])
	}
	if strings.Contains(b.Console.String()[mark:], "Kernel panic") {
		t.Fatal("the machine check panicked the kernel")
	}
	fmt.Fprintf(os.Stderr, "e2e: machine check injected, logged and counted on /metrics (%s) within %v\n", want, time.Since(start).Round(time.Millisecond))
}
