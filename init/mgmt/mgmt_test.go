package mgmt

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/metrics"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// serve starts the endpoint on a loopback port and returns its base URL.
func serve(t *testing.T, o Options, l Limits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, Handler(o), l, t.Logf) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

func get(t *testing.T, url string) (int, string, http.Header) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

// /healthz follows the workload through its life: 503 until ready, 200,
// 503 while the liveness probe fails, while it is down, 200 once the new
// process accepts, 503 at shutdown.
func TestHealthz(t *testing.T) {
	var mu sync.Mutex
	var st metrics.WorkloadState
	w := metrics.WorkloadFunc(func() metrics.WorkloadState { mu.Lock(); defer mu.Unlock(); return st })
	base := serve(t, Options{Workload: w}, DefaultLimits)
	for i, s := range []struct {
		st   metrics.WorkloadState
		want int
		text string
	}{
		{metrics.WorkloadState{State: "down"}, 503, "not running"},
		{metrics.WorkloadState{State: "starting", Running: true, PID: 2}, 503, "not accepting yet"},
		{metrics.WorkloadState{State: "ready", Running: true, Ready: true, PID: 2}, 200, "ok"},
		{metrics.WorkloadState{State: "running", Running: true, PID: 2}, 503, "not ready (running)"},
		{metrics.WorkloadState{State: "down", Restarts: 1}, 503, "not running"},
		{metrics.WorkloadState{State: "crash-loop", Restarts: 4, CrashLoop: true}, 503, "crash loop"},
		{metrics.WorkloadState{State: "ready", Running: true, Ready: true, PID: 7}, 200, "ok"},
		{metrics.WorkloadState{State: "ready", Running: true, Ready: true, PID: 7, Stopping: true}, 503, "shutting down"},
	} {
		mu.Lock()
		st = s.st
		mu.Unlock()
		code, body, h := get(t, base+"/healthz")
		if code != s.want || !strings.Contains(body, s.text) {
			t.Errorf("step %d (%+v): %d %q, want %d %q", i, s.st, code, body, s.want, s.text)
		}
		if h.Get("Cache-Control") != "no-store" {
			t.Errorf("healthz cacheable: %v", h)
		}
	}
	if code, _, _ := get(t, base+"/nowhere"); code != 404 {
		t.Errorf("unknown path: %d", code)
	}
}

func TestReport(t *testing.T) {
	var mu sync.Mutex
	var rep *report.Report
	base := serve(t, Options{Report: func() (any, bool) {
		mu.Lock()
		defer mu.Unlock()
		return rep, rep != nil
	}}, DefaultLimits)
	if code, body, _ := get(t, base+"/report"); code != 503 || !json.Valid([]byte(body)) {
		t.Errorf("before the report: %d %q", code, body)
	}
	mu.Lock()
	rep = &report.Report{Version: report.Version, Kernel: "6.1.0", ReadyMillis: 1234,
		Steps: []report.Step{{Name: "mounts", Status: report.Applied}}}
	mu.Unlock()
	code, body, h := get(t, base+"/report")
	var back report.Report
	if err := json.Unmarshal([]byte(body), &back); err != nil || code != 200 || h.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %v %q", code, err, body)
	}
	if back.ReadyMillis != 1234 || len(back.Steps) != 1 || back.Steps[0].Name != "mounts" {
		t.Errorf("report %+v", back)
	}
}

// /metrics is the Prometheus text format, parsed here with the Prometheus
// project's own parser.
func TestMetrics(t *testing.T) {
	tr := metrics.WorkloadFunc(func() metrics.WorkloadState {
		return metrics.WorkloadState{State: "starting", Running: true, PID: 2, Starts: 2, Restarts: 1}
	})
	reg := metrics.NewRegistry(metrics.Options{ProcRoot: "../metrics/testdata/ena", Workload: tr})
	base := serve(t, Options{Gatherer: reg, Workload: tr}, DefaultLimits)
	code, body, h := get(t, base+"/metrics")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if ct := expfmt.ResponseFormat(h); ct.FormatType() != expfmt.TypeTextPlain {
		t.Errorf("content type %q", h.Get("Content-Type"))
	}
	fams := expfmt.NewDecoder(strings.NewReader(body), expfmt.ResponseFormat(h))
	got := map[string]*dto.MetricFamily{}
	for {
		var f dto.MetricFamily
		if err := fams.Decode(&f); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decode: %v", err)
		}
		got[f.GetName()] = &f
	}
	for _, name := range []string{"hotpath_workload_restarts_total", "hotpath_netstat_TcpExt_ListenOverflows", "hotpath_softnet_dropped_total"} {
		if got[name] == nil {
			t.Errorf("no %s", name)
		}
	}
	if v := got["hotpath_workload_restarts_total"].Metric[0].Counter.GetValue(); v != 1 {
		t.Errorf("restarts %v", v)
	}
}

// Two scrapes may run at once; a third gets 503 at once rather than
// queueing more work in PID 1.
func TestScrapeConcurrency(t *testing.T) {
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(MaxScrapes)
	slow := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		started.Done()
		<-release
		return nil, nil
	})
	base := serve(t, Options{Gatherer: slow}, DefaultLimits)
	codes := make(chan int, MaxScrapes)
	for i := 0; i < MaxScrapes; i++ {
		go func() {
			resp, err := http.Get(base + "/metrics")
			if err != nil {
				codes <- -1
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	started.Wait()
	if code, body, _ := get(t, base+"/metrics"); code != 503 {
		t.Errorf("scrape %d while %d run: %d %q", MaxScrapes+1, MaxScrapes, code, body)
	}
	// The health check is not held up by scrapes.
	if code, _, _ := get(t, base+"/healthz"); code != 503 {
		t.Errorf("healthz without workload: %d", code)
	}
	close(release)
	for i := 0; i < MaxScrapes; i++ {
		if c := <-codes; c != 200 {
			t.Errorf("held scrape: %d", c)
		}
	}
}

// Connections beyond MaxConns wait; a client that opens connections and
// sends nothing loses them after ReadHeaderTimeout, and the server then
// answers others. An oversized header gets 431.
func TestConnectionLimits(t *testing.T) {
	l := Limits{MaxConns: 3, ReadHeaderTimeout: 300 * time.Millisecond, WriteTimeout: time.Second, IdleTimeout: time.Second, MaxHeaderBytes: 1 << 10}
	base := serve(t, Options{Workload: metrics.WorkloadFunc(func() metrics.WorkloadState { return metrics.WorkloadState{} })}, l)
	addr := strings.TrimPrefix(base, "http://")
	var idle []net.Conn
	for i := 0; i < l.MaxConns+2; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	// The held connections are closed by the server once the header
	// timeout passes; a real request then gets through.
	code, _, _ := get(t, base+"/healthz")
	if code != 503 {
		t.Errorf("healthz after idle connections: %d", code)
	}
	closed := 0
	for _, c := range idle[:l.MaxConns] {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := bufio.NewReader(c).ReadByte(); err != nil {
			closed++
		}
	}
	if closed != l.MaxConns {
		t.Errorf("%d of %d silent connections closed by the server", closed, l.MaxConns)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 8<<10))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("oversized header: %d", resp.StatusCode)
	}
}

// ListenAndServe waits for an address that cannot be bound yet.
func TestListenRetry(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := busy.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var logs []string
	done := make(chan error, 1)
	go func() {
		done <- ListenAndServe(ctx, addr, Handler(Options{}), func(f string, a ...any) {
			mu.Lock()
			logs = append(logs, fmt.Sprintf(f, a...))
			mu.Unlock()
		})
	}()
	time.Sleep(200 * time.Millisecond)
	busy.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never served after the address freed: %v (%q)", err, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(logs) != 2 || !strings.Contains(logs[0], "retrying") {
		t.Errorf("logs %q", logs)
	}
}
