package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// QdiscStat is one qdisc of the NIC and its counters, as rtnetlink's
// RTM_GETQDISC dump gives them (tc -s qdisc show dev DEV).
type QdiscStat struct {
	Kind, Handle, Parent string
	Drops, Requeues      uint64
	Backlog              uint64 // packets queued now
}

var (
	qdiscDrops = prometheus.NewDesc(Namespace+"_qdisc_drops_total",
		"Packets a qdisc of the NIC dropped (tc -s qdisc). A noqueue qdisc counts none: a packet it cannot hand to a stopped queue is dropped by the device and counted in hotpath_netdev_tx_dropped_total.",
		[]string{"device", "kind", "handle", "parent"}, nil)
	qdiscRequeues = prometheus.NewDesc(Namespace+"_qdisc_requeues_total",
		"Packets the driver handed back to a qdisc of the NIC (its queue stopped after the qdisc had dequeued them).",
		[]string{"device", "kind", "handle", "parent"}, nil)
	qdiscBacklog = prometheus.NewDesc(Namespace+"_qdisc_backlog_packets",
		"Packets queued in a qdisc of the NIC now.",
		[]string{"device", "kind", "handle", "parent"}, nil)
)

// qdiscs exports the counters of every qdisc of the NIC.
type qdiscs struct {
	device string
	list   func(device string) ([]QdiscStat, error)
}

func (c *qdiscs) collect(ch chan<- prometheus.Metric) error {
	qs, err := c.list(c.device)
	if err != nil {
		return err
	}
	for _, q := range qs {
		l := []string{c.device, q.Kind, q.Handle, q.Parent}
		ch <- prometheus.MustNewConstMetric(qdiscDrops, prometheus.CounterValue, float64(q.Drops), l...)
		ch <- prometheus.MustNewConstMetric(qdiscRequeues, prometheus.CounterValue, float64(q.Requeues), l...)
		ch <- prometheus.MustNewConstMetric(qdiscBacklog, prometheus.GaugeValue, float64(q.Backlog), l...)
	}
	return nil
}
