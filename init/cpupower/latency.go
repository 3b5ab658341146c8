package cpupower

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hotpath-dev/hotpath/init/boot"
	"golang.org/x/sys/unix"
)

// QoS is the CPU latency PM QoS interface (Documentation/power/pm_qos_interface.rst).
type QoS interface {
	// Hold adds (or, held already, updates) this process's request for
	// a CPU wake-up latency of at most us µs, kept until it exits.
	Hold(us int32) error
	// Target reads the system-wide target: the lowest request held.
	Target() (int32, error)
}

// DevQoS is the CPU latency QoS device, /dev/cpu_dma_latency. The request
// lives as long as the file stays open (kernel/power/qos.c: release
// removes it), so the descriptor is a raw one, opened with unix.Open: an
// *os.File would be closed by its finalizer once unreachable, and PID 1
// must hold the request for its whole life.
type DevQoS struct {
	Path string
	fd   int
	open bool
}

// Hold writes the request as the binary s32 the device takes
// (cpu_latency_qos_write: a 4-byte value, or a hex string).
func (q *DevQoS) Hold(us int32) error {
	if !q.open {
		fd, err := unix.Open(q.Path, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", q.Path, err)
		}
		q.fd, q.open = fd, true
	}
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], uint32(us))
	if _, err := unix.Write(q.fd, b[:]); err != nil {
		return fmt.Errorf("write %s: %w", q.Path, err)
	}
	return nil
}

// Target reads the aggregated target through the held descriptor
// (cpu_latency_qos_read: the s32 at offset 0).
func (q *DevQoS) Target() (int32, error) {
	if !q.open {
		return 0, fmt.Errorf("%s is not held", q.Path)
	}
	var b [4]byte
	n, err := unix.Pread(q.fd, b[:], 0)
	if err != nil || n != 4 {
		return 0, fmt.Errorf("read %s: %d bytes, %v", q.Path, n, err)
	}
	return int32(binary.NativeEndian.Uint32(b[:])), nil
}

// latency is the cpu-latency step.
type latency struct {
	o    Options
	want int32
}

// apply holds the PM QoS request where a cpuidle driver chooses idle
// states: without one (cpuidle off, or "none") an idle x86 CPU runs HLT
// and nothing here changes what it enters.
func (l *latency) apply(_ context.Context, d boot.Detail) error {
	if err := gate(l.o); err != nil {
		return err
	}
	drv := readTrim(filepath.Join(cpuDir(l.o.SysRoot), "cpuidle/current_driver"))
	if drv == "" || drv == "none" {
		return boot.Skip("no cpuidle driver: the idle loop has no states to choose from (HLT only)")
	}
	d["driver"] = drv
	l.want = int32(l.o.Power.CPULatencyUs)
	if err := l.o.QoS.Hold(l.want); err != nil {
		return err
	}
	d["latency_us"] = strconv.Itoa(int(l.want))
	allowed, excluded := states(l.o.SysRoot, l.want)
	d["allowed"] = strings.Join(allowed, ",")
	if len(excluded) > 0 {
		d["excluded"] = strings.Join(excluded, ",")
	}
	return nil
}

// verify reads the system-wide target back: the request is in force
// when the target is at most what was asked (another holder may ask for
// less).
func (l *latency) verify(_ context.Context, d boot.Detail) error {
	got, err := l.o.QoS.Target()
	if err != nil {
		return err
	}
	d["target_us"] = strconv.Itoa(int(got))
	if got > l.want {
		return fmt.Errorf("cpu latency target reads %d µs, want at most %d", got, l.want)
	}
	return nil
}

// states splits CPU 0's idle states by whether their exit latency fits
// the request (the menu and teo governors skip a state whose
// exit_latency exceeds the latency limit): their names, for the report.
func states(sysRoot string, us int32) (allowed, excluded []string) {
	for i := 0; ; i++ {
		dir := filepath.Join(cpuDir(sysRoot), "cpu0/cpuidle", fmt.Sprintf("state%d", i))
		if _, err := os.Stat(dir); err != nil {
			return allowed, excluded
		}
		name := readTrim(filepath.Join(dir, "name"))
		lat, err := strconv.Atoi(readTrim(filepath.Join(dir, "latency")))
		if err != nil {
			continue
		}
		if int32(lat) <= us {
			allowed = append(allowed, name)
		} else {
			excluded = append(excluded, fmt.Sprintf("%s(%dus)", name, lat))
		}
	}
}
