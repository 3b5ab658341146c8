package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/vm"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

var saveConsole = flag.String("e2e.save-console", "", "write TestObs's console log to this file (testdata for the report command)")

// Where the guest ships its logs: a collector on the host side of the tap,
// inside the test's namespace.
const syslogPort = "6514"

// obsConfig is the image's init configuration: TCP shipping (the framing
// worth checking), a restart back-off long enough that the workload is
// visibly down for a while after /exit, and an HTTP liveness probe that
// finds the workload /stop hangs: 5 misses in a row of 2 s each, so that
// a slow moment under TCG (the scrape-cost subtest keeps the guest busy)
// cannot kill a healthy workload and upset the restart counts.
const obsConfig = "log.remote=tcp://" + vm.HostAddr + ":" + syslogPort + "\n" +
	"supervise.backoff_min=3s\n" +
	"liveness.probe=/json\nliveness.interval=2s\nliveness.timeout=2s\nliveness.failures=5\n"

// TestObs boots the exiter image with log shipping and checks the
// management endpoint and the shipped logs from outside the guest:
// /metrics parses with the Prometheus text parser and its counters move
// with the test's traffic; /healthz flips to 503 while the workload is
// down and back; the syslog collector gets the workload's lines and the
// init's events in RFC 5424 with octet-counting framing.
func TestObs(t *testing.T) {
	requireE2E(t)
	disk := buildImageConfig(t, exiterPkg, []byte(obsConfig))
	b := boot(t, disk, 2)
	if *saveConsole != "" {
		t.Cleanup(func() {
			if err := os.WriteFile(*saveConsole, []byte(b.Console.String()), 0o644); err != nil {
				t.Error(err)
			}
		})
	}
	// The collector starts after the guest: the guest buffers what it
	// could not send yet and reconnects with back-off.
	logs, err := b.Netns.ListenSyslog(net.JoinHostPort(vm.HostAddr, syslogPort))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logs.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	port := "9100"
	if p, ok := b.rep.Config["mgmt.port"]; ok {
		port = p
	}
	o := &obsGuest{booted: b, base: "http://" + net.JoinHostPort(b.Addr, port), client: b.Netns.HTTPClient(60 * time.Second)}

	t.Run("healthz", func(t *testing.T) {
		if code, body := o.get(t, "/healthz"); code != 200 {
			t.Errorf("/healthz after ready: %d %q", code, body)
		}
	})
	t.Run("report", func(t *testing.T) {
		code, body := o.get(t, "/report")
		var rep report.Report
		if err := json.Unmarshal([]byte(body), &rep); code != 200 || err != nil {
			t.Fatalf("/report: %d %v", code, err)
		}
		if rep.ReadyMillis != b.rep.ReadyMillis || len(rep.Steps) != len(b.rep.Steps) || rep.Kernel != b.rep.Kernel {
			t.Errorf("/report differs from the console's report: ready %d/%d, %d/%d steps",
				rep.ReadyMillis, b.rep.ReadyMillis, len(rep.Steps), len(b.rep.Steps))
		}
		for _, name := range []string{"log-shipping", "mgmt-endpoint"} {
			if s, ok := rep.Step(name); !ok || s.Status != report.Applied {
				t.Errorf("step %s: %+v", name, s)
			}
		}
		if s, _ := rep.Step("log-shipping"); s.Detail["hostname"] != b.Addr {
			t.Errorf("syslog hostname %q, want the guest's address %s", s.Detail["hostname"], b.Addr)
		}
	})
	t.Run("metrics", func(t *testing.T) { o.checkMetrics(ctx, t) })
	t.Run("scrape-cost", func(t *testing.T) { o.scrapeCost(t) })
	t.Run("restart", func(t *testing.T) { o.checkRestart(ctx, t) })
	t.Run("hang", func(t *testing.T) { o.checkHang(ctx, t) })
	t.Run("syslog", func(t *testing.T) { checkSyslog(ctx, t, logs, b) })
	t.Run("shutdown", func(t *testing.T) { checkShutdown(t, b, "exiter: SIGTERM") })
}

type obsGuest struct {
	*booted
	base   string
	client *http.Client
}

func (o *obsGuest) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := o.client.Get(o.base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// scrape fetches /metrics and parses it with the Prometheus text parser.
func (o *obsGuest) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := o.client.Get(o.base + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape: %s %q", resp.Status, b)
	}
	if f := expfmt.ResponseFormat(resp.Header); f.FormatType() != expfmt.TypeTextPlain {
		t.Errorf("scrape content type %q", resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse as the Prometheus text format: %v", err)
	}
	return fams
}

// sum adds the values of name's series whose labels match every pair of
// want (a "*" value matches any), grouped by the label by ("" for none).
func sum(fams map[string]*dto.MetricFamily, name, by string, want ...string) map[string]float64 {
	out := map[string]float64{}
	f, ok := fams[name]
	if !ok {
		return out
	}
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(want); i += 2 {
			if want[i+1] != "*" && labels[want[i]] != want[i+1] {
				match = false
			}
		}
		if !match {
			continue
		}
		v := m.GetUntyped().GetValue() + m.GetCounter().GetValue() + m.GetGauge().GetValue()
		out[labels[by]] += v
	}
	return out
}

func total(m map[string]float64) float64 {
	s := 0.0
	for _, v := range m {
		s += v
	}
	return s
}

// requests sends n GET /json over conns connections (a new source port
// each, so the host's tap spreads them over the queues by flow hash).
func (o *obsGuest) requests(ctx context.Context, t *testing.T, n, conns int) {
	t.Helper()
	per := n / conns
	for c := 0; c < conns; c++ {
		conn, err := o.dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(time.Minute))
		br := bufio.NewReader(conn)
		for i := 0; i < per; i++ {
			_, err := io.WriteString(conn, request(JSON.Path))
			if err == nil {
				var resp *Response
				resp, err = ReadResponse(br)
				if err == nil && !strings.Contains(resp.Status, " 200 ") {
					err = fmt.Errorf("status %q", resp.Status)
				}
			}
			if err != nil {
				conn.Close()
				t.Fatalf("request %d on connection %d: %v", i, c, err)
			}
		}
		conn.Close()
	}
}

func (o *obsGuest) checkMetrics(ctx context.Context, t *testing.T) {
	before := o.scrape(t)
	for c, v := range sum(before, "hotpath_scrape_collector_success", "collector") {
		if v != 1 {
			t.Errorf("collector %s failed in the guest", c)
		}
	}
	// Per-queue packets come from the netdev netlink family (QSTATS_GET):
	// virtio-net lists them there only, from Linux 6.10 on. ethtool -S
	// keeps the driver's other queue counters (rx%u_drops, rx%u_kicks,
	// tx%u_kicks, ...; rx_queue_N_kicks on 6.1, the same metric).
	for _, name := range []string{"hotpath_queue_rx_packets", "hotpath_queue_tx_packets", "hotpath_queue_rx_bytes", "hotpath_queue_tx_bytes",
		"hotpath_ethtool_rx_kicks", "hotpath_ethtool_tx_kicks", "hotpath_interrupts_total", "hotpath_netdev_rx_packets_total",
		"hotpath_softnet_processed_total", "hotpath_netstat_TcpExt_ListenOverflows", "hotpath_netstat_Tcp_RetransSegs",
		"hotpath_sockstat_TCP_inuse", "hotpath_cpu_seconds_total", "hotpath_memory_MemTotal_bytes",
		"hotpath_workload_up", "hotpath_boot_step_status", "hotpath_log_messages_dropped_total"} {
		if before[name] == nil {
			t.Errorf("no %s", name)
		}
	}
	// One queue pair per vCPU; each queue's interrupts named by queue.
	rxQueues := sum(before, "hotpath_queue_rx_packets", "queue", "device", "*")
	if len(rxQueues) != o.cpus {
		t.Errorf("rx_packets for queues %v, want %d queues", rxQueues, o.cpus)
	}
	if f := sum(before, "hotpath_boot_step_status", "step", "status", "failed"); total(f) != 0 {
		t.Errorf("failed boot steps in the metrics: %v", f)
	}
	if v := total(sum(before, "hotpath_boot_step_status", "step", "status", "applied")); v == 0 {
		t.Error("no applied boot step in the metrics")
	}

	const n, conns = 400, 40
	o.requests(ctx, t, n, conns)
	after := o.scrape(t)

	delta := func(name, by string, want ...string) map[string]float64 {
		a, b := sum(after, name, by, want...), sum(before, name, by, want...)
		d := map[string]float64{}
		for k, v := range a {
			d[k] = v - b[k]
		}
		return d
	}
	rx := delta("hotpath_queue_rx_packets", "queue")
	tx := delta("hotpath_queue_tx_packets", "queue")
	t.Logf("after %d requests on %d connections: virtio rx packets per queue %v, tx %v", n, conns, rx, tx)
	if total(rx) < n || total(tx) < n {
		t.Errorf("queue packet counters moved by rx %v tx %v for %d requests", total(rx), total(tx), n)
	}
	// Interrupts of queue i on CPU i (the init binds them so).
	var onOwn float64
	for q := 0; q < o.cpus; q++ {
		qs := fmt.Sprint(q)
		d := total(delta("hotpath_interrupts_total", "", "queue", qs, "cpu", qs))
		t.Logf("queue %d: %v interrupts on cpu %d", q, d, q)
		onOwn += d
	}
	if onOwn <= 0 {
		t.Errorf("the queue interrupts on their CPUs did not move with %d requests", n)
	}
	if d := total(delta("hotpath_netstat_Tcp_InSegs", "")); d < n {
		t.Errorf("Tcp InSegs moved by %v for %d requests", d, n)
	}
	if d := total(delta("hotpath_softnet_processed_total", "cpu")); d <= 0 {
		t.Errorf("softnet processed did not move: %v", d)
	}
	if d := total(delta("hotpath_netstat_Tcp_PassiveOpens", "")); d < conns {
		t.Errorf("Tcp PassiveOpens moved by %v for %d connections", d, conns)
	}
}

// scrapeCost reads the init's own CPU time around a number of scrapes:
// with the guest otherwise idle, the difference is what the scrapes cost
// (under TCG, so many times a real machine's figure).
func (o *obsGuest) scrapeCost(t *testing.T) {
	const n = 30
	cpu := func(f map[string]*dto.MetricFamily) float64 {
		return total(sum(f, "hotpath_init_cpu_seconds_total", "mode"))
	}
	first := cpu(o.scrape(t))
	start := time.Now()
	var last map[string]*dto.MetricFamily
	for i := 0; i < n; i++ {
		last = o.scrape(t)
	}
	wall := time.Since(start)
	series := 0
	for _, f := range last {
		series += len(f.Metric)
	}
	// The last scrape's own reading was taken before it finished: n
	// scrapes lie between the two readings.
	per := (cpu(last) - first) / n
	t.Logf("scrape cost in the guest (TCG): %.1f ms init CPU per scrape (%d scrapes, %d series), %.0f ms wall per scrape",
		per*1000, n, series, wall.Seconds()*1000/n)
	fmt.Fprintf(os.Stderr, "e2e: obs: %.1f ms init CPU per scrape under %s (%d series; /proc/self/stat of the init over %d scrapes)\n",
		per*1000, o.Accel, series, n)
}

// checkRestart makes the workload exit and watches /healthz and the
// metrics through the restart.
func (o *obsGuest) checkRestart(ctx context.Context, t *testing.T) {
	o.checkRecovery(ctx, t, "/exit", "not running", report.EventRestart, 0)
}

// checkHang stops the workload (SIGSTOP: its port still completes
// handshakes, nothing answers) and watches /healthz follow the liveness
// probe: 503 "not ready" while the process still exists, the unresponsive
// event on the console, then 200 from the restarted workload.
func (o *obsGuest) checkHang(ctx context.Context, t *testing.T) {
	o.checkRecovery(ctx, t, "/stop", "not ready (running)", report.EventUnresponsive, 1)
}

// checkRecovery asks the workload for path, then waits for /healthz to
// answer 503 with down in its body, for the event on the console, and for
// /healthz to answer 200 again from a workload that serves; the restart
// and exit counters must have moved by exactly one, the liveness kills by
// kills.
func (o *obsGuest) checkRecovery(ctx context.Context, t *testing.T, path, down, event string, kills float64) {
	counters := func() (restarts, exits, unresponsive float64) {
		fams := o.scrape(t)
		return total(sum(fams, "hotpath_workload_restarts_total", "")), total(sum(fams, "hotpath_workload_exits_total", "")),
			total(sum(fams, "hotpath_workload_unresponsive_total", ""))
	}
	r0, e0, u0 := counters()
	mark := o.Console.Len()
	resp, err := o.client.Get("http://" + net.JoinHostPort(o.Addr, o.port) + path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		code, body := o.get(t, "/healthz")
		if code == 503 && strings.Contains(body, down) {
			t.Logf("/healthz after %s: %d %q", path, code, strings.TrimSpace(body))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz %d %q two minutes after %s, want 503 %q", code, body, path, down)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, _, err := o.Console.WaitEvent(ctx, mark, event); err != nil {
		t.Fatal(err)
	}
	for {
		code, _ := o.get(t, "/healthz")
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz still %d two minutes after %s", code, path)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := CheckGet(ctx, o.dial, Expect{"/json", "application/json", JSON.Body}); err != nil {
		t.Errorf("/healthz is 200 but the workload does not serve: %v", err)
	}
	if r1, e1, u1 := counters(); r1 != r0+1 || e1 != e0+1 || u1 != u0+kills {
		t.Errorf("after one %s: restarts %v -> %v, exits %v -> %v, unresponsive %v -> %v (want +1, +1, +%v)",
			path, r0, r1, e0, e1, u0, u1, kills)
	}
}

// checkSyslog checks what the collector received: the boot report, the
// init's events and log lines, and the workload's own lines, all parsed as
// RFC 5424 from octet-counted TCP frames by an independent parser.
func checkSyslog(ctx context.Context, t *testing.T, logs *vm.Syslog, b *booted) {
	wait := func(what string, match func(vm.SyslogMessage) bool) vm.SyslogMessage {
		t.Helper()
		m, err := logs.Wait(ctx, match)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return m
	}
	rep := wait("boot report", func(m vm.SyslogMessage) bool { return m.ID() == "report" })
	if !strings.HasPrefix(rep.Text(), report.ReportPrefix+"{") || *rep.Priority != 3*8+5 || rep.App() != "hotpath-init" {
		t.Errorf("boot report message: pri %d app %q %.80q", *rep.Priority, rep.App(), rep.Text())
	}
	if reps, _, err := report.Parse(strings.NewReader(rep.Text())); err != nil || len(reps) != 1 || reps[0].ReadyMillis != b.rep.ReadyMillis {
		t.Errorf("the shipped report does not decode to the console's: %v", err)
	}
	exit := wait("workload-exit event", func(m vm.SyslogMessage) bool {
		return m.ID() == "event" && strings.Contains(m.Text(), `"kind":"`+report.EventExit+`"`)
	})
	if !strings.Contains(exit.Text(), "exit status 3") {
		t.Errorf("exit event %q", exit.Text())
	}
	wait("an init log line", func(m vm.SyslogMessage) bool {
		return m.ID() == "log" && m.App() == "hotpath-init" && strings.HasPrefix(m.Text(), "step ")
	})
	// The workload's own stderr (the server library's ready line, the
	// exiter's exit line), with its PID.
	ready := wait("workload ready line", func(m vm.SyslogMessage) bool {
		return m.App() == "workload" && strings.Contains(m.Text(), "hotpath: ready:")
	})
	if ready.ID() != "stderr" || *ready.Priority != 1*8+6 || ready.ProcID == nil || !regexp.MustCompile(`^[0-9]+$`).MatchString(*ready.ProcID) {
		t.Errorf("workload line: msgid %q pri %d procid %v", ready.ID(), *ready.Priority, ready.ProcID)
	}
	wait("exiter's exit line", func(m vm.SyslogMessage) bool {
		return m.App() == "workload" && strings.Contains(m.Text(), "exiting with status 3")
	})
	msgs := logs.Messages()
	for _, m := range msgs {
		if m.Network != "tcp" || m.Hostname == nil || *m.Hostname != b.Addr || m.Timestamp == nil || m.Version != 1 {
			t.Errorf("message header: %s host %v time %v version %d: %.80q", m.Network, m.Hostname, m.Timestamp, m.Version, m.Text())
			break
		}
	}
	if errs := logs.Errors(); len(errs) > 0 {
		t.Errorf("%d frames did not parse as RFC 5424 (first: %v)", len(errs), errs[0])
	}
	t.Logf("collector received %d messages over %d TCP connection(s)", len(msgs), logs.Accepted())
}
