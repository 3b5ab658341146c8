// Package napi sets a NIC's NAPI interrupt deferral, the kernel half of
// preferred busy polling (the case study's step 10).
//
// Two netdev attributes (net/core/net-sysfs.c, Linux 5.11+ for the first)
// decide what happens when a NAPI poll finds work:
//
//   - napi_defer_hard_irqs: how many polls in a row may come up empty,
//     after one that found work, before the queue's interrupt is re-armed
//     (net/core/dev.c napi_complete_done: the count is reset to this value
//     by every poll with work and decremented by every completion);
//   - gro_flush_timeout (nanoseconds): the timer that polls again while
//     the interrupt is masked, so that a quiet application cannot strand
//     packets.
//
// Up to 6.12 both are per netdev (dev->napi_defer_hard_irqs, read by every
// NAPI instance of the device); 6.13 adds per-NAPI values through the
// netdev netlink family (napi-set) and irq_suspend_timeout. The step
// writes the netdev attributes, which on 6.13 also set every NAPI's.
//
// A worker whose epoll instance prefers busy polling (server/busypoll:
// EPIOCSPARAMS prefer_busy_poll, Linux 6.9) then keeps finding work in its
// own busy loop and its queue raises no interrupts at all while it does
// (Documentation/networking/napi.rst, "Preferred busy polling"). Without a
// busy-polling application the same settings only delay interrupts by up
// to gro_flush_timeout, which is why both are keys and the timeout is
// short.
package napi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/internal/sysfsattr"
)

// StepName is the boot report's name of the step.
const StepName = "nic-napi-defer"

// Settings are the two attributes' values. Zero for both leaves the
// kernel's defaults (0 and 0: every poll re-arms the interrupt).
type Settings struct {
	DeferHardIRQs   int           // napi_defer_hard_irqs; the kernel takes 0..S32_MAX
	GROFlushTimeout time.Duration // gro_flush_timeout, whole nanoseconds
	// Prefer asks the workload to prefer busy polling (PreferEnv); it
	// needs the deferral (init/config's NIC.PreferBusyPoll says why it is
	// separate).
	Prefer bool
}

// PreferEnv is the workload contract's variable that tells the workload
// the NIC's deferral is set, so that its epoll instances complete preferred
// busy polling (server.ConfigFromEnv reads it; a workload's own
// -prefer-busy-poll flag overrides it, and other workloads ignore it).
const PreferEnv = "HOTPATH_PREFER_BUSY_POLL"

// WorkloadEnv is what the workload's environment gets for s: PreferEnv=1
// when s asks for the preference and defers interrupts (a preference
// without the deferral re-arms the interrupt after every busy poll),
// nothing otherwise. A deferral without the preference is the kernel's
// software interrupt coalescing: a packet may wait up to the timeout.
func WorkloadEnv(s Settings) []string {
	if s.Prefer && s.DeferHardIRQs > 0 && s.GROFlushTimeout > 0 {
		return []string{PreferEnv + "=1"}
	}
	return nil
}

// Off reports whether s asks for nothing.
func (s Settings) Off() bool { return s.DeferHardIRQs == 0 && s.GROFlushTimeout == 0 && !s.Prefer }

// Check refuses what the kernel would refuse (net-sysfs.c
// change_napi_defer_hard_irqs: more than S32_MAX is -ERANGE) and a
// deferral without a timer (interrupts masked with nothing to poll the
// queue again but the application).
func (s Settings) Check() error {
	switch {
	case s.DeferHardIRQs < 0 || s.DeferHardIRQs > 1<<31-1:
		return fmt.Errorf("napi_defer_hard_irqs %d: want 0..%d", s.DeferHardIRQs, 1<<31-1)
	case s.GROFlushTimeout < 0:
		return fmt.Errorf("gro_flush_timeout %v: negative", s.GROFlushTimeout)
	case s.DeferHardIRQs > 0 && s.GROFlushTimeout == 0:
		return errors.New("napi_defer_hard_irqs without gro_flush_timeout: a masked interrupt would wait for the application alone")
	case s.Prefer && s.DeferHardIRQs == 0:
		return errors.New("a preference for busy polling without napi_defer_hard_irqs: every busy poll would re-arm the interrupt")
	}
	return nil
}

// plan is what apply wrote and verify reads back: the attribute files
// and the values, shared so verify never re-derives them.
type plan struct {
	files  [2]string
	values [2]int64
}

// Step returns the boot step for the interface link() names when the step
// runs (the NIC is discovered by an earlier step). sysRoot is "/sys".
func Step(sysRoot string, link func() string, s Settings) boot.Step {
	var p plan
	return boot.Step{
		Name: StepName,
		Apply: func(_ context.Context, d boot.Detail) error {
			if s.Off() {
				return boot.Skip("napi_defer_hard_irqs and gro_flush_timeout left at the kernel's defaults")
			}
			if err := s.Check(); err != nil {
				return err
			}
			dev := filepath.Join(sysRoot, "class", "net", link())
			p = plan{
				files:  [2]string{filepath.Join(dev, "napi_defer_hard_irqs"), filepath.Join(dev, "gro_flush_timeout")},
				values: [2]int64{int64(s.DeferHardIRQs), s.GROFlushTimeout.Nanoseconds()},
			}
			d["workload_prefer_busy_poll"] = strconv.FormatBool(s.Prefer)
			for i, f := range p.files {
				if err := sysfsattr.WriteExisting(f, strconv.FormatInt(p.values[i], 10)); err != nil {
					if errors.Is(err, fs.ErrNotExist) {
						return boot.Skip("%s: kernel has no %s", link(), filepath.Base(f))
					}
					return fmt.Errorf("write %s: %w", f, err)
				}
			}
			return nil
		},
		Verify: func(_ context.Context, d boot.Detail) error {
			for i, f := range p.files {
				got, err := sysfsattr.ReadInt(f)
				if err != nil {
					return err
				}
				d[filepath.Base(f)] = strconv.FormatInt(got, 10)
				if got != p.values[i] {
					return fmt.Errorf("%s: kernel has %d, want %d", f, got, p.values[i])
				}
			}
			return nil
		},
	}
}
