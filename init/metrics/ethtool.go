package metrics

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// StatsReader reads a NIC driver's statistics (ETHTOOL_GSTATS, what
// `ethtool -S` prints); *ethtool.Ethtool is one.
type StatsReader interface {
	Stats(device string) (map[string]uint64, error)
}

// ParseEthtoolS reads the output of `ethtool -S DEVICE` ("NIC statistics:"
// then "     name: value" lines). The tests use it for recorded driver
// statistics, such as an ENA instance's.
func ParseEthtoolS(r io.Reader) (map[string]uint64, error) {
	m := map[string]uint64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(v) == "" {
			continue // "NIC statistics:"
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("ethtool -S: %s: %w", k, err)
		}
		m[strings.TrimSpace(k)] = n
	}
	return m, sc.Err()
}

// ethtoolStats exports every driver statistic of one device as
// hotpath_ethtool_<stat>{device, driver, queue}, the stat named as
// `ethtool -S` prints it (sanitised, lower case) so that a name in a
// driver's documentation is the name to query: the ENA allowance counters
// are hotpath_ethtool_pps_allowance_exceeded, _bw_in_allowance_exceeded,
// _bw_out_allowance_exceeded, _conntrack_allowance_exceeded and
// _linklocal_allowance_exceeded. node_exporter names the same way under
// node_ethtool_, but also spells rx/tx as received/transmitted; that is not
// done here, for the same reason.
//
// A per-queue statistic has its "queue_N" part moved into the queue label,
// so queues aggregate with sum by (...) and one name covers every queue:
// virtio-net's rx_queue_0_packets (Linux 6.1) and rx0_packets (6.10 on:
// drivers/net/virtio_net.c virtnet_get_stats_string, "rx%u_%s") are both
// hotpath_ethtool_rx_packets{queue="0"}, ENA's queue_0_rx_cnt is
// hotpath_ethtool_rx_cnt{queue="0"}; device-wide
// statistics have queue="" (which Prometheus stores as no label).
//
// All are untyped (a driver mixes counters and gauges, and the kernel does
// not say which), except the allowance_exceeded counters, which the ENA
// documentation defines as counters.
type ethtoolStats struct {
	device, driver string
	r              StatsReader

	mu    sync.Mutex
	stats map[string]ethtoolStat // by driver statistic name: naming is done once
}

type ethtoolStat struct {
	desc  *prometheus.Desc // nil: not exported (a duplicate name)
	queue string
	typ   prometheus.ValueType
}

var (
	queueStat = regexp.MustCompile(`(^|_)queue_(\d+)(_|$)`)
	// dirQueueStat is virtio-net's newer form: the direction with the
	// queue number glued to it ("rx0_packets", "tx3_hw_drops").
	dirQueueStat = regexp.MustCompile(`^(rx|tx)(\d+)_`)
)

// ethtoolName splits a driver statistic into its metric name and queue.
func ethtoolName(stat string) (name, queue string) {
	s := strings.ToLower(stat)
	if m := queueStat.FindStringSubmatchIndex(s); m != nil {
		queue = s[m[4]:m[5]]
		sep := ""
		if m[2] != m[3] && m[6] != m[7] {
			sep = "_" // "rx_queue_0_packets" -> "rx" + "_" + "packets"
		}
		s = s[:m[2]] + sep + s[m[7]:]
	} else if m := dirQueueStat.FindStringSubmatchIndex(s); m != nil {
		queue = s[m[4]:m[5]]
		s = s[m[2]:m[3]] + "_" + s[m[1]:] // "rx0_packets" -> "rx" + "_" + "packets"
	}
	return Namespace + "_ethtool_" + sanitize(s), queue
}

func (c *ethtoolStats) collect(ch chan<- prometheus.Metric) error {
	stats, err := c.r.Stats(c.device)
	if err != nil {
		return err
	}
	if len(stats) == 0 {
		return fmt.Errorf("ethtool stats %s: %w", c.device, errNoData)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.stats) != len(stats) {
		c.name(stats)
	}
	for k, v := range stats {
		s, ok := c.stats[k]
		if !ok {
			c.name(stats) // the driver's set of statistics changed
			s = c.stats[k]
		}
		if s.desc != nil {
			ch <- prometheus.MustNewConstMetric(s.desc, s.typ, float64(v), c.device, c.driver, s.queue)
		}
	}
	return nil
}

// name (re)builds the descriptors of the statistics, in sorted order so
// that of two statistics whose names clash (they differ only in case or
// punctuation) the same one is exported every time.
func (c *ethtoolStats) name(stats map[string]uint64) {
	keys := make([]string, 0, len(stats))
	for k := range stats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	type series struct{ name, queue string }
	seen := make(map[series]bool, len(keys))
	descs := map[string]*prometheus.Desc{}
	c.stats = make(map[string]ethtoolStat, len(keys))
	for _, k := range keys {
		name, queue := ethtoolName(k)
		if seen[series{name, queue}] || name == Namespace+"_ethtool_" {
			c.stats[k] = ethtoolStat{}
			continue
		}
		seen[series{name, queue}] = true
		typ := prometheus.UntypedValue
		if strings.HasSuffix(name, "_allowance_exceeded") {
			typ = prometheus.CounterValue
		}
		d, ok := descs[name]
		if !ok {
			d = prometheus.NewDesc(name, "Driver statistic "+strings.ToLower(queueStat.ReplaceAllString(k, "${1}queue_N${3}"))+" of ethtool -S.",
				[]string{"device", "driver", "queue"}, nil)
			descs[name] = d
		}
		c.stats[k] = ethtoolStat{desc: d, queue: queue, typ: typ}
	}
}
