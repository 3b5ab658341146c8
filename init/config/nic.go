package config

import (
	"strconv"
	"time"
)

// NIC is the tuning of the primary network interface (the nic.* keys).
// Package nic takes it as its Options, so a key added here reaches the
// steps without a copy in between.
type NIC struct {
	Channels    int      // nic.channels: combined channels; 0 = min(driver maximum, workload CPUs)
	Coalesce    Coalesce // nic.coalesce
	RxUsecs     int      // nic.rx_usecs: static RX moderation (µs)
	TxUsecs     int      // nic.tx_usecs: static TX moderation (µs)
	GRO         bool     // nic.gro
	IRQAffinity bool     // nic.irq_affinity: queue IRQ i -> workload CPU i
	XPS         bool     // nic.xps: tx queue i used by workload CPU i
	RPS         bool     // nic.rps: true leaves rps_cpus alone
	Qdisc       Qdisc    // nic.qdisc
	Spread      Spread   // nic.spread
	// DeferHardIRQs and GROFlushTimeout are the NIC's NAPI deferral
	// (nic.defer_hard_irqs, nic.gro_flush_timeout; init/napi): off by
	// default, because without a worker that prefers busy polling they
	// only delay interrupts by up to the timeout; see init/napi.
	DeferHardIRQs   int
	GROFlushTimeout time.Duration
	// NUMALocal is nic.numa_local: with fewer queues than workload CPUs,
	// queues take the CPUs of the NIC's NUMA node first (init/numa).
	NUMALocal bool
}

// Coalesce is nic.coalesce: how interrupt moderation is set.
type Coalesce string

// The values of nic.coalesce.
const (
	CoalesceAdaptive Coalesce = "adaptive" // adaptive RX, static where the driver has no adaptive mode
	CoalesceStatic   Coalesce = "static"   // nic.rx_usecs and nic.tx_usecs
	CoalesceOff      Coalesce = "off"      // left as the driver has it
)

// Qdisc is nic.qdisc: what the root qdisc becomes.
type Qdisc string

// The values of nic.qdisc.
const (
	QdiscMQ   Qdisc = "mq"   // mq root with net.core.default_qdisc (noqueue) children
	QdiscKeep Qdisc = "keep" // left as it is
)

// Spread is nic.spread: what happens when the workload has more CPUs than
// the NIC has rx queues.
type Spread string

// The values of nic.spread.
const (
	// SpreadRPS keeps every CPU and steers each queue's flows across the
	// CPUs that share it with RPS, so every worker receives connections.
	SpreadRPS Spread = "rps"
	// SpreadQueues gives the workload only the CPUs that own a queue.
	SpreadQueues Spread = "queues"
)

var nicKeys = []Key{
	{"nic.channels", "0", "combined channels; 0 = min(driver maximum, workload CPUs)",
		intSetter(func(c *Config) *int { return &c.NIC.Channels }, 0, 4096),
		func(c *Config) string { return strconv.Itoa(c.NIC.Channels) }},
	{"nic.coalesce", "adaptive", "adaptive (adaptive RX, static fallback), static, or off (leave as is)",
		enum(func(c *Config) *Coalesce { return &c.NIC.Coalesce }, CoalesceAdaptive, CoalesceStatic, CoalesceOff),
		func(c *Config) string { return string(c.NIC.Coalesce) }},
	{"nic.rx_usecs", "20", "static RX interrupt moderation in µs",
		intSetter(func(c *Config) *int { return &c.NIC.RxUsecs }, 0, 100000),
		func(c *Config) string { return strconv.Itoa(c.NIC.RxUsecs) }},
	{"nic.tx_usecs", "64", "static TX interrupt moderation in µs",
		intSetter(func(c *Config) *int { return &c.NIC.TxUsecs }, 0, 100000),
		func(c *Config) string { return strconv.Itoa(c.NIC.TxUsecs) }},
	{"nic.gro", "off", "GRO on or off",
		boolSetter(func(c *Config) *bool { return &c.NIC.GRO }),
		func(c *Config) string { return onOff(c.NIC.GRO) }},
	{"nic.irq_affinity", "on", "bind queue IRQ i to workload CPU i",
		boolSetter(func(c *Config) *bool { return &c.NIC.IRQAffinity }),
		func(c *Config) string { return onOff(c.NIC.IRQAffinity) }},
	{"nic.xps", "on", "XPS: tx queue i used by workload CPU i",
		boolSetter(func(c *Config) *bool { return &c.NIC.XPS }),
		func(c *Config) string { return onOff(c.NIC.XPS) }},
	{"nic.rps", "off", "off: rps_cpus as nic.spread needs them (none with a queue per CPU); on leaves them as they are",
		boolSetter(func(c *Config) *bool { return &c.NIC.RPS }),
		func(c *Config) string { return onOff(c.NIC.RPS) }},
	{"nic.spread", "rps", "more workload CPUs than rx queues: rps steers each queue's flows to the CPUs sharing it; " +
		"queues gives the workload only queue-owning CPUs",
		enum(func(c *Config) *Spread { return &c.NIC.Spread }, SpreadRPS, SpreadQueues),
		func(c *Config) string { return string(c.NIC.Spread) }},
	{"nic.defer_hard_irqs", "0", "napi_defer_hard_irqs: polls that found work before the queue's interrupt is re-armed " +
		"(preferred busy polling; needs nic.gro_flush_timeout); 0 leaves the kernel's default",
		intSetter(func(c *Config) *int { return &c.NIC.DeferHardIRQs }, 0, 1<<31-1),
		func(c *Config) string { return strconv.Itoa(c.NIC.DeferHardIRQs) }},
	{"nic.gro_flush_timeout", "0s", "gro_flush_timeout: the timer that polls a queue whose interrupt is deferred; 0s leaves the kernel's default",
		durSetter(func(c *Config) *time.Duration { return &c.NIC.GROFlushTimeout }),
		func(c *Config) string { return c.NIC.GROFlushTimeout.String() }},
	{"nic.qdisc", "mq", "mq (mq root, noqueue children) or keep",
		enum(func(c *Config) *Qdisc { return &c.NIC.Qdisc }, QdiscMQ, QdiscKeep),
		func(c *Config) string { return string(c.NIC.Qdisc) }},
	{"nic.numa_local", "on", "fewer rx queues than workload CPUs: queue IRQs (and XPS/RPS pairs) take the CPUs of the NIC's NUMA node first; " +
		"off keeps CPU order",
		boolSetter(func(c *Config) *bool { return &c.NIC.NUMALocal }),
		func(c *Config) string { return onOff(c.NIC.NUMALocal) }},
}
