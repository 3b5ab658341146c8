package nic

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/cpuset"
	"github.com/hotpath-dev/hotpath/init/report"
	"golang.org/x/sys/unix"
)

func runAll(t *testing.T, steps []boot.Step) map[string]report.Step {
	t.Helper()
	m := map[string]report.Step{}
	for _, r := range boot.Run(context.Background(), steps, t.Logf) {
		m[r.Name] = r
	}
	return m
}

// checkBound checks what the kernel now holds for every current queue:
// its vector's affinity on the queue's CPU, its XPS mask that CPU alone,
// RPS off.
func (f *fakeENA) checkBound(t *testing.T, cpus []int) {
	t.Helper()
	for q, irq := range f.queueIRQs() {
		if got := f.ft.read(t, filepath.Join(f.ft.proc, "irq", strconv.Itoa(irq), "smp_affinity_list")); got != strconv.Itoa(cpus[q]) {
			t.Errorf("queue %d: irq %d affinity %s, want %d", q, irq, got, cpus[q])
		}
		qdir := filepath.Join(f.ft.sys, "class/net", f.link.Name, "queues")
		if got := f.ft.read(t, filepath.Join(qdir, fmt.Sprintf("tx-%d", q), "xps_cpus")); got != cpuset.FormatMask([]int{cpus[q]}, f.nrCPUs) {
			t.Errorf("tx-%d xps_cpus %s, want cpu %d", q, got, cpus[q])
		}
		if got := f.ft.read(t, filepath.Join(qdir, fmt.Sprintf("rx-%d", q), "rps_cpus")); got != "0" {
			t.Errorf("rx-%d rps_cpus %s, want 0", q, got)
		}
	}
}

// TestChannelChangeRenumbers: on ENA a channel change resets the device,
// its queue vectors come back under new numbers with the default
// affinity and new queues without XPS; the IRQ, XPS and RPS steps run
// after it and bind what exists once it is done.
func TestChannelChangeRenumbers(t *testing.T) {
	for _, tc := range []struct {
		name          string
		combined, max uint32
	}{
		{"shrink 8 to 4", 8, 8},
		{"grow 2 to 4", 2, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cpus := []int{0, 1, 2, 3}
			f := newFakeENA(t, tc.combined, tc.max, cpus, 4)
			before := f.queueIRQs()
			res := runAll(t, f.tuner(defaultOpts(), cpus).Steps())
			for name, r := range res {
				if r.Status == report.Failed {
					t.Errorf("%s failed: %s", name, r.Error)
				}
			}
			if f.resets != 1 || f.ch.CombinedCount != 4 || f.queueIRQs()[0] == before[0] {
				t.Fatalf("the fake did not reset: %d resets, %d channels, vectors %v then %v", f.resets, f.ch.CombinedCount, before, f.queueIRQs())
			}
			f.checkBound(t, cpus)
		})
	}
}

// TestReapplyAfterReset: a device reset behind the init's back undoes
// the affinity and XPS of every queue; the steps marked Reapply bind them
// again, without touching the channel count.
func TestReapplyAfterReset(t *testing.T) {
	cpus := []int{0, 1}
	f := newFakeENA(t, 2, 2, cpus, 2)
	tu := f.tuner(defaultOpts(), cpus)
	runAll(t, tu.Steps())
	f.checkBound(t, cpus)
	f.setQueues(2) // ena_reset_task: destroy and restore the device
	// The six steps that place and shape the queues run again, each
	// applied; the channel count is not among them.
	res := runAll(t, tu.ReapplySteps())
	want := []string{"nic-coalesce", "nic-gro", "nic-irq-affinity", "nic-qdisc", "nic-rps", "nic-xps"}
	if got := slices.Sorted(maps.Keys(res)); !slices.Equal(got, want) {
		t.Errorf("re-applied %q, want %q", got, want)
	}
	for name, r := range res {
		if r.Status != report.Applied {
			t.Errorf("re-applied %s: %s %s%s, want applied", name, r.Status, r.Reason, r.Error)
		}
	}
	if f.resets != 0 {
		t.Errorf("re-applying changed the channels (%d resets)", f.resets)
	}
	f.checkBound(t, cpus)
}

// TestKernelRefusals: what the kernel refuses or changes is a failed
// step that names it, and the verify steps read the kernel's state, not
// the bytes the apply step wrote.
func TestKernelRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		online []int
		cpus   []int
		setup  func(f *fakeENA)
		step   string
		status report.Status
		sub    string // in the error or reason
	}{
		{name: "managed irq", online: []int{0, 1}, cpus: []int{0, 1},
			setup: func(f *fakeENA) { f.managedQueues[1] = true },
			step:  "nic-irq-affinity", status: report.Failed, sub: "-> cpu 1: write"},
		{name: "offline cpu irq", online: []int{0, 1, 3}, cpus: []int{0, 1, 2, 3},
			step: "nic-irq-affinity", status: report.Failed, sub: "-> cpu 2: write"},
		{name: "offline cpu xps dropped by the kernel", online: []int{0, 1, 3}, cpus: []int{0, 1, 2, 3},
			step: "nic-xps", status: report.Failed, sub: "xps tx-2 reads cpus [], want [2]"},
		{name: "fixed gro", online: []int{0, 1}, cpus: []int{0, 1},
			setup: func(f *fakeENA) { f.fixed[groFeature] = true },
			step:  "nic-gro", status: report.Failed, sub: "rx-gro reads on, want off"},
		{name: "get coalesce fails", online: []int{0, 1}, cpus: []int{0, 1},
			setup: func(f *fakeENA) { f.getCoalesceErr = unix.EIO },
			step:  "nic-coalesce", status: report.Failed, sub: "ethtool get coalesce eth0: input/output error"},
		{name: "get coalesce unsupported", online: []int{0, 1}, cpus: []int{0, 1},
			setup: func(f *fakeENA) { f.getCoalesceErr = unix.EOPNOTSUPP },
			step:  "nic-coalesce", status: report.Skipped, sub: "no interrupt moderation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeENA(t, uint32(len(tc.cpus)), 8, tc.online, 4)
			if tc.setup != nil {
				tc.setup(f)
			}
			res := runAll(t, f.tuner(defaultOpts(), tc.cpus).Steps())
			r := res[tc.step]
			if r.Status != tc.status || !strings.Contains(r.Error+r.Reason, tc.sub) {
				t.Errorf("%s: %s %q%q, want %s with %q", tc.step, r.Status, r.Error, r.Reason, tc.status, tc.sub)
			}
			if tc.name == "managed irq" {
				// The other queue is bound all the same.
				irq := f.queueIRQs()[0]
				if got := f.ft.read(t, filepath.Join(f.ft.proc, "irq", strconv.Itoa(irq), "smp_affinity_list")); got != "0" {
					t.Errorf("queue 0 affinity %s, want 0", got)
				}
			}
		})
	}
}

// TestPlanFreshOnRerun: the same step value run again (a re-apply)
// decides afresh: adaptive moderation set once, then refused by the
// driver, is verified as the static fallback the second run set.
func TestPlanFreshOnRerun(t *testing.T) {
	et := &fakeEthtool{}
	tu := &Tuner{Link: Link{Name: "eth0", Driver: "ena"}, Ethtool: et, Opt: defaultOpts()}
	s := stepNamed(t, tu.Steps(), "nic-coalesce")
	if r := boot.RunOne(context.Background(), s); r.Status != report.Applied || r.Detail["mode"] != "adaptive-rx" {
		t.Fatalf("first run: %+v", r)
	}
	et.noAdaptive = true
	if r := boot.RunOne(context.Background(), s); r.Status != report.Applied || r.Detail["mode"] != "static" {
		t.Errorf("second run: %+v, want static moderation verified", r)
	}
}
