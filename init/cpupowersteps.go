package main

import (
	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/cpupower"
)

// cpuPowerSteps set the CPU power policy on bare metal: the performance
// governor (or EPP) and the C-state exit latency held through PM QoS
// (init/cpupower); skipped under a hypervisor, with the reason.
func cpuPowerSteps(m *machine) []boot.Step {
	return cpupower.Steps(cpupower.Options{SysRoot: m.sysRoot, ProcRoot: m.procRoot, DevRoot: m.devRoot, Power: m.cfg.Power})
}
