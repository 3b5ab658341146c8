package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/kernlog"
	"github.com/hotpath-dev/hotpath/init/report"
)

// goodReport is what a correctly tuned 2-CPU virtio-net guest reports.
func goodReport() *report.Report {
	r := &report.Report{
		Version: report.Version, Kernel: "6.1.0-hotpath", CPUs: 2, ReadyMillis: 1500,
		Workload: &report.Workload{Path: "/workload", CPUs: "0-1", Port: 8080, PID: 2},
		Steps: []report.Step{
			{Name: "mounts", Status: report.Applied},
			{Name: "sysctl net.core.busy_poll", Status: report.Applied},
			{Name: "sysctl net.core.busy_read", Status: report.Applied},
			{Name: "sysctl net.core.default_qdisc", Status: report.Applied},
			{Name: "sysctl net.ipv4.tcp_congestion_control", Status: report.Applied},
			{Name: "nic-channels", Status: report.Applied},
			{Name: "nic-coalesce", Status: report.Skipped, Reason: "virtio_net: operation not supported"},
			{Name: "nic-gro", Status: report.Applied},
			{Name: "nic-link-up", Status: report.Applied},
			{Name: "nic-qdisc", Status: report.Applied},
			{Name: "nic-irq-affinity", Status: report.Applied},
			{Name: "nic-xps", Status: report.Applied},
			{Name: "nic-rps", Status: report.Applied},
			{Name: "nic-tx-push-buf", Status: report.Skipped, Reason: "driver virtio_net offers no tx-push-buf-len (only ENA in LLQ mode does, Linux 6.5+)"},
			{Name: "nic-bql", Status: report.Skipped, Reason: "the kernel's dynamic byte queue limits stay (nic.bql=on, or auto with a queueing qdisc)"},
			{Name: "nic-napi-defer", Status: report.Skipped, Reason: "napi_defer_hard_irqs and gro_flush_timeout left at the kernel's defaults"},
		},
		Facts: report.Facts{
			Vulnerabilities: map[string]string{
				"meltdown":   "Not affected",
				"spectre_v2": "Vulnerable, IBPB: disabled, STIBP: disabled",
			},
			Cmdline: "console=ttyS0 mitigations=off",
			Sysctls: map[string]string{
				"net.core.busy_poll": "50", "net.core.busy_read": "50",
				"net.core.default_qdisc": "pfifo_fast", "net.ipv4.tcp_congestion_control": "reno",
			},
			NIC: &report.NIC{
				Name: "eth0", Driver: "virtio_net", MTU: 1500, Addrs: []string{"10.77.0.2/24"},
				Lifetime: "forever", Gateway: "10.77.0.1", RxQueues: 2, TxQueues: 2,
				IRQs: []report.IRQ{
					{IRQ: 24, Name: "virtio0-input.0", Queue: 0, Affinity: "0"},
					{IRQ: 25, Name: "virtio0-output.0", Queue: 0, Affinity: "0"},
					{IRQ: 26, Name: "virtio0-input.1", Queue: 1, Affinity: "1"},
					{IRQ: 27, Name: "virtio0-output.1", Queue: 1, Affinity: "1"},
				},
				XPS:      map[string]string{"tx-0": "1", "tx-1": "00000002"},
				RPS:      map[string]string{"rx-0": "0", "rx-1": "00000000"},
				Qdisc:    "mq",
				Children: []string{"pfifo_fast", "pfifo_fast"},
				GRO:      "off",
			},
		},
	}
	r.Timeline = timelineOf(r.Steps, r.ReadyMillis)
	r.HardwareErrors = &kernlog.Snapshot{}
	for _, c := range kernlog.HardwareErrors {
		r.HardwareErrors.Counts = append(r.HardwareErrors.Counts, kernlog.Count{Class: c.Name})
	}
	return r
}

// timelineOf is the timeline of a boot that ran steps one after another
// from 300 ms to 1400 ms and was ready at ready ms.
func timelineOf(steps []report.Step, ready int64) []report.Phase {
	tl := []report.Phase{{Name: report.PhaseKernel, Start: 0, End: 250}, {Name: report.PhaseInit, Start: 250, End: 300}}
	at, each := 300.0, 1100.0/float64(len(steps))
	for _, s := range steps {
		p := report.Phase{Name: report.StepPhase(s.Name), Start: at, End: at + each}
		if s.Status == report.Background {
			p.End, p.Background = -1, true
		} else {
			at += each
		}
		tl = append(tl, p)
	}
	return append(tl, report.Phase{Name: report.PhaseExec, Start: 1400, End: 1410},
		report.Phase{Name: report.PhaseReady, Start: 1410, End: float64(ready)})
}

var testNet = Network{Addr: "10.77.0.2/24", Gateway: "10.77.0.1", MTU: 1500}

func allErrs(r *report.Report) []error {
	errs := CheckReport(r, 2)
	errs = append(errs, CheckPolicy(&r.Facts)...)
	return append(errs, CheckLocality(&r.Facts, 2, testNet)...)
}

func TestChecksPassGoodReport(t *testing.T) {
	for _, err := range allErrs(goodReport()) {
		t.Error(err)
	}
	// A background step (IPv6 beside an IPv4 boot) still running at
	// report time passes too.
	r := goodReport()
	r.Steps = append(r.Steps, report.Step{Name: "net-ipv6", Status: report.Background})
	r.Timeline = timelineOf(r.Steps, r.ReadyMillis)
	for _, err := range allErrs(r) {
		t.Errorf("with a background step: %v", err)
	}
}

// TestChecksCatchViolations breaks one thing at a time and expects the
// checks to name it.
func TestChecksCatchViolations(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(r *report.Report)
		want   string
	}{
		{"failed step", func(r *report.Report) { r.Steps[0].Status, r.Steps[0].Error = report.Failed, "EPERM" }, "step mounts failed: EPERM"},
		{"skip without reason", func(r *report.Report) { r.Steps[6].Reason = "" }, "nic-coalesce skipped without a reason"},
		{"missing nic step", func(r *report.Report) { r.Steps = r.Steps[:len(r.Steps)-1] }, "step nic-napi-defer missing"},
		{"no ready time", func(r *report.Report) { r.ReadyMillis = 0 }, "ready time"},
		{"ready error", func(r *report.Report) { r.ReadyMillis, r.ReadyError = -1, "did not accept" }, "not ready: did not accept"},
		{"no workload", func(r *report.Report) { r.Workload = nil }, "workload not reported"},
		{"workload cpus", func(r *report.Report) { r.Workload.CPUs = "0" }, "HOTPATH_CPUS"},
		{"cpu count", func(r *report.Report) { r.CPUs = 4 }, "4 CPUs"},
		{"unknown keys", func(r *report.Report) { r.Unknown = []string{"nic.gor"} }, "nic.gor"},
		{"mitigation on", func(r *report.Report) {
			r.Facts.Vulnerabilities["spectre_v1"] = "Mitigation: usercopy/swapgs barriers"
		}, "vulnerabilities/spectre_v1"},
		{"no vulnerabilities", func(r *report.Report) { r.Facts.Vulnerabilities = nil }, "no /sys/devices/system/cpu/vulnerabilities"},
		{"netfilter", func(r *report.Report) { r.Facts.Netfilter = true }, "netfilter"},
		{"audit", func(r *report.Report) { r.Facts.Audit = true }, "audit"},
		{"modules", func(r *report.Report) { r.Facts.Modules = true }, "modules"},
		{"seccomp", func(r *report.Report) { r.Facts.Seccomp = true }, "seccomp"},
		{"cmdline", func(r *report.Report) { r.Facts.Cmdline = "console=ttyS0" }, "mitigations=off"},
		{"cmdline mitigations=auto last", func(r *report.Report) { r.Facts.Cmdline += " panic=10 mitigations=auto" }, "mitigations=auto overrides mitigations=off"},
		{"cmdline spectre_v2=on", func(r *report.Report) { r.Facts.Cmdline += " spectre-v2=on" }, "spectre-v2=on overrides"},
		{"cubic", func(r *report.Report) { r.Facts.Sysctls["net.ipv4.tcp_congestion_control"] = "cubic" }, "tcp_congestion_control"},
		{"busy poll off", func(r *report.Report) { r.Facts.Sysctls["net.core.busy_poll"] = "0" }, "busy_poll"},
		{"busy poll unreadable", func(r *report.Report) {
			r.Facts.Sysctls["net.core.busy_poll"] = "unreadable: open /proc/sys/net/core/busy_poll: no such file or directory"
		}, "sysctl net.core.busy_poll = \"unreadable"},
		{"busy read empty", func(r *report.Report) { r.Facts.Sysctls["net.core.busy_read"] = "" }, "busy_read = \"\""},
		{"busy read negative", func(r *report.Report) { r.Facts.Sysctls["net.core.busy_read"] = "-1" }, "busy_read = \"-1\""},
		{"busy poll missing", func(r *report.Report) { delete(r.Facts.Sysctls, "net.core.busy_poll") }, "sysctl net.core.busy_poll not reported"},
		{"busy poll skipped", func(r *report.Report) {
			r.Steps[1].Status, r.Steps[1].Reason = report.Skipped, "/proc/sys/net/core/busy_poll does not exist"
		}, "step \"sysctl net.core.busy_poll\" skipped"},
		{"busy read step missing", func(r *report.Report) { r.Steps = slices.Delete(r.Steps, 2, 3) }, "step \"sysctl net.core.busy_read\" missing"},
		{"packet socket", func(r *report.Report) { r.Facts.PacketSockets = 1 }, "AF_PACKET"},
		{"no nic", func(r *report.Report) { r.Facts.NIC = nil }, "no primary NIC"},
		{"queues", func(r *report.Report) { r.Facts.NIC.RxQueues = 1 }, "1 rx / 2 tx"},
		{"irq affinity", func(r *report.Report) { r.Facts.NIC.IRQs[2].Affinity = "0-1" }, "IRQ 26"},
		{"irq missing", func(r *report.Report) { r.Facts.NIC.IRQs = r.Facts.NIC.IRQs[:2] }, "queue 1"},
		{"xps", func(r *report.Report) { r.Facts.NIC.XPS["tx-1"] = "3" }, "XPS tx-1"},
		{"rps on", func(r *report.Report) { r.Facts.NIC.RPS["rx-0"] = "3" }, "RPS rx-0"},
		{"qdisc", func(r *report.Report) { r.Facts.NIC.Qdisc = "fq_codel" }, "fq_codel"},
		{"child qdisc", func(r *report.Report) { r.Facts.NIC.Children[1] = "noqueue" }, "noqueue"},
		{"gro", func(r *report.Report) { r.Facts.NIC.GRO = "on" }, "GRO"},
		{"lifetime", func(r *report.Report) { r.Facts.NIC.Lifetime = "3600" }, "lifetime"},
		{"address", func(r *report.Report) { r.Facts.NIC.Addrs = nil }, "10.77.0.2/24"},
		{"mtu", func(r *report.Report) { r.Facts.NIC.MTU = 9000 }, "MTU 9000"},
		{"no timeline", func(r *report.Report) { r.Timeline = nil }, "no boot timeline"},
		{"kernel log not read", func(r *report.Report) { r.HardwareErrors = nil }, "hardware errors not reported"},
		{"a source not counted", func(r *report.Report) { r.HardwareErrors.Counts = r.HardwareErrors.Counts[1:] }, "hardware errors counted by source [ghes aer memory_failure]"},
		{"a machine check", func(r *report.Report) {
			r.HardwareErrors.Counts[0].N = 1
			r.HardwareErrors.Last = []kernlog.Event{{Class: "mce", Seconds: 1.5, Message: "mce: [Hardware Error]: CPU 0: Machine Check: 0 Bank 1: b1"}}
		}, "hardware errors logged on a QEMU guest: mce 1 (last at 1.500 s: mce: [Hardware Error]: CPU 0"},
		{"kernel phase missing", func(r *report.Report) { r.Timeline = r.Timeline[1:] }, "phase 0 is init, want kernel"},
		{"init phase missing", func(r *report.Report) { r.Timeline = slices.Delete(r.Timeline, 1, 2) }, "want init"},
		{"step phase missing", func(r *report.Report) { r.Timeline = slices.Delete(r.Timeline, 4, 5) }, "want the report's steps in order"},
		{"steps swapped", func(r *report.Report) {
			r.Timeline[3].Name, r.Timeline[4].Name = r.Timeline[4].Name, r.Timeline[3].Name
		}, "want the report's steps in order"},
		{"step out of order", func(r *report.Report) { r.Timeline[5].Start -= 200 }, "out of order"},
		{"ends before it starts", func(r *report.Report) { r.Timeline[5].End = r.Timeline[5].Start - 1 }, "before it starts"},
		{"exec missing", func(r *report.Report) { r.Timeline = slices.Delete(r.Timeline, len(r.Timeline)-2, len(r.Timeline)-1) }, "want workload-exec"},
		{"ready missing", func(r *report.Report) { r.Timeline = r.Timeline[:len(r.Timeline)-1] }, "want ready"},
		{"ready not ready_ms", func(r *report.Report) { r.ReadyMillis = 1800 }, "ready_ms is 1800"},
		{"kernel not from 0", func(r *report.Report) { r.Timeline[0].Start = 5 }, "want 0"},
		{"background step in the foreground", func(r *report.Report) {
			r.Steps[5].Status = report.Background
		}, "is background but its phase has background=false"},
		{"background ends before it starts", func(r *report.Report) {
			r.Steps = append(r.Steps, report.Step{Name: "net-ipv6", Status: report.Background})
			r.Timeline = timelineOf(r.Steps, r.ReadyMillis)
			r.Timeline[len(r.Timeline)-3].End = 1
		}, "background phase \"step net-ipv6\" ends at 1.0 ms before it starts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := goodReport()
			tc.mutate(r)
			errs := allErrs(r)
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tc.want) {
				t.Errorf("errors %q do not mention %q", msgs, tc.want)
			}
		})
	}
}

func TestTimelineSummary(t *testing.T) {
	r := goodReport()
	r.Steps = append(r.Steps, report.Step{Name: "net-ipv6", Status: report.Background})
	r.Timeline = timelineOf(r.Steps, r.ReadyMillis)
	got := TimelineSummary(r)
	// timelineOf gives each of the n steps 1100/n ms; all but net-ipv6 run
	// one after another from 300 ms, and net-ipv6 starts where they end.
	n := float64(len(r.Steps))
	fg := (n - 1) * 1100 / n
	for _, want := range []string{"kernel 250;", "init 50;", fmt.Sprintf("net-ipv6: background from %.0f;", 300+fg), "workload-exec 10;", "ready 90;", fmt.Sprintf("steps %.0f (", fg)} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q lacks %q", got, want)
		}
	}
}
