package metrics

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// fileStats is a StatsReader over recorded `ethtool -S` output.
type fileStats map[string]string // device -> file

func (f fileStats) Stats(dev string) (map[string]uint64, error) {
	file, ok := f[dev]
	if !ok {
		return nil, fmt.Errorf("no such device %s", dev)
	}
	r, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return ParseEthtoolS(r)
}

// enaQueue is how the init names ENA queue interrupts (init/nic).
var enaQueueIRQ = regexp.MustCompile(`^eth0-Tx-Rx-(\d+)$`)

func enaQueue(name string) (int, bool) {
	m := enaQueueIRQ.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	q, _ := strconv.Atoi(m[1])
	return q, true
}

func enaOptions() Options {
	return Options{
		ProcRoot: "testdata/ena", SysRoot: "testdata/ena-sys", Device: "eth0", Driver: "ena",
		Stats: fileStats{"eth0": "testdata/ena/ethtool-S-eth0"}, QueueIRQ: enaQueue,
	}
}

// scrape gathers reg and returns the families by name, failing the test
// on a gather error.
func scrape(t testing.TB, reg prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	m := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		m[f.GetName()] = f
	}
	return m
}

// series finds the one series of name whose labels include want.
func series(t testing.TB, fams map[string]*dto.MetricFamily, name string, want ...string) (*dto.Metric, dto.MetricType) {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	var found []*dto.Metric
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(want); i += 2 {
			if labels[want[i]] != want[i+1] {
				match = false
			}
		}
		if match {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s%v: %d series match", name, want, len(found))
	}
	return found[0], f.GetType()
}

func value(t testing.TB, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	m, _ := series(t, fams, name, labels...)
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	t.Fatalf("%s: no value", name)
	return 0
}

func TestCollectorsENA(t *testing.T) {
	fams := scrape(t, NewRegistry(enaOptions()))
	for _, c := range []string{"interrupts", "softnet", "softirqs", "netstat", "sockstat", "cpu", "meminfo", "self", "netdev", "ethtool"} {
		if v := value(t, fams, "hotpath_scrape_collector_success", "collector", c); v != 1 {
			t.Errorf("collector %s: success %v", c, v)
		}
	}
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
		typ    dto.MetricType
	}{
		// The allowance counters, named as the ENA documentation does.
		{"hotpath_ethtool_pps_allowance_exceeded", []string{"device", "eth0", "driver", "ena"}, 3456, dto.MetricType_COUNTER},
		{"hotpath_ethtool_bw_in_allowance_exceeded", nil, 11, dto.MetricType_COUNTER},
		{"hotpath_ethtool_bw_out_allowance_exceeded", nil, 22, dto.MetricType_COUNTER},
		{"hotpath_ethtool_conntrack_allowance_exceeded", nil, 44, dto.MetricType_COUNTER},
		{"hotpath_ethtool_linklocal_allowance_exceeded", nil, 55, dto.MetricType_COUNTER},
		{"hotpath_ethtool_conntrack_allowance_available", nil, 1234567, dto.MetricType_UNTYPED},
		// Per queue: queue_N moves into the label.
		{"hotpath_ethtool_tx_cnt", []string{"queue", "2"}, 1000002, dto.MetricType_UNTYPED},
		{"hotpath_ethtool_rx_bytes", []string{"queue", "3"}, 300000003, dto.MetricType_UNTYPED},
		{"hotpath_ethtool_tx_queue_stop", []string{"queue", "0"}, 0, dto.MetricType_UNTYPED},
		{"hotpath_ethtool_ena_admin_q_submitted_cmd", []string{"queue", ""}, 96, dto.MetricType_UNTYPED},
		// Queue interrupts per CPU, only the NIC's.
		{"hotpath_interrupts_total", []string{"irq", "26", "cpu", "1"}, 790112, dto.MetricType_COUNTER},
		{"hotpath_interrupts_total", []string{"name", "eth0-Tx-Rx-3", "queue", "3", "cpu", "3"}, 799876, dto.MetricType_COUNTER},
		{"hotpath_interrupts_total", []string{"irq", "25", "cpu", "2"}, 0, dto.MetricType_COUNTER},
		// softnet: hex, CPU from the last column.
		{"hotpath_softnet_processed_total", []string{"cpu", "0"}, 0xc5d3, dto.MetricType_COUNTER},
		{"hotpath_softnet_dropped_total", []string{"cpu", "1"}, 3, dto.MetricType_COUNTER},
		{"hotpath_softnet_times_squeezed_total", []string{"cpu", "3"}, 5, dto.MetricType_COUNTER},
		{"hotpath_softnet_received_rps_total", []string{"cpu", "3"}, 4, dto.MetricType_COUNTER},
		{"hotpath_softnet_backlog_len", []string{"cpu", "3"}, 7, dto.MetricType_GAUGE},
		{"hotpath_softirqs_total", []string{"cpu", "1", "type", "NET_RX"}, 790200, dto.MetricType_COUNTER},
		// The MIB counters an operator of a network appliance watches.
		{"hotpath_netstat_TcpExt_ListenOverflows", nil, 5, dto.MetricType_UNTYPED},
		{"hotpath_netstat_TcpExt_ListenDrops", nil, 6, dto.MetricType_UNTYPED},
		{"hotpath_netstat_TcpExt_TCPTimeouts", nil, 9, dto.MetricType_UNTYPED},
		{"hotpath_netstat_Tcp_RetransSegs", nil, 42, dto.MetricType_UNTYPED},
		{"hotpath_netstat_Tcp_MaxConn", nil, -1, dto.MetricType_UNTYPED},
		{"hotpath_netstat_Tcp_CurrEstab", nil, 1024, dto.MetricType_UNTYPED},
		{"hotpath_netstat_IpExt_InOctets", nil, 1020781516, dto.MetricType_UNTYPED},
		{"hotpath_netstat_IcmpMsg_InType3", nil, 3, dto.MetricType_UNTYPED},
		{"hotpath_sockstat_TCP_inuse", nil, 1030, dto.MetricType_GAUGE},
		{"hotpath_sockstat_TCP_tw", nil, 17, dto.MetricType_GAUGE},
		{"hotpath_sockstat_TCP_mem_bytes", nil, 812 * float64(os.Getpagesize()), dto.MetricType_GAUGE},
		{"hotpath_sockstat_sockets_used", nil, 1043, dto.MetricType_GAUGE},
		{"hotpath_cpu_seconds_total", []string{"cpu", "3", "mode", "softirq"}, 21, dto.MetricType_COUNTER},
		{"hotpath_cpu_seconds_total", []string{"cpu", "0", "mode", "idle"}, 875, dto.MetricType_COUNTER},
		{"hotpath_context_switches_total", nil, 987654, dto.MetricType_COUNTER},
		{"hotpath_memory_MemTotal_bytes", nil, 10485760 * 1024, dto.MetricType_GAUGE},
		{"hotpath_memory_Active_anon_bytes", nil, 1712 * 1024, dto.MetricType_GAUGE},
		{"hotpath_memory_HugePages_Total", nil, 0, dto.MetricType_GAUGE},
		// The kernel's interface counters.
		{"hotpath_netdev_rx_packets_total", []string{"device", "eth0"}, 8000010, dto.MetricType_COUNTER},
		{"hotpath_netdev_rx_dropped_total", nil, 17, dto.MetricType_COUNTER},
		{"hotpath_netdev_rx_missed_errors_total", nil, 0, dto.MetricType_COUNTER},
		// The init's own cost, a command name with spaces and parentheses.
		{"hotpath_init_cpu_seconds_total", []string{"mode", "user"}, 2.5, dto.MetricType_COUNTER},
		{"hotpath_init_cpu_seconds_total", []string{"mode", "system"}, 1.3, dto.MetricType_COUNTER},
		{"hotpath_init_resident_memory_bytes", nil, 4321 * float64(os.Getpagesize()), dto.MetricType_GAUGE},
	} {
		t.Run(tc.name+strings.Join(tc.labels, ","), func(t *testing.T) {
			if _, typ := series(t, fams, tc.name, tc.labels...); typ != tc.typ {
				t.Errorf("type %v, want %v", typ, tc.typ)
			}
			if v := value(t, fams, tc.name, tc.labels...); v != tc.want {
				t.Errorf("value %v, want %v", v, tc.want)
			}
		})
	}
	// Every driver statistic is exported: 13 device-wide, and 34 per
	// queue on 4 queues, and 5 admin queue counters.
	n := 0
	for name, f := range fams {
		if strings.HasPrefix(name, "hotpath_ethtool_") {
			n += len(f.Metric)
		}
	}
	if want := 13 + 4*34 + 5; n != want {
		t.Errorf("%d ethtool series, want %d (one per line of ethtool -S)", n, want)
	}
	// Only the NIC's queue interrupts: 4 interrupts times 4 CPUs.
	if n := len(fams["hotpath_interrupts_total"].Metric); n != 16 {
		t.Errorf("%d interrupt series, want 16", n)
	}
	// Four CPUs, eight modes; the "cpu" total line is not a CPU.
	if n := len(fams["hotpath_cpu_seconds_total"].Metric); n != 32 {
		t.Errorf("%d cpu series, want 32", n)
	}
}

// TestInterruptsShared: a queue interrupt shared with another device (legacy
// INTx) is still the queue's, and the counts go to the CPUs the header
// names (CPU1 offline).
func TestInterruptsShared(t *testing.T) {
	dir := t.TempDir()
	in := "           CPU0       CPU2\n 11:   5  6   IO-APIC  11-fasteoi   uhci_hcd:usb1, virtio3-input.0\n 12: 1 1 IO-APIC 12-edge i8042\n"
	if err := os.WriteFile(filepath.Join(dir, "interrupts"), []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	// The other /proc files are missing: their collectors log and go on.
	reg := NewRegistry(Options{ProcRoot: dir, Logf: func(string, ...any) {},
		QueueIRQ: func(n string) (int, bool) { return 0, n == "virtio3-input.0" }})
	fams := scrape(t, reg)
	if v := value(t, fams, "hotpath_interrupts_total", "name", "uhci_hcd:usb1, virtio3-input.0", "queue", "0", "cpu", "2"); v != 6 {
		t.Errorf("shared queue line on cpu2: %v", v)
	}
	if n := len(fams["hotpath_interrupts_total"].Metric); n != 2 {
		t.Errorf("%d series, want the queue line on 2 CPUs", n)
	}
}

// TestCollectorsHost reads a real /proc of a 2-vCPU virtio guest (a newer
// kernel: 15 softnet columns, more MIB counters) with virtio-net's ethtool
// names, and checks that the whole scrape encodes and parses back.
func TestCollectorsHost(t *testing.T) {
	stats := statsMap{"eth0": {"rx_queue_0_packets": 8278, "rx_queue_0_bytes": 1 << 20, "tx_queue_0_packets": 6840,
		"rx_queue_0_xdp_packets": 0, "tx_queue_0_kicks": 3, "rx_queue_1_packets": 5}}
	reg := NewRegistry(Options{ProcRoot: "testdata/host", Device: "eth0", Driver: "virtio_net", Stats: stats,
		QueueIRQ: func(name string) (int, bool) {
			m := regexp.MustCompile(`^virtio2-(?:input|output)\.(\d+)$`).FindStringSubmatch(name)
			if m == nil {
				return 0, false
			}
			q, _ := strconv.Atoi(m[1])
			return q, true
		}})
	fams := scrape(t, reg)
	if v := value(t, fams, "hotpath_ethtool_rx_packets", "queue", "1"); v != 5 {
		t.Errorf("rx_queue_1_packets: %v", v)
	}
	if v := value(t, fams, "hotpath_ethtool_tx_kicks", "queue", "0"); v != 3 {
		t.Errorf("tx_queue_0_kicks: %v", v)
	}
	if v := value(t, fams, "hotpath_interrupts_total", "name", "virtio2-input.0", "cpu", "1"); v != 8278 {
		t.Errorf("virtio2-input.0 on cpu1: %v", v)
	}
	if n := len(fams["hotpath_interrupts_total"].Metric); n != 4 {
		t.Errorf("%d interrupt series, want input.0 and output.0 on 2 CPUs", n)
	}
	if v := value(t, fams, "hotpath_softnet_processed_total", "cpu", "1"); v != 0x4488 {
		t.Errorf("softnet cpu1: %v", v)
	}
	if v := value(t, fams, "hotpath_netstat_TcpExt_DelayedACKs"); v != 1348 {
		t.Errorf("DelayedACKs: %v", v)
	}
	// The whole exposition round-trips through the Prometheus parser.
	var b strings.Builder
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	back, err := parser.TextToMetricFamilies(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("text exposition does not parse: %v", err)
	}
	if len(back) != len(fams) {
		t.Errorf("%d families parsed back, %d encoded", len(back), len(fams))
	}
}

// statsMap is a StatsReader over fixed statistics.
type statsMap map[string]map[string]uint64

func (s statsMap) Stats(dev string) (map[string]uint64, error) {
	m, ok := s[dev]
	if !ok {
		return nil, fmt.Errorf("no device %s", dev)
	}
	return m, nil
}

func TestEthtoolName(t *testing.T) {
	for _, tc := range []struct{ stat, name, queue string }{
		{"pps_allowance_exceeded", "hotpath_ethtool_pps_allowance_exceeded", ""},
		{"queue_0_tx_cnt", "hotpath_ethtool_tx_cnt", "0"},
		{"queue_12_rx_rx_copybreak_pkt", "hotpath_ethtool_rx_rx_copybreak_pkt", "12"},
		{"queue_1_tx_queue_stop", "hotpath_ethtool_tx_queue_stop", "1"},
		{"rx_queue_3_packets", "hotpath_ethtool_rx_packets", "3"},
		{"tx_queue_0_xdp_tx_drops", "hotpath_ethtool_tx_xdp_tx_drops", "0"},
		{"rx_queue_7", "hotpath_ethtool_rx", "7"},
		{"rx0_packets", "hotpath_ethtool_rx_packets", "0"},
		{"tx12_xdp_tx_drops", "hotpath_ethtool_tx_xdp_tx_drops", "12"},
		{"rx3_hw_drops", "hotpath_ethtool_rx_hw_drops", "3"},
		{"rx_packets", "hotpath_ethtool_rx_packets", ""},
		{"RX-Errors (CRC)", "hotpath_ethtool_rx_errors_crc", ""},
		{"tx_queue_stop", "hotpath_ethtool_tx_queue_stop", ""},
	} {
		name, q := ethtoolName(tc.stat)
		if name != tc.name || q != tc.queue {
			t.Errorf("%q: %q queue %q, want %q queue %q", tc.stat, name, q, tc.name, tc.queue)
		}
	}
}

// A source that cannot be read costs its own metrics and says so; the
// rest of the scrape is served, and the error is logged once, not per
// scrape.
func TestCollectorFailure(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"stat", "meminfo"} {
		b, err := os.ReadFile(filepath.Join("testdata/ena", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	// A broken softnet line: not hex.
	os.WriteFile(filepath.Join(dir, "net", "softnet_stat"), []byte("zz 00 00\n"), 0o644)
	var logged []string
	reg := NewRegistry(Options{ProcRoot: dir, Device: "eth0", Stats: statsMap{},
		Logf: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }})
	for i := 0; i < 3; i++ {
		fams := scrape(t, reg)
		for c, want := range map[string]float64{"cpu": 1, "meminfo": 1, "interrupts": 0, "softnet": 0, "netstat": 0, "ethtool": 0} {
			if v := value(t, fams, "hotpath_scrape_collector_success", "collector", c); v != want {
				t.Errorf("collector %s: success %v, want %v", c, v, want)
			}
		}
		if value(t, fams, "hotpath_memory_MemTotal_bytes") == 0 {
			t.Error("meminfo missing next to failed collectors")
		}
	}
	seen := map[string]int{}
	for _, l := range logged {
		seen[strings.Fields(l)[2]]++
	}
	for c, n := range seen {
		if n != 1 {
			t.Errorf("collector %s logged %d times over 3 scrapes, want once", c, n)
		}
	}
	if seen["softnet:"] != 1 || seen["ethtool:"] != 1 {
		t.Errorf("failures not logged: %q", logged)
	}
}

// TestWorkloadMetrics: the workload gauges and counters follow the
// snapshot; "ready" needs a running process.
func TestWorkloadMetrics(t *testing.T) {
	for _, c := range []struct {
		name                               string
		st                                 WorkloadState
		up, ready, starts, restarts, upSec float64
		crashLoop                          float64
	}{
		{"before start", WorkloadState{State: "down"}, 0, 0, 0, 0, 0, 0},
		{"starting", WorkloadState{State: "starting", Running: true, PID: 2, Starts: 1, Uptime: 3 * time.Second}, 1, 0, 1, 0, 3, 0},
		{"ready", WorkloadState{State: "ready", Running: true, Ready: true, PID: 2, Starts: 1, Uptime: 5 * time.Second}, 1, 1, 1, 0, 5, 0},
		{"probe failing", WorkloadState{State: "running", Running: true, PID: 2, Starts: 1, Uptime: 9 * time.Second}, 1, 0, 1, 0, 9, 0},
		{"crash loop", WorkloadState{State: "crash-loop", Starts: 4, Restarts: 3, Exits: 4, Unresponsive: 1, CrashLoop: true}, 0, 0, 4, 3, 0, 1},
		{"stale ready", WorkloadState{State: "down", Ready: true, Starts: 1}, 0, 0, 1, 0, 0, 0},
	} {
		reg := NewRegistry(Options{Workload: WorkloadFunc(func() WorkloadState { return c.st })})
		fams := scrape(t, reg)
		for name, want := range map[string]float64{"hotpath_workload_up": c.up, "hotpath_workload_ready": c.ready,
			"hotpath_workload_starts_total": c.starts, "hotpath_workload_restarts_total": c.restarts,
			"hotpath_workload_uptime_seconds": c.upSec, "hotpath_workload_crash_loop": c.crashLoop} {
			if v := value(t, fams, name); v != want {
				t.Errorf("%s: %s = %v, want %v", c.name, name, v, want)
			}
		}
		if e, u := value(t, fams, "hotpath_workload_exits_total"), value(t, fams, "hotpath_workload_unresponsive_total"); e != float64(c.st.Exits) || u != float64(c.st.Unresponsive) {
			t.Errorf("%s: exits %v, unresponsive %v; want %d, %d", c.name, e, u, c.st.Exits, c.st.Unresponsive)
		}
	}
}

func TestBootAndLogAndClock(t *testing.T) {
	steps := []StepState{
		{Name: "mounts", Status: report.Applied, Millis: 1.5},
		{Name: "nic-gro", Status: report.Skipped, Reason: "x"},
		{Name: "net", Status: report.Failed, Error: "dhcp: timeout", Millis: 5000},
	}
	reg := NewRegistry(Options{
		Boot: func() []StepState { return steps },
		Log:  func() LogStats { return LogStats{Sent: 7, Dropped: 3, QueuedBytes: 120, Connected: true} },
		Timex: func() (Timex, error) {
			return Timex{Offset: -250 * time.Microsecond, MaxError: 16 * time.Millisecond, Synced: true}, nil
		},
	})
	fams := scrape(t, reg)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"hotpath_boot_step_status", []string{"step", "mounts", "status", "applied"}, 1},
		{"hotpath_boot_step_status", []string{"step", "mounts", "status", "failed"}, 0},
		{"hotpath_boot_step_status", []string{"step", "net", "status", "failed"}, 1},
		{"hotpath_boot_step_status", []string{"step", "nic-gro", "status", "skipped"}, 1},
		{"hotpath_boot_step_duration_seconds", []string{"step", "net"}, 5},
		{"hotpath_log_messages_dropped_total", nil, 3},
		{"hotpath_log_messages_sent_total", nil, 7},
		{"hotpath_log_connected", nil, 1},
		{"hotpath_clock_offset_seconds", nil, -0.00025},
		{"hotpath_clock_synchronized", nil, 1},
	} {
		if v := value(t, fams, tc.name, tc.labels...); v != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, v, tc.want)
		}
	}
	// The clock of this machine is readable the same way.
	if _, err := Adjtimex(); err != nil {
		t.Errorf("adjtimex: %v", err)
	}
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{"Active(anon)": "Active_anon", "a--b": "a_b", "_x_": "x", "RX-Errors (CRC)": "RX_Errors_CRC", "ok_name": "ok_name"} {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

// BenchmarkScrape is one scrape of a c5n.xlarge-shaped appliance (4 CPUs,
// ENA with 4 queues, all collectors) encoded in the text format, as
// /metrics serves it: its CPU time is what a scrape costs the machine.
func BenchmarkScrape(b *testing.B) {
	o := enaOptions()
	// Recorded statistics, parsed once: the ioctl's cost is not the
	// fixture parser's.
	st, err := fileStats{"eth0": "testdata/ena/ethtool-S-eth0"}.Stats("eth0")
	if err != nil {
		b.Fatal(err)
	}
	o.Stats = statsMap{"eth0": st}
	o.Workload = WorkloadFunc(func() WorkloadState { return WorkloadState{} })
	reg := NewRegistry(o)
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		fams, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		enc := expfmt.NewEncoder(io.Discard, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, f := range fams {
			if err := enc.Encode(f); err != nil {
				b.Fatal(err)
			}
		}
	}
	// Gather runs the collectors on goroutines: CPU time, not wall time,
	// is the cost.
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// cpuTime is this process's user plus system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReadSources reads the files BenchmarkScrape reads, and nothing
// else: the floor a scrape cannot go below. The ratio of the two is what
// parsing, client_golang and the text encoding add.
func BenchmarkReadSources(b *testing.B) {
	files := []string{"interrupts", "net/softnet_stat", "softirqs", "net/snmp", "net/netstat", "net/sockstat", "stat", "meminfo", "self/stat"}
	b.ReportAllocs()
	for b.Loop() {
		for _, f := range files {
			if _, err := os.ReadFile(filepath.Join("testdata/ena", f)); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// TestBootTimeline: each phase's start and end in seconds since the
// kernel started; a background step still running has a start and no
// end yet, and a background step that ended shows its final status.
func TestBootTimeline(t *testing.T) {
	phases := []report.Phase{
		{Name: report.PhaseKernel, Start: 0, End: 1571},
		{Name: report.PhaseInit, Start: 1571, End: 1580},
		{Name: "step net-dhcp", Start: 1600, End: 1750},
		{Name: "step net-ipv6", Start: 1751, End: -1, Background: true},
		{Name: report.PhaseExec, Start: 1800, End: 1810},
		{Name: report.PhaseReady, Start: 1810, End: 1900},
	}
	fams := scrape(t, NewRegistry(Options{
		Boot: func() []StepState {
			return []StepState{{Name: "net-ipv6", Status: report.Background}}
		},
		Timeline: func() []report.Phase { return phases },
	}))
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"hotpath_boot_phase_end_seconds", []string{"phase", "kernel", "background", "false"}, 1.571},
		{"hotpath_boot_phase_start_seconds", []string{"phase", "ready", "background", "false"}, 1.81},
		{"hotpath_boot_phase_end_seconds", []string{"phase", "ready", "background", "false"}, 1.9},
		{"hotpath_boot_phase_start_seconds", []string{"phase", "step net-ipv6", "background", "true"}, 1.751},
		{"hotpath_boot_step_status", []string{"step", "net-ipv6", "status", "background"}, 1},
	} {
		if v := value(t, fams, tc.name, tc.labels...); v != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, v, tc.want)
		}
	}
	for _, m := range fams["hotpath_boot_phase_end_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "phase" && l.GetValue() == "step net-ipv6" {
				t.Errorf("a running background step has an end: %v", m)
			}
		}
	}
}
