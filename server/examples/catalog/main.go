// Command catalog is an example JSON API on hotpath's server, written as
// a user would write one, and a workload the image builder can embed
// (image.Program{Package: "./server/examples/catalog"}); tests/e2e boots
// it and the bench's "api" scenario measures it:
//
//	GET  /v1/items/{id}  an item of the catalogue, by id
//	POST /v1/score       a JSON body, decoded without allocating
//	                     (package jsondec), validated and scored; 4 KiB at most
//	GET  /v1/metrics     requests, status classes and bytes per route (deferred ones when they end)
//	GET  /v1/proxy/{id}  the body of GET <backend>/{id}, called off the
//	                     worker (server.Ctx.Defer): at most -proxy-calls
//	                     calls at once (beyond: 503), each answered within
//	                     -proxy-timeout (else 504); a backend that fails or
//	                     answers other than 200: 502; no -backend: 503
//
// The catalogue (package items) is built in memory and swapped whole,
// atomically, by a background goroutine every -reload; a real API would
// load it from its database there. Every error is JSON, the server's own
// (404, 405, 413, ...) through Config.ErrorHandler, a body that is not
// valid JSON with the offset and member where it went wrong.
//
// Flags: server.Config's (-port, -cpus, ...; HOTPATH_PORT and
// HOTPATH_CPUS from the environment, as the init passes them), and
// -items, -reload, -stats, -backend (CATALOG_BACKEND from the
// environment, e.g. hotpath.workload.env=CATALOG_BACKEND=http://10.0.2.2:9000),
// -proxy-calls, -proxy-timeout. Every error is JSON: {"error":"..."}.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/hotpath-dev/hotpath/server"
	"github.com/hotpath-dev/hotpath/server/examples/catalog/items"
)

func main() {
	cfg, err := server.ConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "catalog:", err)
		os.Exit(2)
	}
	cfg.RegisterFlags(flag.CommandLine)
	n := flag.Int("items", 10000, "catalogue size")
	every := flag.Duration("reload", 10*time.Second, "how often the catalogue is reloaded and swapped in")
	stats := flag.Bool("stats", false, "print heap allocations per request on exit, counted from SIGUSR1 (benchmarks)")
	backend := flag.String("backend", os.Getenv("CATALOG_BACKEND"), "base URL /v1/proxy/{id} calls (GET URL/{id}); empty: the route answers 503 (env CATALOG_BACKEND)")
	calls := flag.Int("proxy-calls", defaultProxyCalls, "backend calls in flight at most; beyond, /v1/proxy answers 503")
	timeout := flag.Duration("proxy-timeout", defaultProxyTimeout, "/v1/proxy's deadline: a backend call not answered by then gets 504")
	flag.Parse()
	if err := checkBackend(*backend); err != nil {
		fmt.Fprintln(os.Stderr, "catalog:", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	load := func(version int64) *items.Catalog {
		c := items.Generate(*n, 1) // the same content: the bench compares answers with its peers'
		c.Version = version
		return c
	}
	a := newAPI(load(1))
	a.proxy = newProxy(strings.TrimSuffix(*backend, "/"), max(*calls, 1), *timeout)
	a.config(&cfg)
	s := server.New(cfg)
	a.register(s)
	done := make(chan struct{})
	defer close(done)
	go a.reload(*every, load, done)
	counted := make(chan struct{})
	if *stats {
		go countAllocs(s, counted)
	} else {
		close(counted)
	}
	if err := s.ListenAndServe(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "catalog:", err)
		os.Exit(1)
	}
	select { // the stats line, before the process ends
	case <-counted:
	case <-time.After(time.Second):
	}
}

// countAllocs prints heap allocations per request on SIGTERM or SIGINT,
// counted from the last SIGUSR1 (the bench sends it after its warm-up),
// or from the start.
func countAllocs(s *server.Server, counted chan<- struct{}) {
	defer close(counted)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGINT)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs, reqs := ms.Mallocs, s.Requests()
	for sig := range ch {
		runtime.ReadMemStats(&ms)
		if sig == syscall.SIGUSR1 {
			mallocs, reqs = ms.Mallocs, s.Requests()
			continue
		}
		n := s.Requests() - reqs
		per := 0.0
		if n > 0 {
			per = float64(ms.Mallocs-mallocs) / float64(n)
		}
		fmt.Fprintf(os.Stderr, "catalog: stats requests=%d mallocs=%d allocs_per_request=%.6f\n", n, ms.Mallocs-mallocs, per)
		return
	}
}
