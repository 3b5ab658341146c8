package bql

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/report"
)

// fakeQueues makes /sys/class/net/eth0/queues as 6.12 has it for a
// device with n queue pairs: rx-N without, tx-N with byte_queue_limits
// (limit_min 0, the kernel's default), unless bql is false.
func fakeQueues(t *testing.T, n int, bql bool) string {
	t.Helper()
	root := t.TempDir()
	q := filepath.Join(root, "class", "net", "eth0", "queues")
	for i := 0; i < n; i++ {
		mk := func(p string) {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		mk(filepath.Join(q, "rx-"+strconv.Itoa(i)))
		tx := filepath.Join(q, "tx-"+strconv.Itoa(i))
		mk(tx)
		if err := os.WriteFile(filepath.Join(tx, "xps_cpus"), []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if !bql {
			continue
		}
		mk(filepath.Join(tx, "byte_queue_limits"))
		for name, v := range map[string]string{"limit_min": "0\n", "limit_max": "1879048192\n", "limit": "0\n"} {
			if err := os.WriteFile(filepath.Join(tx, "byte_queue_limits", name), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

func eth0() string { return "eth0" }

func limitMin(t *testing.T, root string, q int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "class", "net", "eth0", "queues", "tx-"+strconv.Itoa(q), "byte_queue_limits", "limit_min"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMaxLimit(t *testing.T) {
	// DQL_MAX_LIMIT as 6.12's sysfs shows it after `echo max > limit_min`.
	if MaxLimit != 1879048192 {
		t.Fatalf("MaxLimit %d, want 1879048192", MaxLimit)
	}
}

func TestStep(t *testing.T) {
	for _, tc := range []struct {
		name   string
		queues int
		bql    bool
		inert  bool
		status report.Status
	}{
		{"one queue", 1, true, true, report.Applied},
		{"twelve queues", 12, true, true, report.Applied}, // tx-10 sorts before tx-2
		{"on: left alone", 2, true, false, report.Skipped},
		{"kernel without BQL", 2, false, true, report.Skipped},
		{"no queues", 0, true, true, report.Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := fakeQueues(t, tc.queues, tc.bql)
			if tc.queues == 0 {
				if err := os.MkdirAll(filepath.Join(root, "class", "net", "eth0", "queues"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			r := boot.RunOne(context.Background(), Step(root, eth0, tc.inert))
			if r.Status != tc.status {
				t.Fatalf("status %v (%s%s), want %v", r.Status, r.Reason, r.Error, tc.status)
			}
			want := "0\n"
			if tc.status == report.Applied {
				want = "1879048192"
				if r.Detail["queues"] != strconv.Itoa(tc.queues) || r.Detail["limit_min"] != want {
					t.Errorf("detail %v", r.Detail)
				}
			}
			for i := 0; i < tc.queues && tc.bql; i++ {
				if got := limitMin(t, root, i); got != want {
					t.Errorf("tx-%d limit_min %q, want %q", i, got, want)
				}
			}
		})
	}
}

// TestVerifyReadsBack: a queue whose limit_min went back to 0 after the
// step (a driver that re-created its queues) fails verify, naming it.
func TestVerifyReadsBack(t *testing.T) {
	root := fakeQueues(t, 2, true)
	s := Step(root, eth0, true)
	d := boot.Detail{}
	if err := s.Apply(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(root, "class", "net", "eth0", "queues", "tx-1", "byte_queue_limits", "limit_min")
	if err := os.WriteFile(f, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(context.Background(), d); err == nil {
		t.Fatal("verify passed with tx-1 back at limit_min 0")
	}
}
