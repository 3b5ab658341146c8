// Package metrics turns what the kernel already counts into Prometheus
// metrics for the init's management endpoint: the NIC driver's ethtool
// statistics (the ENA allowance counters among them), the interface
// counters, the per-queue statistics of netlink, per-queue interrupts per CPU, softnet, softirqs, the TCP/IP MIB
// counters, socket usage, CPU time, memory, the clock's sync state, the
// workload's state, each boot step's outcome, log shipping, and the init's
// own CPU time.
//
// Every collector reads at scrape time and only then: nothing runs between
// scrapes, and nothing is added to the workload's request path. The files
// are read below a root directory (Options.ProcRoot, Options.SysRoot), so
// the tests run every collector against fake /proc trees. Names follow the
// node_exporter's where one exists (node_netstat_Tcp_RetransSegs becomes
// hotpath_netstat_Tcp_RetransSegs), under the "hotpath" namespace.
package metrics

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hotpath-dev/hotpath/init/kernlog"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/mdlayher/genetlink"
	"github.com/prometheus/client_golang/prometheus"
)

// Namespace prefixes every metric name.
const Namespace = "hotpath"

// Options configures NewRegistry. Collectors whose source is nil are left
// out.
type Options struct {
	ProcRoot string // "/proc"
	SysRoot  string // "/sys"

	// Device is the primary NIC (its ethtool statistics and the kernel's
	// interface counters under SysRoot); Driver is its driver, as a
	// label. Stats reads the ethtool statistics.
	Device string
	Driver string
	Stats  StatsReader
	// QueueStats opens the generic netlink socket the device's per-queue
	// statistics are read over (DialGenetlink); nil leaves the
	// hotpath_queue_ metrics out.
	QueueStats func() (*genetlink.Conn, error)
	// Qdiscs lists the device's qdiscs with their counters; nil leaves
	// the hotpath_qdisc_ metrics out.
	Qdiscs func(device string) ([]QdiscStat, error)
	// QueueIRQ picks the NIC's queue interrupts from /proc/interrupts by
	// action name and returns the queue number; nil exports every
	// numbered interrupt line.
	QueueIRQ func(name string) (queue int, ok bool)

	Workload Workload
	Boot     func() []StepState
	// Timeline is the boot phase by phase (report.Phase); nil leaves the
	// hotpath_boot_phase_ metrics out.
	Timeline func() []report.Phase
	Log      func() LogStats
	// Timex reads the kernel clock's discipline state (adjtimex); nil
	// leaves the clock metrics out.
	Timex func() (Timex, error)
	// PreviousBoot is what a crash of the boot before left in pstore
	// (previousboot.go); nil, or a nil result, leaves its metrics out.
	PreviousBoot func() *report.PreviousBoot
	// HardwareErrors reads the kernel log's hardware-error counts up to now
	// (kernlog); nil leaves hotpath_hardware_errors_total out.
	HardwareErrors func() (kernlog.Snapshot, error)
	// Logf receives a collector's error when it differs from that
	// collector's previous outcome (not on every scrape); nil discards.
	Logf func(format string, args ...any)
}

// NewRegistry returns a registry holding every collector of o. Each
// collector reports whether its last read worked and how long it took
// (hotpath_scrape_collector_success, _duration_seconds), so one unreadable
// file costs its own metrics, not the scrape.
func NewRegistry(o Options) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	add := func(name string, c collector) {
		reg.MustRegister(&timed{name: name, c: c, logf: o.Logf})
	}
	if o.ProcRoot != "" {
		add("interrupts", &interrupts{file: filepath.Join(o.ProcRoot, "interrupts"), queue: o.QueueIRQ})
		add("softnet", &softnet{file: filepath.Join(o.ProcRoot, "net", "softnet_stat")})
		add("softirqs", &softirqs{file: filepath.Join(o.ProcRoot, "softirqs")})
		add("netstat", &netstat{files: []string{filepath.Join(o.ProcRoot, "net", "snmp"), filepath.Join(o.ProcRoot, "net", "netstat")}})
		add("sockstat", &sockstat{file: filepath.Join(o.ProcRoot, "net", "sockstat"), pageSize: os.Getpagesize()})
		add("cpu", &cpuStat{file: filepath.Join(o.ProcRoot, "stat")})
		add("meminfo", &meminfo{file: filepath.Join(o.ProcRoot, "meminfo")})
		add("self", &self{file: filepath.Join(o.ProcRoot, "self", "stat"), pageSize: os.Getpagesize()})
	}
	if o.SysRoot != "" && o.Device != "" {
		add("netdev", &netdev{dir: filepath.Join(o.SysRoot, "class", "net", o.Device, "statistics"), device: o.Device})
	}
	if o.Stats != nil && o.Device != "" {
		add("ethtool", &ethtoolStats{device: o.Device, driver: o.Driver, r: o.Stats})
	}
	if o.QueueStats != nil && o.Device != "" {
		add("qstats", &queueStats{device: o.Device, dial: o.QueueStats})
	}
	if o.Qdiscs != nil && o.Device != "" {
		add("qdisc", &qdiscs{device: o.Device, list: o.Qdiscs})
	}
	if o.Workload != nil {
		add("workload", &workload{w: o.Workload})
	}
	if o.Boot != nil {
		add("boot", &bootSteps{steps: o.Boot})
	}
	if o.Timeline != nil {
		add("boot_timeline", &bootTimeline{phases: o.Timeline})
	}
	if o.Log != nil {
		add("log", &logShipping{stats: o.Log})
	}
	if o.Timex != nil {
		add("timex", &timex{read: o.Timex})
	}
	if o.PreviousBoot != nil {
		add("previous_boot", &previousBoot{read: o.PreviousBoot})
	}
	if o.HardwareErrors != nil {
		add("hardware_errors", &hwErrors{read: o.HardwareErrors})
	}
	return reg
}

// collector is one source of metrics; an error marks the collector's
// scrape as failed (the metrics sent before it still count).
type collector interface {
	collect(ch chan<- prometheus.Metric) error
}

var (
	scrapeDuration = prometheus.NewDesc(Namespace+"_scrape_collector_duration_seconds",
		"Time one collector took to read its sources.", []string{"collector"}, nil)
	scrapeSuccess = prometheus.NewDesc(Namespace+"_scrape_collector_success",
		"1 if the collector read its sources, 0 if it failed (the error is logged on the console once).", []string{"collector"}, nil)
)

// timed wraps a collector as an unchecked prometheus.Collector: the names
// of ethtool and MIB counters are known only at scrape time, so Describe
// announces nothing.
type timed struct {
	name string
	c    collector
	logf func(format string, args ...any)

	mu      sync.Mutex
	lastErr string
}

func (t *timed) Describe(chan<- *prometheus.Desc) {}

func (t *timed) Collect(ch chan<- prometheus.Metric) {
	start := time.Now()
	err := t.c.collect(ch)
	ch <- prometheus.MustNewConstMetric(scrapeDuration, prometheus.GaugeValue, time.Since(start).Seconds(), t.name)
	ok, msg := 1.0, ""
	if err != nil {
		ok, msg = 0, err.Error()
	}
	ch <- prometheus.MustNewConstMetric(scrapeSuccess, prometheus.GaugeValue, ok, t.name)
	t.mu.Lock()
	changed := msg != t.lastErr
	t.lastErr = msg
	t.mu.Unlock()
	if changed && t.logf != nil {
		if err != nil {
			t.logf("metrics: collector %s: %v", t.name, err)
		} else {
			t.logf("metrics: collector %s works again", t.name)
		}
	}
}

// descs caches descriptors by name: building one validates and hashes its
// name and labels, which would otherwise be repeated for every counter of
// every scrape.
type descs struct {
	mu sync.Mutex
	m  map[string]*prometheus.Desc
}

func (d *descs) get(name, help string, labels ...string) *prometheus.Desc {
	d.mu.Lock()
	defer d.mu.Unlock()
	if x, ok := d.m[name]; ok {
		return x
	}
	if d.m == nil {
		d.m = map[string]*prometheus.Desc{}
	}
	x := prometheus.NewDesc(name, help, labels, nil)
	d.m[name] = x
	return x
}

// sanitize makes s usable inside a metric name the way node_exporter does:
// every run of characters other than [A-Za-z0-9_] becomes one "_", and
// leading and trailing underscores go ("Active(anon)" -> "Active_anon").
func sanitize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	pending := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' {
			if pending && b.Len() > 0 {
				b.WriteByte('_')
			}
			pending = false
			b.WriteByte(c)
			continue
		}
		pending = true
	}
	return strings.Trim(b.String(), "_")
}

// errNoData marks a source that has nothing to report here (no such file
// on this kernel); the collector then counts as failed, with this reason.
var errNoData = errors.New("no data")
