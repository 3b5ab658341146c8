package mgmt

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/metrics"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"golang.org/x/time/rate"
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

// testLimits are small limits for pushing past each one.
var testLimits = Limits{MaxConns: 3, MaxConnsPerAddr: 2, MinEvictAge: time.Hour, RequestsPerAddr: 0,
	HoldRejected: time.Second, MaxHeld: 4,
	ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second, MaxHeaderBytes: 1 << 10}

// fate says what the server did with a connection that sent nothing,
// within wait: "open" (nothing yet), "closed" (EOF or reset, logged).
func fate(t *testing.T, c net.Conn, wait time.Duration) string {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(wait))
	_, err := c.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return "open"
	}
	if err == nil {
		t.Fatalf("silent connection got data")
	}
	t.Logf("closed after %v: %v", time.Since(start).Round(time.Millisecond), err)
	return "closed"
}

func silent(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	c, err := dialFrom(src, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	time.Sleep(20 * time.Millisecond) // accepted and on the books
	return c
}

// TestConnectionLimits pushes past each limit of the guard.
func TestConnectionLimits(t *testing.T) {
	noWorkload := Options{Workload: metrics.WorkloadFunc(func() metrics.WorkloadState { return metrics.WorkloadState{} })}
	// healthy checks /healthz from 127.0.0.1 on a connection of its own
	// that the server closes after the answer, as a load balancer does.
	healthy := func(t *testing.T, base string) {
		t.Helper()
		if err := healthz(strings.TrimPrefix(base, "http://")); err == nil || err.Error() != "status 503" {
			t.Errorf("healthz: %v, want status 503 (no workload)", err)
		}
		time.Sleep(20 * time.Millisecond) // its slot freed
	}
	t.Run("per-address", func(t *testing.T) {
		l := testLimits
		l.Stats = &Stats{}
		base := serve(t, noWorkload, l)
		addr := strings.TrimPrefix(base, "http://")
		a, b := silent(t, "127.0.5.1", addr), silent(t, "127.0.5.1", addr)
		third := silent(t, "127.0.5.1", addr)
		if f := fate(t, third, 200*time.Millisecond); f != "open" {
			t.Errorf("refused connection %s at once, want held for HoldRejected", f)
		}
		healthy(t, base) // another address is served meanwhile
		if f := fate(t, third, 3*time.Second); f != "closed" {
			t.Errorf("refused connection still %s after 1.5 HoldRejected", f)
		}
		if fate(t, a, 10*time.Millisecond) != "open" || fate(t, b, 10*time.Millisecond) != "open" {
			t.Errorf("the address's first two connections were closed")
		}
		if r, h, o := l.Stats.Refused.Load(), l.Stats.Held.Load(), l.Stats.Open.Load(); r != 1 || h != 0 || o != 2 {
			t.Errorf("stats: refused %d held %d open %d, want 1 0 2", r, h, o)
		}
	})
	t.Run("total-fair-share", func(t *testing.T) {
		l := testLimits
		l.Stats = &Stats{}
		base := serve(t, noWorkload, l)
		addr := strings.TrimPrefix(base, "http://")
		a1, a2 := silent(t, "127.0.6.1", addr), silent(t, "127.0.6.1", addr)
		b := silent(t, "127.0.6.2", addr)
		// Full (3). A newcomer from its own address replaces the oldest
		// silent connection of the address holding two.
		healthy(t, base)
		if fate(t, a1, 500*time.Millisecond) != "closed" {
			t.Errorf("the oldest connection of the address holding most was not evicted")
		}
		if fate(t, a2, 10*time.Millisecond) != "open" || fate(t, b, 10*time.Millisecond) != "open" {
			t.Errorf("other connections were evicted")
		}
		// Now 127.0.6.1 and .2 hold one each (the health check's is
		// closed): a third address gets the free slot, and a fourth, with
		// equal shares everywhere and nothing older than MinEvictAge, is
		// refused rather than evicting an equal.
		c := silent(t, "127.0.6.3", addr)
		d := silent(t, "127.0.6.4", addr)
		if fate(t, d, 100*time.Millisecond) != "open" || fate(t, d, 3*time.Second) != "closed" {
			t.Errorf("an equal share was not refused")
		}
		for _, x := range []net.Conn{a2, b, c} {
			if fate(t, x, 10*time.Millisecond) != "open" {
				t.Errorf("an equal share was evicted")
			}
		}
		if e, r, a := l.Stats.Evicted.Load(), l.Stats.Refused.Load(), l.Stats.Accepted.Load(); e != 1 || r != 1 || a != 5 {
			t.Errorf("stats: evicted %d refused %d accepted %d, want 1 1 5", e, r, a)
		}
	})
	t.Run("total-age", func(t *testing.T) {
		l := testLimits
		l.MinEvictAge = 200 * time.Millisecond
		base := serve(t, noWorkload, l)
		addr := strings.TrimPrefix(base, "http://")
		x := silent(t, "127.0.7.1", addr)
		silent(t, "127.0.7.2", addr)
		silent(t, "127.0.7.3", addr)
		time.Sleep(250 * time.Millisecond)
		healthy(t, base) // equal shares, but older than MinEvictAge
		if fate(t, x, 500*time.Millisecond) != "closed" {
			t.Errorf("the oldest silent connection was not evicted")
		}
	})
	t.Run("active-not-evicted", func(t *testing.T) {
		release := make(chan struct{})
		var started sync.WaitGroup
		started.Add(2)
		slow := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
			started.Done()
			<-release
			return nil, nil
		})
		l := testLimits
		l.MaxConns, l.MinEvictAge = 2, 0
		base := serve(t, Options{Gatherer: slow}, l)
		addr := strings.TrimPrefix(base, "http://")
		codes := make(chan int, 2)
		for _, src := range []string{"127.0.8.1", "127.0.8.2"} {
			c, err := dialFrom(src, addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
			go func() {
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					codes <- -1
					return
				}
				codes <- resp.StatusCode
			}()
		}
		started.Wait()
		n := silent(t, "127.0.8.3", addr)
		if fate(t, n, 100*time.Millisecond) != "open" || fate(t, n, 3*time.Second) != "closed" {
			t.Errorf("a newcomer was not refused while every slot ran a request")
		}
		close(release)
		for range 2 {
			if c := <-codes; c != 200 {
				t.Errorf("a running request was cut: %d", c)
			}
		}
	})
	t.Run("held-bounded", func(t *testing.T) {
		l := testLimits
		l.MaxConnsPerAddr, l.MaxHeld = 1, 2
		base := serve(t, noWorkload, l)
		addr := strings.TrimPrefix(base, "http://")
		silent(t, "127.0.9.1", addr)
		h1, h2 := silent(t, "127.0.9.1", addr), silent(t, "127.0.9.1", addr)
		// The third refused one finds MaxHeld held: reset at once (the
		// dial itself may see the reset).
		c, err := dialFrom("127.0.9.1", addr)
		if err == nil {
			defer c.Close()
			if f := fate(t, c, 200*time.Millisecond); f != "closed" {
				t.Errorf("refused connection beyond MaxHeld %s", f)
			}
		}
		if fate(t, h1, 100*time.Millisecond) != "open" || fate(t, h2, 10*time.Millisecond) != "open" {
			t.Errorf("held connections closed early")
		}
	})
	t.Run("header-timeout", func(t *testing.T) {
		l := testLimits
		l.ReadHeaderTimeout = 300 * time.Millisecond
		base := serve(t, noWorkload, l)
		c := silent(t, "127.0.10.1", strings.TrimPrefix(base, "http://"))
		if fate(t, c, 100*time.Millisecond) != "open" || fate(t, c, 2*time.Second) != "closed" {
			t.Errorf("a silent connection outlived ReadHeaderTimeout")
		}
	})
	t.Run("request-rate", func(t *testing.T) {
		l := testLimits
		l.RequestsPerAddr, l.BurstPerAddr = 4, 1
		l.Stats = &Stats{}
		base := serve(t, noWorkload, l)
		addr := strings.TrimPrefix(base, "http://")
		c, err := dialFrom("127.0.11.1", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		br := bufio.NewReader(c)
		start := time.Now()
		for range 3 {
			io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		// 1 at once, 2 more at 4/s: at least 500 ms.
		if d := time.Since(start); d < 450*time.Millisecond {
			t.Errorf("3 requests at 4/s burst 1 took %v", d)
		}
		// Closing and reconnecting does not give a fresh bucket.
		c.Close()
		c, err = dialFrom("127.0.11.1", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start = time.Now()
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
			t.Fatal(err)
		} else {
			resp.Body.Close()
		}
		if d := time.Since(start); d < 200*time.Millisecond {
			t.Errorf("a reconnection got a fresh bucket: answered in %v, want the 250 ms wait", d)
		}
		// Counted, and exposed as a metric.
		reg := prometheus.NewRegistry()
		reg.MustRegister(l.Stats.Collectors()...)
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		delayed := -1.0
		for _, f := range fams {
			if f.GetName() == "hotpath_mgmt_requests_delayed_total" {
				delayed = f.Metric[0].Counter.GetValue()
			}
		}
		if delayed != 3 {
			t.Errorf("hotpath_mgmt_requests_delayed_total %v, want 3", delayed)
		}
		// Another address has its own bucket: no 250 ms wait.
		start = time.Now()
		healthy(t, base)
		if d := time.Since(start); d > 200*time.Millisecond {
			t.Errorf("another address waited %v", d)
		}
	})
	t.Run("header-size", func(t *testing.T) {
		base := serve(t, noWorkload, testLimits)
		c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
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
	})
}

// Limits{} serves with the default sizes and timeouts (it used to refuse
// every connection: MaxConns 0).
func TestZeroLimits(t *testing.T) {
	base := serve(t, Options{}, Limits{})
	if code, _, _ := get(t, base+"/healthz"); code != 503 {
		t.Errorf("healthz with Limits{}: %d", code)
	}
	if l := (Limits{}).withDefaults(); l.MaxConns != DefaultLimits.MaxConns || l.IdleTimeout != DefaultLimits.IdleTimeout ||
		l.RequestsPerAddr != 0 || l.HoldRejected != 0 {
		t.Errorf("Limits{} with defaults: %+v", l)
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
		done <- ListenAndServe(ctx, addr, Handler(Options{}), DefaultLimits, func(f string, a ...any) {
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

// The per-address limits count an IPv6 client by its /64 (one host holds
// a whole /64) and an IPv4-mapped one as IPv4.
func TestClientKey(t *testing.T) {
	for _, tt := range []struct{ a, b string }{
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff::9"},
		{"fe80::1%eth0", "fe80::2"},
		{"::ffff:192.0.2.1", "192.0.2.1"},
	} {
		if ka, kb := keyOf(netip.MustParseAddr(tt.a)), keyOf(netip.MustParseAddr(tt.b)); ka != kb {
			t.Errorf("%s -> %v, %s -> %v: want one key", tt.a, ka, tt.b, kb)
		}
	}
	for _, tt := range []struct{ a, b string }{
		{"2001:db8:1:2::1", "2001:db8:1:3::1"},
		{"192.0.2.1", "192.0.2.2"},
	} {
		if keyOf(netip.MustParseAddr(tt.a)) == keyOf(netip.MustParseAddr(tt.b)) {
			t.Errorf("%s and %s share a key", tt.a, tt.b)
		}
	}
}

// The guard forgets an address without connections once its bucket is
// full again, not before (else a reconnection gets a fresh burst), and
// every such address past maxAddrs.
func TestSweep(t *testing.T) {
	g := newGuard(nil, Limits{RequestsPerAddr: 1, BurstPerAddr: 2})
	now := time.Now()
	add := func(k string, conns int, spent bool) {
		a := &addrState{conns: conns, limiter: rate.NewLimiter(1, 2)}
		if spent {
			a.limiter.AllowN(now, 2)
		}
		g.addrs[netip.MustParseAddr(k)] = a
	}
	add("192.0.2.1", 0, false) // full, no connection: forgotten
	add("192.0.2.2", 0, true)  // spent: kept
	add("192.0.2.3", 1, false) // connected: kept
	g.sweepLocked(now)
	if len(g.addrs) != 2 || g.addrs[netip.MustParseAddr("192.0.2.1")] != nil {
		t.Errorf("after a sweep: %v", g.addrs)
	}
	g.sweepLocked(now.Add(3 * time.Second)) // refilled
	if len(g.addrs) != 1 {
		t.Errorf("a refilled bucket kept: %v", g.addrs)
	}
	later := now.Add(3 * time.Second)
	now = later // spent now: kept but for maxAddrs
	for i := range maxAddrs + 1 {
		add(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String(), 0, true)
	}
	g.sweepLocked(later)
	if len(g.addrs) != 1 {
		t.Errorf("past maxAddrs %d addresses kept", len(g.addrs))
	}
}
