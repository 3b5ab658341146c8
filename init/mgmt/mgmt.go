// Package mgmt is the init's management endpoint: a small HTTP server on
// its own port, separate from the workload's, with
//
//	/metrics  Prometheus metrics (init/metrics), read at scrape time
//	/healthz  200 when the workload runs and accepts connections, else 503
//	          (a load balancer's target health check)
//	/report   the boot report as JSON (503 until the workload first accepted)
//
// It answers without authentication. What it shows is what the serial
// console shows: the configuration, the workload's path, the names in
// workload.env and the flags in workload.args, addresses, the instance's
// identity, the kernel command line, metrics. The values of
// workload.env and workload.args and of the keys in report.redact are
// left out of the report unless report.secrets=show (init/config
// secret.go); anything else a workload's operator puts in a
// configuration key is shown. Restrict the port with mgmt.addr where that
// is too much (README.md, "What listens where"). It changes nothing.
//
// It runs inside PID 1 and a load balancer takes the instance out of
// service when /healthz does not answer, so no client may
// starve it or make it spend the workload's CPU: the guard (guard.go)
// accepts every connection at once and bounds what each address and all
// of them together may hold (a health check from an address of its own
// gets a slot at once, replacing an attacker's silent or idle connection
// if need be), requests wait for their address's token (so a flood costs
// a bounded number of requests per second, not what the clients can
// send), headers must come within 2 s and idle connections go after 5 s
// (DefaultLimits); at most two scrapes run at once (a third gets 503: two
// for a pair of Prometheus servers, no more), and a panic in a handler
// ends that request only (net/http recovers it).
package mgmt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/hotpath-dev/hotpath/init/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultPort is the default management port. 9100 is node_exporter's
// port in Prometheus' port allocations, and this endpoint plays
// node_exporter's role for the appliance (host, NIC and kernel network
// metrics); no node_exporter can run on the appliance to clash with it.
// Fleet scrape configurations and security groups that already open 9100
// to the monitoring system reach it unchanged, and it is far from the
// ports workloads take (80, 443, 3000, 5000, 8000, 8080, 8443, 9000).
// The metric names are hotpath_*, so nothing mistakes it for node_*.
const DefaultPort = 9100

// Limits bound what clients can make the endpoint hold and spend. The
// guard (guard.go) enforces the connection and request limits; net/http's
// Server the timeouts. A zero MaxConns, MaxConnsPerAddr, ReadHeaderTimeout,
// WriteTimeout, IdleTimeout or MaxHeaderBytes means DefaultLimits' value
// (Limits{} is the defaults without a request rate, hold or eviction age);
// the other fields' zero is documented with each.
type Limits struct {
	// MaxConns is the connections held at once; a new one beyond it
	// replaces the oldest that has no request in progress.
	MaxConns int
	// MinEvictAge: a connection older than this with no request in
	// progress may be replaced by a newcomer whatever the addresses' shares
	// (guard.victimLocked); 0: any such connection.
	MinEvictAge time.Duration
	// MaxConnsPerAddr is the connections one remote address may hold.
	MaxConnsPerAddr int
	// RequestsPerAddr and BurstPerAddr are the token bucket of each
	// remote address: requests beyond it wait for their token. 0: no limit.
	RequestsPerAddr float64
	BurstPerAddr    int
	// HoldRejected is how long a refused connection is held unread before
	// it is reset (0.5-1.5x, at random), at most MaxHeld of them at once
	// (the rest are reset at once); 0: every one is reset at once.
	HoldRejected time.Duration
	MaxHeld      int
	// ReadHeaderTimeout bounds reading a request (they have no body);
	// a connection that sends nothing loses its slot after it.
	ReadHeaderTimeout time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration // between keep-alive requests
	MaxHeaderBytes    int
	// Stats is where the guard counts what it did (for /metrics); nil:
	// nowhere.
	Stats *Stats
}

// withDefaults returns l with its zero sizes and timeouts taken from
// DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	for _, f := range []struct{ v, def *int }{{&l.MaxConns, &d.MaxConns}, {&l.MaxConnsPerAddr, &d.MaxConnsPerAddr}, {&l.MaxHeaderBytes, &d.MaxHeaderBytes}} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	for _, f := range []struct{ v, def *time.Duration }{{&l.ReadHeaderTimeout, &d.ReadHeaderTimeout}, {&l.WriteTimeout, &d.WriteTimeout}, {&l.IdleTimeout, &d.IdleTimeout}} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return l
}

// DefaultLimits are the limits of the init's endpoint. A load balancer's
// check is one request on a fresh connection every few seconds per load
// balancer node, a Prometheus scrape one request every 15 s or so, and
// both send their header at once. So 2 s to send a header and 5 s idle
// cost no honest client anything; 8 connections and 2 requests/s (bursts
// of 5) per address leave room for two Prometheus servers and a load
// balancer's nodes behind one NAT address; 256 connections of ~20 KiB
// each (buffers and goroutine) bound the memory to ~5 MiB, and 256
// addresses at 2/s bound the requests to 512/s. A flood from 8 addresses
// cost the endpoint 0.010 CPU-s a second, everything included
// (TestHealthUnderAttack/flood-64). A refused connection is held 2.5-7.5 s:
// a client that reconnects as soon as it is reset then costs an accept
// every 5 s, and 1,024 held descriptors are the most that costs.
var DefaultLimits = Limits{
	MaxConns:          256,
	MaxConnsPerAddr:   8,
	MinEvictAge:       time.Second,
	RequestsPerAddr:   2,
	BurstPerAddr:      5,
	HoldRejected:      5 * time.Second,
	MaxHeld:           1024,
	ReadHeaderTimeout: 2 * time.Second,
	WriteTimeout:      30 * time.Second,
	IdleTimeout:       5 * time.Second,
	MaxHeaderBytes:    8 << 10,
}

// Scrape limits: scrapes at once, and how long one may take before the
// client gets 503.
const (
	MaxScrapes    = 2
	ScrapeTimeout = 20 * time.Second
)

// Options configures Handler.
type Options struct {
	Gatherer prometheus.Gatherer
	Workload metrics.Workload
	// Report returns the boot report, or false before it exists.
	Report func() (any, bool)
	// Logf receives the server's own errors; nil discards them.
	Logf func(format string, args ...any)
}

// Handler returns the endpoint's handler.
func Handler(o Options) http.Handler {
	mux := http.NewServeMux()
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if o.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{
			ErrorLog:            printfLogger(logf),
			ErrorHandling:       promhttp.ContinueOnError,
			MaxRequestsInFlight: MaxScrapes,
			Timeout:             ScrapeTimeout,
		}))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if o.Workload == nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "no workload\n")
			return
		}
		s := o.Workload.Snapshot()
		status, text := http.StatusOK, fmt.Sprintf("ok: workload pid %d ready, up %v\n", s.PID, s.Uptime.Round(time.Second))
		switch {
		case s.Stopping:
			status, text = http.StatusServiceUnavailable, "shutting down\n"
		case s.CrashLoop && !s.Running:
			status, text = http.StatusServiceUnavailable, fmt.Sprintf("workload in a crash loop (restarts %d)\n", s.Restarts)
		case !s.Running:
			status, text = http.StatusServiceUnavailable, fmt.Sprintf("workload not running (restarts %d)\n", s.Restarts)
		case !s.Ready && s.State == "starting":
			status, text = http.StatusServiceUnavailable, fmt.Sprintf("workload pid %d not accepting yet\n", s.PID)
		case !s.Ready:
			// Past its ready deadline without accepting, or failing the
			// liveness probe: the supervisor's state says which.
			status, text = http.StatusServiceUnavailable, fmt.Sprintf("workload pid %d not ready (%s)\n", s.PID, s.State)
		}
		w.WriteHeader(status)
		io.WriteString(w, text)
	})
	mux.HandleFunc("GET /report", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		var rep any
		ok := false
		if o.Report != nil {
			rep, ok = o.Report()
		}
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":"no boot report yet: the workload has not accepted a connection"}`+"\n")
			return
		}
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "{\"error\":%q}\n", err.Error())
			return
		}
		w.Write(append(b, '\n'))
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "hotpath management endpoint: /metrics /healthz /report\n")
	})
	return mux
}

type printfLogger func(format string, args ...any)

func (p printfLogger) Println(v ...any) { p("mgmt: %s", fmt.Sprint(v...)) }

// Server returns an http.Server for h with the timeouts of l. The
// connection and request limits are the guard's (Serve).
func Server(h http.Handler, l Limits, logf func(string, ...any)) *http.Server {
	s := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadHeaderTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
	if logf != nil {
		s.ErrorLog = log.New(logWriter(logf), "mgmt: ", 0)
	}
	return s
}

type logWriter func(string, ...any)

func (l logWriter) Write(p []byte) (int, error) { l("%s", p); return len(p), nil }

// Serve serves h on ln within the limits l until ctx ends.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, l Limits, logf func(string, ...any)) error {
	l = l.withDefaults()
	g := newGuard(ln, l)
	srv := Server(limitRequests(h), l, logf)
	srv.ConnState = g.connState
	srv.ConnContext = connContext
	go func() {
		<-ctx.Done()
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(c)
	}()
	err := srv.Serve(g)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// ListenAndServe listens on addr and serves within l; if the address cannot be
// bound yet (a configured address that DHCP has not brought), it retries
// with back-off (1s doubling to 30s) until ctx ends, logging the first
// failure.
func ListenAndServe(ctx context.Context, addr string, h http.Handler, l Limits, logf func(string, ...any)) error {
	backoff := time.Second
	logged := false
	for {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", addr)
		if err == nil {
			if logged && logf != nil {
				logf("mgmt: listening on %s", addr)
			}
			return Serve(ctx, ln, h, l, logf)
		}
		if !logged && logf != nil {
			logf("mgmt: listen %s: %v; retrying", addr, err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}
