package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hotpath-dev/hotpath/init/napi"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/inspector"
)

// DefaultKernelSeries is the kernel series the default image is built
// from (Debian's linux-source-6.12, issue 26).
const DefaultKernelSeries = "6.12"

// step10Config turns step 10 on in an image's init configuration, both
// halves, with the values init/config documents; step10Want is what it
// asks for.
const step10Config = "nic.defer_hard_irqs=100\nnic.gro_flush_timeout=50us\nnic.prefer_busy_poll=on\n"

var step10Want = Step10{DeferHardIRQs: 100, GROFlushTimeout: 50000, Prefer: true}

// Step10 is the case study's step 10 as configured for one image: the
// NIC's NAPI interrupt deferral (nic.defer_hard_irqs,
// nic.gro_flush_timeout), and the workload's half, epoll's preference for
// busy polling (nic.prefer_busy_poll; CheckBusyPollLine).
type Step10 struct {
	DeferHardIRQs   int64
	GROFlushTimeout int64 // nanoseconds, as sysfs says it
	Prefer          bool
}

// On reports whether the image asks for the deferral.
func (s Step10) On() bool { return s.DeferHardIRQs > 0 || s.GROFlushTimeout > 0 }

// Step10FromConfig reads the step's keys from an effective init
// configuration (the manifest's, or the report's).
func Step10FromConfig(cfg map[string]string) (Step10, error) {
	var s Step10
	v, ok := cfg["nic.defer_hard_irqs"]
	if !ok {
		return s, fmt.Errorf("configuration has no nic.defer_hard_irqs")
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return s, fmt.Errorf("nic.defer_hard_irqs %q: %w", v, err)
	}
	v, ok = cfg["nic.gro_flush_timeout"]
	if !ok {
		return s, fmt.Errorf("configuration has no nic.gro_flush_timeout")
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return s, fmt.Errorf("nic.gro_flush_timeout %q: %w", v, err)
	}
	v, ok = cfg["nic.prefer_busy_poll"]
	if !ok || (v != "on" && v != "off") {
		return s, fmt.Errorf("configuration has no nic.prefer_busy_poll on or off (%q)", v)
	}
	return Step10{DeferHardIRQs: n, GROFlushTimeout: d.Nanoseconds(), Prefer: v == "on"}, nil
}

// CheckStep10 checks step 10's kernel half three ways: the boot report's
// nic-napi-defer step against the configuration (applied with the
// configured values when asked for, skipped when not), and what the
// report says the kernel took against what the inspector read itself from
// the interface's sysfs attributes (napi_defer_hard_irqs,
// gro_flush_timeout; per netdev: 6.12 has no per-NAPI values, they came
// with 6.13's netdev netlink napi-set). nic is the primary interface.
func CheckStep10(want Step10, rep *report.Report, s *inspector.Snapshot, nic string) []error {
	step, ok := rep.Step(napi.StepName)
	if !ok {
		return []error{fmt.Errorf("step %s missing from the report", napi.StepName)}
	}
	return append(CheckStep10Report(want, rep), checkStep10Sysfs(want, step, s, nic)...)
}

// CheckStep10Report is CheckStep10's half that needs no inspector: the
// nic-napi-defer step applied with the configured values when they are
// asked for, skipped when not.
func CheckStep10Report(want Step10, rep *report.Report) []error {
	var errs []error
	bad := func(f string, a ...any) { errs = append(errs, fmt.Errorf(f, a...)) }
	step, ok := rep.Step(napi.StepName)
	if !ok {
		return []error{fmt.Errorf("step %s missing from the report", napi.StepName)}
	}
	if want.On() {
		for attr, v := range map[string]int64{"napi_defer_hard_irqs": want.DeferHardIRQs, "gro_flush_timeout": want.GROFlushTimeout} {
			said, err := strconv.ParseInt(step.Detail[attr], 10, 64)
			switch {
			case err != nil:
				bad("step %s reports no %s (%q)", napi.StepName, attr, step.Detail[attr])
			case said != v:
				bad("step %s: the kernel took %s=%d, the image asked for %d", napi.StepName, attr, said, v)
			}
		}
		if said := step.Detail["workload_prefer_busy_poll"]; said != strconv.FormatBool(want.Prefer) {
			bad("step %s: workload_prefer_busy_poll %q, the image asks for %v", napi.StepName, said, want.Prefer)
		}
	}
	switch {
	case want.On() && step.Status != report.Applied:
		bad("step %s %s (%s%s), the image asks for defer_hard_irqs=%d gro_flush_timeout=%dns",
			napi.StepName, step.Status, step.Reason, step.Error, want.DeferHardIRQs, want.GROFlushTimeout)
	case !want.On() && step.Status != report.Skipped:
		bad("step %s %s, the image leaves step 10 off", napi.StepName, step.Status)
	}
	return errs
}

// checkStep10Sysfs compares what the step says the kernel took with the
// inspector's own read of the attributes.
func checkStep10Sysfs(want Step10, step report.Step, s *inspector.Snapshot, nic string) []error {
	var errs []error
	bad := func(f string, a ...any) { errs = append(errs, fmt.Errorf(f, a...)) }
	dir := "/sys/class/net/" + nic + "/"
	for _, attr := range []string{"napi_defer_hard_irqs", "gro_flush_timeout"} {
		raw, ok := s.Files[dir+attr]
		if !ok {
			bad("inspector: %s%s not read: %s", dir, attr, s.Errors[dir+attr])
			continue
		}
		seen, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
		if err != nil {
			bad("inspector: %s%s = %q: %v", dir, attr, raw, err)
			continue
		}
		if !want.On() {
			if seen != 0 {
				bad("inspector: %s%s = %d, the image leaves step 10 off (kernel default 0)", dir, attr, seen)
			}
			continue
		}
		if said, err := strconv.ParseInt(step.Detail[attr], 10, 64); err == nil && said != seen {
			bad("the boot report lies: %s=%d, the inspector reads %d from %s%s", attr, said, seen, dir, attr)
		}
	}
	return errs
}

// busyPollLine is the server's ready log of what the kernel took of its
// epoll busy-poll parameters (server/busypoll.go, read back with
// EPIOCGPARAMS by the process itself: nothing outside it can read them).
var busyPollLine = regexp.MustCompile(`hotpath: epoll busy polling: (.*)`)

// CheckBusyPollLine checks step 10's workload half on the console of a
// boot whose workload is the hotpath server: with the preference on
// (and the deferral it needs), each worker's epoll instance prefers busy
// polling (prefer_busy_poll=1 read back from a 6.9+ kernel); with it off,
// the server asks for nothing and logs no such line.
func CheckBusyPollLine(want Step10, console string) []error {
	m := busyPollLine.FindStringSubmatch(console)
	on := want.On() && want.Prefer
	switch {
	case !on && m != nil:
		return []error{fmt.Errorf("the preference for busy polling is off, but the workload set epoll busy-poll parameters: %s", m[1])}
	case !on:
		return nil
	case m == nil:
		return []error{fmt.Errorf("step 10 is on, but the workload logged no epoll busy-poll parameters (no %q line)", "hotpath: epoll busy polling:")}
	case !strings.Contains(m[1], "prefer_busy_poll=1") || !strings.Contains(m[1], "read back from the kernel"):
		return []error{fmt.Errorf("step 10 is on, but the workload's epoll instances did not take prefer_busy_poll=1: %s", m[1])}
	}
	return nil
}

// CheckKernelSeries checks that a default image runs the default kernel
// series, as both the boot report and the inspector's uname say.
func CheckKernelSeries(rep *report.Report, s *inspector.Snapshot) []error {
	var errs []error
	for who, rel := range map[string]string{"the boot report": rep.Kernel, "the inspector": s.Release} {
		if !strings.HasPrefix(rel, DefaultKernelSeries+".") {
			errs = append(errs, fmt.Errorf("%s names kernel %q, the default image is Linux %s", who, rel, DefaultKernelSeries))
		}
	}
	return errs
}
