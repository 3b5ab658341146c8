package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseWrk(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      float64
		requests  int64
		ok        bool
	}{
		{"ok", "Running 10s test @ http://10.77.0.2:8080/json\n  2 threads and 64 connections\n" +
			"  1000 requests in 10.00s, 150.00KB read\nRequests/sec:    100.25\nTransfer/sec:     15.00KB\n", 100.25, 1000, true},
		{"errors", "  1000 requests in 10.00s, 150.00KB read\nNon-2xx or 3xx responses: 12\nRequests/sec:    100.25\n", 0, 0, false},
		{"no count", "Requests/sec:    100.25\n", 0, 0, false},
		{"no figure", "unable to connect to 10.77.0.2:8080 Connection refused\n", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, n, err := parseWrk([]byte(tc.out))
			if (err == nil) != tc.ok || got != tc.want || n != tc.requests {
				t.Errorf("parseWrk = %v, %d, %v; want %v, %d, ok=%v", got, n, err, tc.want, tc.requests, tc.ok)
			}
		})
	}
}

// metricsText is what a 2-vCPU virtio guest's /metrics says (trimmed):
// the queue lines of /proc/interrupts per CPU, and /proc/stat.
const metricsText = `# TYPE hotpath_interrupts_total counter
hotpath_interrupts_total{cpu="0",irq="24",name="virtio0-input.0",queue="0"} 100
hotpath_interrupts_total{cpu="1",irq="24",name="virtio0-input.0",queue="0"} 2
hotpath_interrupts_total{cpu="0",irq="25",name="virtio0-output.0",queue="0"} 30
hotpath_interrupts_total{cpu="1",irq="26",name="virtio0-input.1",queue="1"} 50
hotpath_interrupts_total{cpu="1",irq="27",name="virtio0-output.1",queue="1"} 7
# TYPE hotpath_cpu_seconds_total counter
hotpath_cpu_seconds_total{cpu="0",mode="user"} 1.5
hotpath_cpu_seconds_total{cpu="0",mode="system"} 2
hotpath_cpu_seconds_total{cpu="0",mode="softirq"} 0.25
hotpath_cpu_seconds_total{cpu="0",mode="idle"} 10
hotpath_cpu_seconds_total{cpu="1",mode="user"} 1
hotpath_cpu_seconds_total{cpu="1",mode="iowait"} 0.5
hotpath_cpu_seconds_total{cpu="1",mode="idle"} 20
# TYPE hotpath_context_switches_total counter
hotpath_context_switches_total 4242
# TYPE hotpath_softirqs_total counter
hotpath_softirqs_total{cpu="0",type="NET_RX"} 300
hotpath_softirqs_total{cpu="1",type="NET_RX"} 12
hotpath_softirqs_total{cpu="0",type="TIMER"} 999
`

func TestParseCounters(t *testing.T) {
	got, err := parseCounters(strings.NewReader(metricsText))
	if err != nil {
		t.Fatal(err)
	}
	want := counters{IRQs: 189, RxIRQs: 152, Busy: 4.75, Idle: 30.5, Ctxt: 4242, NetRx: 312}
	if got != want {
		t.Errorf("parseCounters = %+v, want %+v", got, want)
	}
	// Lines without a queue label (a guest that could not name its
	// queues exports every line) are not the NIC's.
	unnamed := strings.Replace(metricsText, `queue="1"`, `queue=""`, 2)
	if got, _ := parseCounters(strings.NewReader(unnamed)); got.IRQs != 132 || got.RxIRQs != 102 {
		t.Errorf("with queue 1 unnamed: %+v, want 132 interrupts, 102 rx", got)
	}
	for name, text := range map[string]string{
		"no interrupts": metricsText[strings.Index(metricsText, "# TYPE hotpath_cpu"):],
		"no cpu":        metricsText[:strings.Index(metricsText, "# TYPE hotpath_cpu")],
		"no ctxt":       metricsText[:strings.Index(metricsText, "# TYPE hotpath_context")],
		"no NET_RX":     metricsText[:strings.Index(metricsText, "# TYPE hotpath_softirqs")],
		"garbage":       "hotpath_interrupts_total{ 1\n",
	} {
		if _, err := parseCounters(strings.NewReader(text)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	d := want.sub(counters{IRQs: 89, RxIRQs: 52, Busy: 0.75, Idle: 0.5, Ctxt: 242, NetRx: 12})
	if d != (counters{IRQs: 100, RxIRQs: 100, Busy: 4, Idle: 30, Ctxt: 4000, NetRx: 300}) {
		t.Errorf("sub = %+v", d)
	}
}

func TestSummarize(t *testing.T) {
	ss := []sample{
		{RPS: 300, Requests: 1000, Delta: counters{IRQs: 500, RxIRQs: 400, Busy: 0.2, Idle: 0.2, Ctxt: 3000, NetRx: 100}},
		{RPS: 100, Requests: 1000, Delta: counters{IRQs: 100, RxIRQs: 50, Busy: 0.1, Idle: 0.3, Ctxt: 1000, NetRx: 300}},
		{RPS: 200, Requests: 2000, Delta: counters{IRQs: 2000, RxIRQs: 1000, Busy: 0.6, Idle: 0, Ctxt: 4000, NetRx: 400}},
	}
	s := summarize(ss)
	if s.RPS != 200 || s.IRQs != 0.5 || s.RxIRQs != 0.4 || s.NetRx != 0.2 || s.Ctxt != 2 || s.CPUMicros != 200 || s.Busy != 0.5 {
		t.Errorf("summarize = %+v, want medians 200 req/s, 0.5 irq/req, 0.4 rx, 2 cs/req, 200 µs, 50%% busy", s)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median of 4 = %v", m)
	}
}

func TestSelectGuests(t *testing.T) {
	all := specs(Step10{DeferHardIRQs: 100, GROFlushTimeout: 50 * time.Microsecond}, "/src/6.1.tar.xz")
	sel, err := selectGuests(all, "stock, 6.12-step10,6.1")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, s := range sel {
		keys = append(keys, s.Key)
	}
	if strings.Join(keys, ",") != "6.1,6.12-step10,stock" {
		t.Errorf("selected %v, want the table's order", keys)
	}
	if sel[0].Source != "/src/6.1.tar.xz" || sel[1].Source != "" {
		t.Errorf("kernel sources %q %q", sel[0].Source, sel[1].Source)
	}
	// Every appliance guest states both halves of step 10 explicitly.
	for _, s := range all {
		if s.Stock {
			continue
		}
		for _, k := range []string{"hotpath.nic.defer_hard_irqs=", "hotpath.nic.gro_flush_timeout=", "hotpath.workload.args=-prefer-busy-poll"} {
			if !strings.Contains(s.Cmdline, k) {
				t.Errorf("%s: cmdline %q lacks %s", s.Key, s.Cmdline, k)
			}
		}
	}
	if on := sel[1].Cmdline; !strings.Contains(on, "defer_hard_irqs=100") || !strings.Contains(on, "gro_flush_timeout=50000ns") ||
		strings.Contains(on, "=false") {
		t.Errorf("step-10 guest cmdline %q", on)
	}
	for _, bad := range []string{"6.13", "", " , "} {
		if _, err := selectGuests(all, bad); err == nil {
			t.Errorf("selectGuests(%q): no error", bad)
		}
	}
}

func TestKernelCached(t *testing.T) {
	dir := t.TempDir()
	bz := filepath.Join(dir, "kernel", "bzimage")
	if err := os.MkdirAll(bz, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, version string) {
		text := "#\n# Automatically generated file; DO NOT EDIT.\n# Linux/" + version + " Kernel Configuration\n#\n"
		if err := os.WriteFile(filepath.Join(bz, name+".config"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a", "x86_64 6.12.117")
	write("b", "arm64 6.1.158")
	for _, tc := range []struct {
		version string
		want    bool
	}{{"6.12", true}, {"6.1", false}, {"6.13", false}} {
		if got, err := kernelCached(dir, tc.version); err != nil || got != tc.want {
			t.Errorf("kernelCached(%s) = %v, %v; want %v", tc.version, got, err, tc.want)
		}
	}
	write("c", "x86_64 6.1.158")
	if got, _ := kernelCached(dir, "6.1"); !got {
		t.Error("kernelCached(6.1) false with an x86_64 6.1.158 config in the cache")
	}
}

func TestParseP99(t *testing.T) {
	out := []byte(`Running 10s test @ http://10.0.2.15:8080/large
  Latency Distribution
     50%    1.20ms
     75%    2.31ms
     90%    5.00ms
     99%  212.34ms
  1234 requests in 10.00s, 40.00MB read
`)
	d, err := parseP99(out)
	if err != nil || d != 212340*time.Microsecond {
		t.Fatalf("p99 %v, %v; want 212.34ms", d, err)
	}
	if _, err := parseP99([]byte("Requests/sec: 12.0\n")); err == nil {
		t.Fatal("no error without a 99% line")
	}
}

func TestParseCountersDrops(t *testing.T) {
	text := `hotpath_interrupts_total{cpu="0",irq="25",name="virtio1-input.0",queue="0"} 10
hotpath_cpu_seconds_total{cpu="0",mode="user"} 2
hotpath_context_switches_total 40
hotpath_softirqs_total{cpu="0",type="NET_RX"} 30
hotpath_netdev_tx_dropped_total{device="eth0"} 17
hotpath_netstat_Tcp_RetransSegs 5
hotpath_qdisc_drops_total{device="eth0",kind="mq",handle="0:0",parent="root"} 3
hotpath_qdisc_drops_total{device="eth0",kind="pfifo_fast",handle="0:0",parent=":1"} 3
`
	c, err := parseCounters(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if c.TxDropped != 17 || c.Retrans != 5 || c.QdiscDrops != 3 {
		t.Fatalf("tx_dropped %v retrans %v qdisc drops %v; want 17 5 3 (the root's only)", c.TxDropped, c.Retrans, c.QdiscDrops)
	}
}

func TestParseP99NoneRecorded(t *testing.T) {
	if _, err := parseP99([]byte("  Latency Distribution\n     99%    0.00us\n")); err == nil {
		t.Fatal("a 0 percentile (every batch past --timeout) read as a latency")
	}
}
