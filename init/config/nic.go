package config

import (
	"fmt"
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
	BQL         BQL      // nic.bql
	Spread      Spread   // nic.spread
	// DeferHardIRQs and GROFlushTimeout are the NIC's NAPI deferral
	// (nic.defer_hard_irqs, nic.gro_flush_timeout; init/napi), the kernel
	// half of the case study's step 10; PreferBusyPoll
	// (nic.prefer_busy_poll) puts HOTPATH_PREFER_BUSY_POLL=1 in the
	// workload's environment, which the hotpath server turns into epoll's
	// prefer_busy_poll (EPIOCSPARAMS, Linux 6.9+), the other half. 100 and 50µs are the values to ask
	// for: those of the kernel's own test of the mechanism
	// (tools/testing/selftests/net/busy_poll_test.sh, 6.13, by the authors
	// of Cai and Karsten, SIGMETRICS 2024). The count is of empty polls
	// after one that found work (Documentation/networking/napi.rst,
	// "Software IRQ coalescing"), so a queue stays masked while its worker
	// keeps finding work and, once traffic stops, is polled by its 50µs
	// timer at most 100 times (5 ms) before its interrupt is re-armed.
	//
	// Both stay off by default. Issue 42 settled it on counts per
	// request that do not depend on the host's speed (`make bench-vm
	// BENCHVM_GUESTS=6.12,6.12-defer,6.12-step10`, 2026-12-05, medians of
	// 3 rounds; README has the table): the deferral alone takes receive
	// interrupts from 0.138 to 0.004 per request but NET_RX softirqs rise
	// from 0.212 to 0.295 and context switches from 0.120 to 0.155: the
	// receive polls start from the gro_flush_timeout timer (an hrtimer
	// interrupt) instead of the NIC's, moved rather than saved without a
	// busy-polling workload. With the preference too (0.306, 0.179) the
	// guest lost a queue again in one round of three, in both runs that
	// day (the race under PreferBusyPoll).
	//
	// Earlier, from `make bench-vm` (TCG, 2
	// vCPUs, virtio-net, wrk -t2 -c64 -d10s, median of 3 interleaved
	// rounds, 2026-12-01; receive / all queue interrupts per request, guest
	// CPU per request): 6.12 off 0.277 / 0.626, 454 µs; the deferral alone
	// 0.030 / 0.234, 412 µs; step 10 on 0.041 / 0.365, 640 µs (6.1 off
	// 0.202 / 0.565, 777 µs; Debian's stock kernel 0.266 / 1.151, 2939 µs).
	// The deferral cuts receive interrupts per request 7-20 fold
	// (0.008-0.045 with it, 0.18-0.44 without, over every run of the day);
	// TX interrupts stay, because virtio_net's TX NAPI completes
	// with work_done 0 and is never deferred (ENA masks one vector per
	// Tx-Rx pair with its RX). Under TCG requests/s is noise and the
	// busy-polling workers' emulated CPU shows (3653 off, 2420 on). But in
	// three of the six guests run with step 10 on, the guest stopped
	// answering some new connections once the load had stopped (its
	// management port, 60 s and more, while other connections to the same
	// port were served, as if one queue no longer received; in the last,
	// ARP went unanswered too), which none of the guests with step 10 off
	// (five) or with the deferral alone (three) showed. The cause is the
	// preference, not the deferral (PreferBusyPoll says why): with the
	// timer at 2µs, so that it fires during nearly every last poll
	// (`go run ./tests/benchvm -guests 6.12-defer,6.12-step10
	// -gro-flush-timeout 2us -runs 3 -d 8s`, 2026-12-02), the guest with
	// step 10 on stopped answering ARP during the uncounted warm-up run
	// and every round failed ("no route to host"); the one with the
	// deferral alone served all three (1,705-2,530 req/s, 0.004-0.058
	// receive interrupts per request). The deferral stays off by default
	// too, until measured on ENA. Without a busy-polling worker the deferral also makes a packet
	// that arrives while its queue is masked wait up to the timeout for
	// the timer
	// (napi.rst: the pledge is revoked only after gro_flush_timeout
	// without a busy poll; 6.13's irq_suspend_timeout is not in Debian 12).
	// 6.12 holds both values per netdev: per-NAPI values came with 6.13.
	DeferHardIRQs   int
	GROFlushTimeout time.Duration
	// PreferBusyPoll is nic.prefer_busy_poll, the workload's half, a key
	// of its own and off even with a deferral, because of a race in Linux
	// 6.12 that loses a queue (net/core/dev.c): busy_poll_stop, with
	// prefer_busy_poll, arms the queue's gro_flush_timeout timer while its
	// busy poller still owns the NAPI (NAPI_STATE_SCHED) and then polls
	// it once more. If the timer fires during that poll, napi_watchdog
	// finds SCHED taken and does nothing (HRTIMER_NORESTART); if the poll
	// used its whole budget, __busy_poll_stop (skip_schedule) only clears
	// SCHED. The driver left the queue's interrupt off (virtnet_poll
	// re-enables it only below budget), no timer is pending, and ep_busy_loop
	// forgets a napi_id that found nothing: the queue is neither
	// interrupted nor polled again, and what the NIC hashes to it (new
	// connections, ARP) is lost. A final poll longer than the timeout is
	// routine under TCG; on hardware it needs a stall of 50µs in softirq.
	// The deferral alone never arms the timer before giving SCHED up
	// (napi_complete_done), which fits what bench-vm saw (NIC above).
	PreferBusyPoll bool
	// NUMALocal is nic.numa_local: with fewer queues than workload CPUs,
	// queues take the CPUs of the NIC's NUMA node first (init/numa).
	NUMALocal bool
	// CarrierWait is nic.carrier_wait: how long nic-link-up waits for the
	// carrier after setting the link up; 0 checks the admin state only.
	// 10s by default: 1000BASE-T autonegotiation takes 2-4 s on e1000e
	// and igb, 10GBASE-T and some Broadcom PHYs up to 5-6 s, a virtual NIC
	// (ENA, virtio-net) has it at once; 10 s covers the slow PHYs with
	// room and still names a dead link (cable, switch port, SFP) well
	// before the DHCP client gives up (net.dhcp_retries attempts of
	// net.dhcp_timeout, 25 s by default) and is blamed for it.
	CarrierWait time.Duration
	// TxPushBufLen is nic.tx_push_buf_len: the transmit push buffer, in
	// bytes, where the device offers one (ethtool netlink's
	// tx-push-buf-len, Linux 6.5+; ENA in LLQ mode). 224 by default: 6.12's
	// ENA pushes at most 96 bytes of headers unless told otherwise
	// (ena_eth_com.h ENA_LLQ_HEADER, 128 - 32), and the device drops a
	// packet whose headers do not fit (an IPv6 ACK with timestamps and one
	// SACK block has 98: AWS's ENA best practices); 224 is ENA's large
	// LLQ header (ENA_LLQ_LARGE_HEADER, 256 - 32), which AWS's own driver
	// turns on by itself on Nitro v4 and later. 0 leaves the driver's value.
	TxPushBufLen int
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
	QdiscMQ   Qdisc = "mq"   // mq root with net.core.default_qdisc (pfifo_fast) children
	QdiscKeep Qdisc = "keep" // left as it is
)

// BQL is nic.bql: the byte queue limits of the transmit queues
// (init/bql).
type BQL string

// The values of nic.bql.
const (
	// BQLAuto is inert when the transmit qdisc is noqueue (where a queue
	// BQL stops drops the packet), on otherwise.
	BQLAuto  BQL = "auto"
	BQLOn    BQL = "on"    // the kernel's dynamic limits
	BQLInert BQL = "inert" // limit_min of every tx queue at DQL_MAX_LIMIT: BQL never stops a queue
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
	{"nic.defer_hard_irqs", "0", "napi_defer_hard_irqs: empty polls, after one that found work, before the queue's interrupt is re-armed " +
		"(step 10's kernel half; needs nic.gro_flush_timeout); 0 leaves the kernel's default; to turn it on: 100 with 50us",
		intSetter(func(c *Config) *int { return &c.NIC.DeferHardIRQs }, 0, 1<<31-1),
		func(c *Config) string { return strconv.Itoa(c.NIC.DeferHardIRQs) }},
	{"nic.gro_flush_timeout", "0s", "gro_flush_timeout: the timer that polls a queue whose interrupt is deferred, the longest a packet waits " +
		"when no worker busy-polls; 0s leaves the kernel's default; with nic.defer_hard_irqs=100: 50us",
		durSetter(func(c *Config) *time.Duration { return &c.NIC.GROFlushTimeout }),
		func(c *Config) string { return c.NIC.GROFlushTimeout.String() }},
	{"nic.prefer_busy_poll", "off", "on tells the workload to prefer busy polling, HOTPATH_PREFER_BUSY_POLL=1 (step 10's workload half; " +
		"needs nic.defer_hard_irqs). Off by default: Linux 6.12 can lose a queue when a preferring busy poll stops (see NIC)",
		boolSetter(func(c *Config) *bool { return &c.NIC.PreferBusyPoll }),
		func(c *Config) string { return onOff(c.NIC.PreferBusyPoll) }},
	{"nic.qdisc", "mq", "mq (mq root, children of net.core.default_qdisc: pfifo_fast) or keep",
		enum(func(c *Config) *Qdisc { return &c.NIC.Qdisc }, QdiscMQ, QdiscKeep),
		func(c *Config) string { return string(c.NIC.Qdisc) }},
	{"nic.bql", "auto", "byte queue limits of the tx queues: on keeps the kernel's dynamic limits; inert sets limit_min of every tx queue " +
		"to the maximum, so that BQL never stops a queue; auto is inert when net.core.default_qdisc is noqueue (the case study's step 8, " +
		"where a stopped queue drops the packet) and on otherwise (the default pfifo_fast holds what a stopped queue cannot take)",
		enum(func(c *Config) *BQL { return &c.NIC.BQL }, BQLAuto, BQLOn, BQLInert),
		func(c *Config) string { return string(c.NIC.BQL) }},
	{"nic.numa_local", "on", "fewer rx queues than workload CPUs: queue IRQs (and XPS/RPS pairs) take the CPUs of the NIC's NUMA node first; " +
		"off keeps CPU order",
		boolSetter(func(c *Config) *bool { return &c.NIC.NUMALocal }),
		func(c *Config) string { return onOff(c.NIC.NUMALocal) }},
	{"nic.carrier_wait", "10s", "how long nic-link-up waits for the carrier (a dead link fails that step, named as such), " +
		"at most 1m (the NIC steps after it wait too); 0s checks the admin state only",
		maxDur(durSetter(func(c *Config) *time.Duration { return &c.NIC.CarrierWait }), time.Minute),
		func(c *Config) string { return c.NIC.CarrierWait.String() }},
	{"nic.tx_push_buf_len", "224", "transmit push buffer in bytes where the device offers one (ENA's LLQ header limit: 96 " +
		"unless set, 224 with large LLQ headers); 0 leaves the driver's value",
		intSetter(func(c *Config) *int { return &c.NIC.TxPushBufLen }, 0, 65535),
		func(c *Config) string { return strconv.Itoa(c.NIC.TxPushBufLen) }},
}

// maxDur bounds a duration key: the boot waits that long at worst.
func maxDur(set func(*Config, string) error, hi time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		if d, err := time.ParseDuration(v); err == nil && d > hi {
			return fmt.Errorf("%v is above the maximum, %v", d, hi)
		}
		return set(c, v)
	}
}
