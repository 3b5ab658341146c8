package main

import (
	"sync/atomic"
	"time"

	"github.com/hotpath-dev/hotpath/server"
	"github.com/hotpath-dev/hotpath/server/examples/catalog/items"
	"github.com/hotpath-dev/hotpath/server/jsondec"
)

// scoreBodyLimit is /v1/score's body limit, below the server's 1 MiB: a
// larger body is refused with 413 from its Content-Length, before it is
// read.
const scoreBodyLimit = 4 << 10

// scoreSchema maps /v1/score's JSON onto items.ScoreRequest; built once.
var scoreSchema = jsondec.MustSchema[items.ScoreRequest]()

// api is the catalogue API: its data, its per-worker decoders, its
// metrics.
type api struct {
	// catalog is replaced whole by reload; a handler loads it once per
	// request and sees one consistent version.
	catalog atomic.Pointer[items.Catalog]
	// decoders: one JSON decoder per worker CPU, unknown members refused.
	decoders *jsondec.PerCPU
	metrics  *metrics
	// proxy serves /v1/proxy/{id}; newAPI's has no backend (503).
	proxy *proxy
}

// newAPI returns the API serving cat.
func newAPI(cat *items.Catalog) *api {
	a := &api{decoders: jsondec.NewPerCPU(jsondec.Options{DisallowUnknownFields: true}), metrics: newMetrics(),
		proxy: newProxy("", defaultProxyCalls, defaultProxyTimeout)}
	a.catalog.Store(cat)
	return a
}

// config sets the API's error format in a server's configuration.
func (a *api) config(cfg *server.Config) {
	// Every response the server makes on its own (404, 405, 413, 431,
	// ...) in the API's format.
	cfg.ErrorHandler = func(c *server.Ctx, code int, msg string) {
		server.WriteJSON(c, items.ErrorBody{Error: msg, Offset: -1})
	}
}

// register adds the API's routes to s, each but /v1/metrics counted by
// the metrics middleware (/v1/proxy's deferred requests when their
// response is made).
func (a *api) register(s *server.Server) {
	s.Handle("GET", "/v1/items/{id}", a.metrics.wrap("GET /v1/items/{id}", a.getItem))
	s.HandleWith("POST", "/v1/score", server.RouteOptions{MaxBodyBytes: scoreBodyLimit},
		a.metrics.wrap("POST /v1/score", a.score))
	s.Handle("GET", "/v1/metrics", a.serveMetrics)
	a.proxy.register(s, a.metrics)
}

// fail answers code with {"error":msg}.
func fail(c *server.Ctx, code int, msg string) {
	c.SetStatus(code)
	server.WriteJSON(c, items.ErrorBody{Error: msg, Offset: -1})
}

// getItem answers GET /v1/items/{id}.
func (a *api) getItem(c *server.Ctx) {
	id, ok := parseID(c.PathValue("id"))
	if !ok {
		fail(c, 400, "id must be a positive integer")
		return
	}
	it := a.catalog.Load().Get(id)
	if it == nil {
		fail(c, 404, "no such item")
		return
	}
	server.WriteJSON(c, it)
}

// parseID reads a decimal id of at most 18 digits (strconv would need a
// string, and converting the slice would allocate).
func parseID(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, n > 0
}

// score answers POST /v1/score: decode, validate, score.
func (a *api) score(c *server.Ctx) {
	var req items.ScoreRequest
	// req's strings and slices live in the worker's decoder until this
	// handler returns; nothing here keeps them.
	if err := scoreSchema.Decode(a.decoders.For(c.WorkerCPU()), c.Body(), &req); err != nil {
		e := err.(*jsondec.Error)
		c.SetStatus(400)
		server.WriteJSON(c, items.ErrorBody{Error: "invalid JSON: " + e.Reason, Field: e.Field, Offset: e.Offset})
		return
	}
	if msg := req.Validate(); msg != "" {
		fail(c, 422, msg)
		return
	}
	it := a.catalog.Load().Get(req.ItemID)
	if it == nil {
		fail(c, 404, "no such item")
		return
	}
	server.WriteJSON(c, items.Score(&req, it))
}

// reload swaps in a new catalogue from load every interval until done is
// closed: the handlers never wait for it, and the old version stays valid
// for the requests that hold it.
func (a *api) reload(interval time.Duration, load func(version int64) *items.Catalog, done <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			a.catalog.Store(load(a.catalog.Load().Version + 1))
		}
	}
}
