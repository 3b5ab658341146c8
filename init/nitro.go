package main

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/numa"
	"github.com/hotpath-dev/hotpath/init/pstore"
	"github.com/hotpath-dev/hotpath/init/report"
)

// previousBootSteps read what a crash of the boot before left in pstore
// (EFI variables), print it, keep its summary for the report and the
// metrics, and clear it (package pstore says why efi-pstore).
func previousBootSteps(m *machine) []boot.Step {
	pb := &report.PreviousBoot{}
	c := pstore.Capture{Dir: filepath.Join(m.sysRoot, "fs/pstore"), SysRoot: m.sysRoot, Logf: m.con.Logf, Out: pb}
	step := c.Step()
	apply := step.Apply
	step.Apply = func(ctx context.Context, d boot.Detail) error {
		err := apply(ctx, d)
		var skip *boot.SkipError
		if !errors.As(err, &skip) {
			m.previous = pb
		}
		return err
	}
	return []boot.Step{step}
}

// numaSteps report the NUMA nodes and the NIC's node and, with fewer
// queues than CPUs, have the NIC's queues take its node's CPUs first
// (package numa). They run before the NIC steps that place the queues.
func numaSteps(m *machine) []boot.Step {
	if m.link == nil {
		return []boot.Step{skipStep(numa.StepName, "no primary network interface")}
	}
	m.numa = &report.NUMA{NICNode: -1}
	l := numa.Locality{SysRoot: m.sysRoot, Link: m.link.Name, CPUs: m.cpus, Enabled: m.cfg.NIC.NUMALocal, Out: m.numa,
		Set: func(order []int) {
			if m.tuner != nil {
				m.tuner.QueueOrder = order
			}
		}}
	return []boot.Step{l.Step()}
}
