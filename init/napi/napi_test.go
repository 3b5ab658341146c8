package napi

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/report"
)

func fakeDev(t *testing.T, attrs map[string]string) string {
	t.Helper()
	root := t.TempDir()
	dev := filepath.Join(root, "class", "net", "eth0")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range attrs {
		if err := os.WriteFile(filepath.Join(dev, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func eth0() string { return "eth0" }

func TestStep(t *testing.T) {
	both := map[string]string{"napi_defer_hard_irqs": "0\n", "gro_flush_timeout": "0\n"}
	for _, tc := range []struct {
		name   string
		attrs  map[string]string
		s      Settings
		status report.Status
		detail map[string]string
	}{
		{"applied", both, Settings{DeferHardIRQs: 2, GROFlushTimeout: 200 * time.Microsecond}, report.Applied,
			map[string]string{"napi_defer_hard_irqs": "2", "gro_flush_timeout": "200000", "workload_prefer_busy_poll": "false"}},
		{"applied with the preference", both, Settings{DeferHardIRQs: 2, GROFlushTimeout: 200 * time.Microsecond, Prefer: true}, report.Applied,
			map[string]string{"napi_defer_hard_irqs": "2", "gro_flush_timeout": "200000", "workload_prefer_busy_poll": "true"}},
		{"off", both, Settings{}, report.Skipped, nil},
		{"preference without deferral", both, Settings{Prefer: true}, report.Failed, nil},
		{"old kernel", map[string]string{"gro_flush_timeout": "0\n"}, Settings{DeferHardIRQs: 2, GROFlushTimeout: time.Millisecond}, report.Skipped, nil},
		{"defer without timer", both, Settings{DeferHardIRQs: 2}, report.Failed, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := fakeDev(t, tc.attrs)
			r := boot.RunOne(context.Background(), Step(root, eth0, tc.s))
			if r.Status != tc.status {
				t.Fatalf("status %v (%s%s), want %v", r.Status, r.Reason, r.Error, tc.status)
			}
			for k, v := range tc.detail {
				if r.Detail[k] != v {
					t.Errorf("detail %s = %q, want %q", k, r.Detail[k], v)
				}
			}
		})
	}
}

// What the kernel took is what verify reports: a kernel that stores
// another value (here the file is replaced after apply, as a driver
// reset would) fails the step with both values named.
func TestVerifyReadsTheKernel(t *testing.T) {
	root := fakeDev(t, map[string]string{"napi_defer_hard_irqs": "0", "gro_flush_timeout": "0"})
	s := Step(root, eth0, Settings{DeferHardIRQs: 2, GROFlushTimeout: time.Millisecond})
	if err := s.Apply(context.Background(), boot.Detail{}); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(root, "class", "net", "eth0", "gro_flush_timeout")
	os.WriteFile(f, []byte("20000\n"), 0o644)
	err := s.Verify(context.Background(), boot.Detail{})
	if err == nil || err.Error() != f+": kernel has 20000, want 1000000" {
		t.Fatalf("verify: %v", err)
	}
}

func TestWorkloadEnv(t *testing.T) {
	for _, tc := range []struct {
		s    Settings
		want string
	}{
		{Settings{DeferHardIRQs: 100, GROFlushTimeout: 50 * time.Microsecond, Prefer: true}, PreferEnv + "=1"},
		// The deferral alone is the kernel's interrupt coalescing; the
		// preference is asked for separately (a race in 6.12 with it).
		{Settings{DeferHardIRQs: 100, GROFlushTimeout: 50 * time.Microsecond}, ""},
		{Settings{}, ""},
		{Settings{Prefer: true}, ""}, // refused by Check
		{Settings{GROFlushTimeout: 50 * time.Microsecond, Prefer: true}, ""}, // a timer alone defers nothing
		{Settings{DeferHardIRQs: 100, Prefer: true}, ""},                     // refused by Check: no timer
	} {
		got := WorkloadEnv(tc.s)
		if (tc.want == "" && len(got) != 0) || (tc.want != "" && (len(got) != 1 || got[0] != tc.want)) {
			t.Errorf("WorkloadEnv(%+v) = %q, want %q", tc.s, got, tc.want)
		}
	}
}
