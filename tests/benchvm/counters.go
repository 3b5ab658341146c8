package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// MgmtPort is where both kinds of guest serve their counters: the
// appliance's management endpoint (init/mgmt, default port) and gpinit's
// copy of it (the same init/metrics collectors).
const MgmtPort = "9100"

// counters are the guest's own counts at one moment, read from its
// /metrics: the NIC's queue interrupt lines of /proc/interrupts
// (hotpath_interrupts_total, summed over CPUs), the CPU time of
// /proc/stat (hotpath_cpu_seconds_total, summed over CPUs), its
// context switch count (hotpath_context_switches_total) and the NET_RX
// softirqs of /proc/softirqs (hotpath_softirqs_total, summed over CPUs).
type counters struct {
	IRQs   float64 // every queue interrupt of the NIC
	RxIRQs float64 // those of receive (virtio "input", ENA/mlx "rx") lines
	Busy   float64 // CPU seconds in every mode but idle and iowait
	Idle   float64 // CPU seconds idle (and iowait)
	Ctxt   float64 // context switches, every CPU (/proc/stat ctxt)
	// NetRx counts NET_RX softirqs, every CPU: one per receive
	// interrupt's poll, busy poll excepted, and one per poll the
	// deferral's gro_flush_timeout timer schedules, which the queue
	// interrupt count does not see.
	NetRx float64
	// TxDropped is the NIC's tx_dropped (hotpath_netdev_tx_dropped_total:
	// under noqueue, every packet handed to a stopped queue), QdiscDrops
	// the drops of its qdiscs, Retrans the TCP segments retransmitted
	// (hotpath_netstat_Tcp_RetransSegs).
	TxDropped, QdiscDrops, Retrans float64
}

// sub is c - base: what happened between two readings.
func (c counters) sub(base counters) counters {
	return counters{IRQs: c.IRQs - base.IRQs, RxIRQs: c.RxIRQs - base.RxIRQs, Busy: c.Busy - base.Busy, Idle: c.Idle - base.Idle,
		Ctxt: c.Ctxt - base.Ctxt, NetRx: c.NetRx - base.NetRx,
		TxDropped: c.TxDropped - base.TxDropped, QdiscDrops: c.QdiscDrops - base.QdiscDrops, Retrans: c.Retrans - base.Retrans}
}

// parseCounters reads a Prometheus text exposition. A guest that exports
// no queue interrupt, no CPU time, no context switch count or no NET_RX
// softirq is an error: a zero would read as a perfect result.
func parseCounters(r io.Reader) (counters, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return counters{}, fmt.Errorf("metrics: %w", err)
	}
	var c counters
	irq, cpu, ctxt := fams["hotpath_interrupts_total"], fams["hotpath_cpu_seconds_total"], fams["hotpath_context_switches_total"]
	if irq == nil || len(irq.Metric) == 0 {
		return c, fmt.Errorf("metrics: no hotpath_interrupts_total (no NIC queue interrupt found)")
	}
	if cpu == nil || len(cpu.Metric) == 0 {
		return c, fmt.Errorf("metrics: no hotpath_cpu_seconds_total")
	}
	if ctxt == nil || len(ctxt.Metric) != 1 {
		return c, fmt.Errorf("metrics: no hotpath_context_switches_total")
	}
	c.Ctxt = ctxt.Metric[0].GetCounter().GetValue()
	netrx := false
	if sirq := fams["hotpath_softirqs_total"]; sirq != nil {
		for _, m := range sirq.Metric {
			if label(m, "type") == "NET_RX" {
				c.NetRx += m.GetCounter().GetValue()
				netrx = true
			}
		}
	}
	if !netrx {
		return c, fmt.Errorf("metrics: no NET_RX in hotpath_softirqs_total")
	}
	for _, m := range irq.Metric {
		if label(m, "queue") == "" {
			continue // not a queue line (exported when the guest could not name its queues)
		}
		v := m.GetCounter().GetValue()
		c.IRQs += v
		if isRx(label(m, "name")) {
			c.RxIRQs += v
		}
	}
	sum := func(name string) float64 {
		var v float64
		if f := fams[name]; f != nil {
			for _, m := range f.Metric {
				v += m.GetCounter().GetValue() + m.GetUntyped().GetValue()
			}
		}
		return v
	}
	// Only the root's drops: mq's stats are the sum of its children's.
	if f := fams["hotpath_qdisc_drops_total"]; f != nil {
		for _, m := range f.Metric {
			if label(m, "parent") == "root" {
				c.QdiscDrops += m.GetCounter().GetValue() + m.GetUntyped().GetValue()
			}
		}
	}
	c.TxDropped, c.Retrans = sum("hotpath_netdev_tx_dropped_total"), sum("hotpath_netstat_Tcp_RetransSegs")
	for _, m := range cpu.Metric {
		v := m.GetCounter().GetValue()
		switch label(m, "mode") {
		case "idle", "iowait":
			c.Idle += v
		default:
			c.Busy += v
		}
	}
	return c, nil
}

// isRx tells a receive interrupt line by its name: virtio-net's
// "virtio0-input.0", ENA's "ena-...-Tx-Rx-0" (both: counted as receive),
// the generic "eth0-rx-0".
func isRx(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "input") || strings.Contains(n, "rx")
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// scrapeTries and scrapeTimeout bound readCounters: each try is a new
// connection (a new source port, so RSS may put it on another queue).
const (
	scrapeTries   = 4
	scrapeTimeout = 15 * time.Second
)

// readCounters scrapes the guest's management port from inside its
// network namespace, trying again on a new connection when a scrape does
// not answer in time; failed is how many tries did not (a guest whose
// network stalls shows in the table, it does not end the run).
func readCounters(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), host string) (c counters, failed int, err error) {
	for i := 0; i < scrapeTries; i++ {
		if c, err = scrape(ctx, dial, host); err == nil {
			return c, failed, nil
		}
		failed++
		log.Printf("scrape %s:%s: %v", host, MgmtPort, err)
	}
	return c, failed, err
}

func scrape(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), host string) (counters, error) {
	c := &http.Client{Timeout: scrapeTimeout, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+net.JoinHostPort(host, MgmtPort)+"/metrics", nil)
	if err != nil {
		return counters{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return counters{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return counters{}, fmt.Errorf("GET /metrics: %s: %s", resp.Status, b)
	}
	return parseCounters(resp.Body)
}
