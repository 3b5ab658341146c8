package main

import (
	"path/filepath"

	"github.com/hotpath-dev/hotpath/init/console"
	"github.com/hotpath-dev/hotpath/init/kernlog"
)

// openHardwareErrors opens the kernel log for the hardware-error counts
// of the report and /metrics (init/kernlog). Opened at the start, it reads
// from the oldest record, so the errors the kernel logged before the init
// ran (a machine check found in the banks at boot: an error of the boot
// before) count too. nil, with a console line, when it cannot be opened.
func openHardwareErrors(con *console.Console, devRoot string) *kernlog.Counter {
	c, err := kernlog.Open(filepath.Join(devRoot, "kmsg"), kernlog.HardwareErrors)
	if err != nil {
		con.Logf("hardware errors: not counted: %v", err)
		return nil
	}
	return c
}

// hardwareErrors reads the kernel log up to now for the report and says on
// the console when there were any: an operator reading the console of a
// machine that misbehaves sees them without a metrics system.
func (m *machine) hardwareErrors() *kernlog.Snapshot {
	if m.hwErrors == nil {
		return nil
	}
	if err := m.hwErrors.Scan(); err != nil {
		m.con.Logf("hardware errors: %v", err)
	}
	s := m.hwErrors.Snapshot()
	if s.Total() > 0 {
		m.con.Logf("HARDWARE ERRORS logged by the kernel: %s", s)
	}
	if s.Lost > 0 {
		m.con.Logf("hardware errors: %d kernel log records were overwritten before they were read", s.Lost)
	}
	return &s
}
