package mgmt

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Stats counts what the guard did, for /metrics: whether, and how hard,
// someone pushes the endpoint past its limits. Safe for concurrent use;
// the zero value is ready.
type Stats struct {
	Accepted atomic.Uint64 // connections admitted
	Refused  atomic.Uint64 // connections refused (held, then reset)
	Evicted  atomic.Uint64 // connections closed to make room for a newcomer
	Delayed  atomic.Uint64 // requests that waited for their address's token
	Open     atomic.Int64  // connections open now
	Held     atomic.Int64  // refused connections held now
}

// Collectors returns the counters as hotpath_mgmt_* metrics.
func (s *Stats) Collectors() []prometheus.Collector {
	counter := func(name, help string, v *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "hotpath_mgmt_" + name, Help: help},
			func() float64 { return float64(v.Load()) })
	}
	gauge := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hotpath_mgmt_" + name, Help: help},
			func() float64 { return float64(v.Load()) })
	}
	return []prometheus.Collector{
		counter("connections_accepted_total", "Connections the management endpoint admitted.", &s.Accepted),
		counter("connections_refused_total", "Connections refused past the per-address or total limit (held, then reset).", &s.Refused),
		counter("connections_evicted_total", "Idle or silent connections closed to make room for a newcomer.", &s.Evicted),
		counter("requests_delayed_total", "Requests that waited for their address's rate-limit token.", &s.Delayed),
		gauge("connections_open", "Connections the management endpoint holds.", &s.Open),
		gauge("connections_held", "Refused connections held before their reset.", &s.Held),
	}
}
