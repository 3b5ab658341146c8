package nic

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/report"
	"golang.org/x/sys/unix"
)

// TestENAPushBuffer: ENA's LLQ push buffer under each device the fleet
// has. Where the device offers large LLQ headers, 224 is set, read back
// and reported; the device reset it costs re-creates the queue vectors,
// and the interrupt steps after it bind the new ones. Where it offers 96
// at most, or no LLQ at all, the step is skipped with that reason and
// nothing is reset.
func TestENAPushBuffer(t *testing.T) {
	for _, tc := range []struct {
		name          string
		llq, large    bool
		pushLen       uint32
		want          int // TxPushBufLen
		status        report.Status
		detail        string // in the reason or the detail's changed=
		after, resets int
	}{
		{"nitro v4", true, true, enaLLQHeader, 224, report.Applied, "yes", 224, 1},
		{"already large", true, true, enaLLQLargeHeader, 224, report.Applied, "no", 224, 0},
		{"nitro v3: 96 at most", true, false, enaLLQHeader, 224, report.Skipped, "at most 96 bytes, not 224", 96, 0},
		{"host placement", false, false, 0, 224, report.Skipped, "offers no tx-push-buf-len", 0, 0},
		{"a size ENA does not take", true, true, enaLLQHeader, 200, report.Skipped, "refuses tx-push-buf-len 200", 96, 0},
		{"off", true, true, enaLLQHeader, 0, report.Skipped, "nic.tx_push_buf_len=0", 96, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cpus := []int{0, 1}
			f := newFakeENA(t, 2, 2, cpus, 2)
			f.llq, f.largeLLQ, f.pushLen = tc.llq, tc.large, tc.pushLen
			opt := defaultOpts()
			opt.TxPushBufLen = tc.want
			before := f.queueIRQs()
			res := runAll(t, f.tuner(opt, cpus).Steps())
			r := res["nic-tx-push-buf"]
			if r.Status != tc.status || !strings.Contains(r.Detail["changed"]+r.Reason, tc.detail) {
				t.Errorf("nic-tx-push-buf = %+v, want %s with %q", r, tc.status, tc.detail)
			}
			if r.Status == report.Applied && r.Detail["tx_push_buf_len"] != "224" {
				t.Errorf("read back %q, want 224", r.Detail["tx_push_buf_len"])
			}
			if int(f.pushLen) != tc.after || f.resets != tc.resets {
				t.Errorf("device push buffer %d after %d resets, want %d after %d", f.pushLen, f.resets, tc.after, tc.resets)
			}
			if tc.resets > 0 && f.queueIRQs()[0] == before[0] {
				t.Fatalf("the reset kept the vectors: the test would not show the step order")
			}
			for name, r := range res {
				if r.Status == report.Failed {
					t.Errorf("%s failed: %s", name, r.Error)
				}
			}
			f.checkBound(t, cpus)
		})
	}
}

// TestPushBufferKernel runs nic-tx-push-buf with the real Netlink on lo
// in a network namespace of the test's own: the kernel's EOPNOTSUPP (lo
// has no ring parameters) is a skip that says so, not a failure.
func TestPushBufferKernel(t *testing.T) {
	done := make(chan struct{})
	var r report.Step
	var nsErr error
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the namespace dies with the thread
		if nsErr = unix.Unshare(unix.CLONE_NEWNET); nsErr != nil {
			return
		}
		opt := defaultOpts()
		tu := &Tuner{Link: Link{Name: "lo", Driver: "loopback"}, Netlink: NewNetlink(), Opt: opt}
		r = boot.RunOne(context.Background(), stepNamed(t, tu.Steps(), "nic-tx-push-buf"))
	}()
	<-done
	if nsErr != nil {
		t.Skipf("no network namespace: %v", nsErr)
	}
	if r.Status != report.Skipped || !strings.Contains(r.Reason, "driver loopback reports no rings over ethtool netlink") {
		t.Errorf("nic-tx-push-buf on lo: %+v", r)
	}
}
