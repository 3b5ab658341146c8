package main

import (
	"runtime"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/hotpath-dev/hotpath/server"
	"github.com/hotpath-dev/hotpath/server/jsonenc"
)

// maxRoutes bounds the routes metrics counts.
const maxRoutes = 8

// counters are one route's figures on one CPU. A deferred request is
// counted when it ends (server.Deferred.OnDone): requests, its status
// class and bytes once its response is made, deferred and deferredNanos
// (the time from Defer to the response) whether it was answered or not,
// dropped when it ended without a response (the client left, the server
// stopped).
type counters struct {
	requests, status2xx, status4xx, status5xx, bytes atomic.Uint64
	deferred, dropped, deferredNanos                 atomic.Uint64
}

// cpuRow is one CPU's counters, padded to whole cache lines: each worker
// writes only its own row, so no line is shared between CPUs and the
// atomic adds are never contended.
type cpuRow struct {
	routes [maxRoutes]counters
	_      [64]byte
}

// metrics counts requests, status classes and response bytes per route,
// in a middleware: the one wrap puts around each handler. Deferred
// requests (server.Ctx.Defer) are counted when they end, with the status
// their response had, and how long they were held.
type metrics struct {
	names []string
	rows  []cpuRow // by CPU number
}

// newMetrics returns metrics with a row for every CPU a worker can be
// pinned to: the machine's and the process's affinity mask's.
func newMetrics() *metrics {
	n := runtime.NumCPU()
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) == nil {
		for cpu := range len(set) * 64 {
			if set.IsSet(cpu) {
				n = max(n, cpu+1)
			}
		}
	}
	return &metrics{rows: make([]cpuRow, n)}
}

// wrap returns h counted under route. Call it before the server starts.
func (m *metrics) wrap(route string, h server.Handler) server.Handler {
	if len(m.names) == maxRoutes {
		panic("metrics: more than maxRoutes routes")
	}
	i := len(m.names)
	m.names = append(m.names, route)
	// done is made once here, not per request: the synchronous path
	// allocates nothing.
	done := func(d *server.Deferred, c *server.Ctx) { m.count(i, c, d) }
	return func(c *server.Ctx) {
		h(c)
		// A deferred request has no status yet (0): it is counted when
		// its response is made, on the worker, with the status it had.
		if c.Status() == 0 {
			if d := c.Deferred(); d != nil {
				d.OnDone(done)
				return
			}
		}
		m.count(i, c, nil)
	}
}

// count adds c's response to route i's counters of the worker's CPU; d
// is the request's Deferred, nil when it was answered by its handler.
func (m *metrics) count(i int, c *server.Ctx, d *server.Deferred) {
	cpu := c.WorkerCPU()
	if cpu < 0 || cpu >= len(m.rows) {
		return
	}
	r := &m.rows[cpu].routes[i]
	r.requests.Add(1)
	s := c.Status()
	if d != nil {
		r.deferred.Add(1)
		r.deferredNanos.Add(uint64(d.Elapsed()))
		if s == 0 {
			r.dropped.Add(1) // no response: no class, no bytes
			return
		}
	}
	switch {
	case s >= 500:
		r.status5xx.Add(1)
	case s >= 400:
		r.status4xx.Add(1)
	default:
		r.status2xx.Add(1)
	}
	r.bytes.Add(uint64(c.ResponseLen()))
}

var (
	nRoutes, nRoute, nRequests  = jsonenc.NewName("routes"), jsonenc.NewName("route"), jsonenc.NewName("requests")
	n2xx, n4xx, n5xx, nBytes    = jsonenc.NewName("2xx"), jsonenc.NewName("4xx"), jsonenc.NewName("5xx"), jsonenc.NewName("bytes")
	nDeferred, nDropped, nDefUS = jsonenc.NewName("deferred"), jsonenc.NewName("dropped"), jsonenc.NewName("deferred_us")
	nVersion                    = jsonenc.NewName("catalog_version")
)

// serveMetrics answers GET /v1/metrics with the sums over every CPU.
func (a *api) serveMetrics(c *server.Ctx) {
	e := jsonenc.NewEncoder(c.ResponseBody()[:0])
	e.BeginObject()
	e.Name(nVersion)
	e.Int(a.catalog.Load().Version)
	e.Name(nRoutes)
	e.BeginArray()
	m := a.metrics
	for i, name := range m.names {
		var req, s2, s4, s5, b, def, drop, ns uint64
		for cpu := range m.rows {
			r := &m.rows[cpu].routes[i]
			req += r.requests.Load()
			s2 += r.status2xx.Load()
			s4 += r.status4xx.Load()
			s5 += r.status5xx.Load()
			b += r.bytes.Load()
			def += r.deferred.Load()
			drop += r.dropped.Load()
			ns += r.deferredNanos.Load()
		}
		e.BeginObject()
		e.Name(nRoute)
		e.String(name)
		e.Name(nRequests)
		e.Uint(req)
		e.Name(n2xx)
		e.Uint(s2)
		e.Name(n4xx)
		e.Uint(s4)
		e.Name(n5xx)
		e.Uint(s5)
		e.Name(nBytes)
		e.Uint(b)
		e.Name(nDeferred)
		e.Uint(def)
		e.Name(nDropped)
		e.Uint(drop)
		e.Name(nDefUS)
		e.Uint(ns / 1000)
		e.EndObject()
	}
	e.EndArray()
	e.EndObject()
	c.SetContentType("application/json")
	c.SetResponseBody(e.Bytes())
}
