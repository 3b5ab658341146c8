package config

import "strconv"

// Power is the CPU power policy of bare metal (the power.* keys, package
// cpupower).
type Power struct {
	Policy PowerPolicy // power.policy
	// CPULatencyUs is power.cpu_latency_us: the CPU latency PM QoS request
	// PID 1 holds on /dev/cpu_dma_latency, in µs. 2 by default: the
	// cpuidle governor then picks only states that wake within 2 µs, which
	// keeps C1 (MWAIT C1 exits in 1-2 µs in intel_idle's tables from
	// Skylake-SP to Sapphire Rapids, ACPI _CST C1 in 1 µs on AMD EPYC) and
	// excludes C1E (4-10 µs) and C6 (85-290 µs), whose exit a request
	// arriving on an idle core waits for. Idle cores in C1 still halt, so
	// they leave turbo headroom to the busy ones, which polling (0) does
	// not: 0 keeps every idle CPU spinning in POLL.
	CPULatencyUs int
}

// PowerPolicy is power.policy: where the power step acts.
type PowerPolicy string

// The values of power.policy.
const (
	// PowerAuto acts on bare metal only: under a hypervisor the host owns
	// P- and C-states (virtualized EC2 exposes neither, or, on the few
	// sizes with processor state control, means them for the host's
	// sibling tenants too).
	PowerAuto PowerPolicy = "auto"
	PowerOn   PowerPolicy = "on"  // also under a hypervisor, where the knobs exist
	PowerOff  PowerPolicy = "off" // leave the kernel's defaults
)

var powerKeys = []Key{
	{"power.policy", "auto", "CPU power policy (performance governor or EPP, C-state exit latency held through PM QoS): " +
		"auto on bare metal only, on also under a hypervisor, off leaves the kernel's defaults",
		enum(func(c *Config) *PowerPolicy { return &c.Power.Policy }, PowerAuto, PowerOn, PowerOff),
		func(c *Config) string { return string(c.Power.Policy) }},
	{"power.cpu_latency_us", "2", "CPU wake-up latency PID 1 holds through PM QoS (/dev/cpu_dma_latency), µs: " +
		"2 keeps C1 and excludes C1E and deeper; 0 keeps idle CPUs polling",
		intSetter(func(c *Config) *int { return &c.Power.CPULatencyUs }, 0, 2000000000),
		func(c *Config) string { return strconv.Itoa(c.Power.CPULatencyUs) }},
}
