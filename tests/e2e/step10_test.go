package e2e

import (
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/inspector"
)

// step10Guest is a boot with step 10 on: the report's step, what the
// inspector reads, the console's busy-poll line.
func step10Guest() (*report.Report, *inspector.Snapshot, string) {
	rep := &report.Report{Kernel: "6.12.117-hotpath", Steps: []report.Step{{
		Name: "nic-napi-defer", Status: report.Applied,
		Detail: map[string]string{"napi_defer_hard_irqs": "100", "gro_flush_timeout": "50000", "workload_prefer_busy_poll": "true"},
	}}}
	s := &inspector.Snapshot{Release: "6.12.117-hotpath", Files: map[string]string{
		"/sys/class/net/eth0/napi_defer_hard_irqs": "100\n",
		"/sys/class/net/eth0/gro_flush_timeout":    "50000\n",
	}}
	console := "hotpath: epoll busy polling: busy_poll_usecs=0 busy_poll_budget=0 prefer_busy_poll=1 (read back from the kernel); sockets: ...\n" +
		"hotpath: ready: 2 workers on cpus 0-1 listening on [::]:8080\n"
	return rep, s, console
}

func TestStep10FromConfig(t *testing.T) {
	s, err := Step10FromConfig(map[string]string{"nic.defer_hard_irqs": "100", "nic.gro_flush_timeout": "50µs", "nic.prefer_busy_poll": "on"})
	if err != nil || s != (Step10{100, 50000, true}) || !s.On() {
		t.Errorf("Step10FromConfig = %+v, %v", s, err)
	}
	if s, err := Step10FromConfig(map[string]string{"nic.defer_hard_irqs": "0", "nic.gro_flush_timeout": "0s", "nic.prefer_busy_poll": "off"}); err != nil || s.On() {
		t.Errorf("off: %+v, %v", s, err)
	}
	for _, cfg := range []map[string]string{
		{"nic.gro_flush_timeout": "0s", "nic.prefer_busy_poll": "off"},
		{"nic.defer_hard_irqs": "0", "nic.prefer_busy_poll": "off"},
		{"nic.defer_hard_irqs": "x", "nic.gro_flush_timeout": "0s", "nic.prefer_busy_poll": "off"},
		{"nic.defer_hard_irqs": "0", "nic.gro_flush_timeout": "50", "nic.prefer_busy_poll": "off"},
		{"nic.defer_hard_irqs": "0", "nic.gro_flush_timeout": "0s"},
		{"nic.defer_hard_irqs": "0", "nic.gro_flush_timeout": "0s", "nic.prefer_busy_poll": "yes"},
	} {
		if _, err := Step10FromConfig(cfg); err == nil {
			t.Errorf("Step10FromConfig(%v): no error", cfg)
		}
	}
}

func TestCheckStep10(t *testing.T) {
	on := Step10{DeferHardIRQs: 100, GROFlushTimeout: 50000, Prefer: true}
	deferOnly := Step10{DeferHardIRQs: 100, GROFlushTimeout: 50000}
	rep, s, console := step10Guest()
	for _, err := range append(append(CheckStep10(on, rep, s, "eth0"), CheckBusyPollLine(on, console)...), CheckKernelSeries(rep, s)...) {
		t.Error(err)
	}
	off := Step10{}
	offRep := &report.Report{Steps: []report.Step{{Name: "nic-napi-defer", Status: report.Skipped, Reason: "left at the kernel's defaults"}}}
	offSnap := &inspector.Snapshot{Files: map[string]string{
		"/sys/class/net/eth0/napi_defer_hard_irqs": "0\n", "/sys/class/net/eth0/gro_flush_timeout": "0\n"}}
	for _, err := range append(CheckStep10(off, offRep, offSnap, "eth0"), CheckBusyPollLine(off, "hotpath: ready: 2 workers\n")...) {
		t.Errorf("off: %v", err)
	}

	for _, tc := range []struct {
		name   string
		want   Step10
		mutate func(r *report.Report, s *inspector.Snapshot, console *string)
		msg    string
	}{
		{"step skipped", on, func(r *report.Report, _ *inspector.Snapshot, _ *string) {
			r.Steps[0].Status, r.Steps[0].Reason = report.Skipped, "eth0: kernel has no napi_defer_hard_irqs"
		}, "nic-napi-defer skipped"},
		{"step missing", on, func(r *report.Report, _ *inspector.Snapshot, _ *string) { r.Steps = nil }, "missing"},
		{"kernel took less", on, func(r *report.Report, s *inspector.Snapshot, _ *string) {
			r.Steps[0].Detail["gro_flush_timeout"] = "20000"
			s.Files["/sys/class/net/eth0/gro_flush_timeout"] = "20000\n"
		}, "the image asked for 50000"},
		{"report lies", on, func(_ *report.Report, s *inspector.Snapshot, _ *string) {
			s.Files["/sys/class/net/eth0/napi_defer_hard_irqs"] = "0\n"
		}, "the boot report lies: napi_defer_hard_irqs=100, the inspector reads 0"},
		{"inspector did not read", on, func(_ *report.Report, s *inspector.Snapshot, _ *string) {
			delete(s.Files, "/sys/class/net/eth0/gro_flush_timeout")
		}, "gro_flush_timeout not read"},
		{"no detail", on, func(r *report.Report, _ *inspector.Snapshot, _ *string) { r.Steps[0].Detail = nil }, "reports no napi_defer_hard_irqs"},
		{"no busy-poll line", on, func(_ *report.Report, _ *inspector.Snapshot, c *string) {
			*c = "hotpath: ready: 2 workers\n"
		}, "logged no epoll busy-poll parameters"},
		{"kernel refused", on, func(_ *report.Report, _ *inspector.Snapshot, c *string) {
			*c = "hotpath: epoll busy polling: not set: not supported by this kernel; plain epoll\n"
		}, "did not take prefer_busy_poll=1"},
		{"not preferred", on, func(_ *report.Report, _ *inspector.Snapshot, c *string) {
			*c = strings.Replace(*c, "prefer_busy_poll=1", "prefer_busy_poll=0", 1)
		}, "did not take prefer_busy_poll=1"},
		{"deferral alone, preference reported", deferOnly, func(r *report.Report, s *inspector.Snapshot, c *string) {
			*c = "hotpath: ready: 2 workers\n"
		}, "workload_prefer_busy_poll \"true\", the image asks for false"},
		{"deferral alone, preferred", deferOnly, func(r *report.Report, s *inspector.Snapshot, c *string) {
			r.Steps[0].Detail["workload_prefer_busy_poll"] = "false"
		}, "the preference for busy polling is off, but the workload set"},
		{"off but applied", off, func(r *report.Report, s *inspector.Snapshot, c *string) {}, "leaves step 10 off"},
		{"off but set", off, func(r *report.Report, s *inspector.Snapshot, c *string) {
			r.Steps[0].Status = report.Skipped
		}, "the workload set epoll busy-poll parameters"},
		{"6.1", on, func(r *report.Report, s *inspector.Snapshot, _ *string) {
			r.Kernel, s.Release = "6.1.158-hotpath", "6.1.158-hotpath"
		}, "the default image is Linux 6.12"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, s, console := step10Guest()
			tc.mutate(rep, s, &console)
			errs := CheckStep10(tc.want, rep, s, "eth0")
			errs = append(errs, CheckBusyPollLine(tc.want, console)...)
			errs = append(errs, CheckKernelSeries(rep, s)...)
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tc.msg) {
				t.Errorf("errors %q do not mention %q", msgs, tc.msg)
			}
		})
	}
}

// The configuration the step-10 boot bakes in says what the check expects.
func TestStep10Config(t *testing.T) {
	c, err := config.Parse(strings.NewReader(step10Config))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Step10FromConfig(c.Map()); err != nil || got != step10Want {
		t.Errorf("%q parses to %+v (%v), the check expects %+v", step10Config, got, err, step10Want)
	}
	d := config.Default()
	if got, err := Step10FromConfig(d.Map()); err != nil || got.On() {
		t.Errorf("defaults: %+v (%v), documented as off", got, err)
	}
}
