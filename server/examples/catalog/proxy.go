package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/hotpath-dev/hotpath/server"
)

// The /v1/proxy route's defaults (flags -proxy-calls, -proxy-timeout).
const (
	defaultProxyCalls   = 64
	defaultProxyTimeout = 2 * time.Second
)

// checkBackend refuses a -backend that is not an http:// or https:// URL.
func checkBackend(backend string) error {
	if backend == "" {
		return nil
	}
	u, err := url.Parse(backend)
	if err != nil {
		return fmt.Errorf("-backend: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("-backend %q: want http://host[:port][/path]", backend)
	}
	return nil
}

// proxyBodyLimit bounds the backend answer /v1/proxy/{id} passes on: the
// copy is held while the call is in flight.
const proxyBodyLimit = 64 << 10

// proxy serves GET /v1/proxy/{id}: it answers with the body of GET
// backend/{id}, called off the worker (server.Ctx.Defer) so that a slow
// backend never holds the worker's other requests. The pattern of
// server's Example_deferred.
type proxy struct {
	// backend is the base URL; "" answers 503.
	backend string
	// client has no timeout of its own: each call's request is bound to
	// the Deferred's context, which ends at the route's deadline (the
	// worker answers 504 through the ErrorHandler) or when the client
	// leaves, and the call is cancelled with it.
	client *http.Client
	// calls is a semaphore: at most cap(calls) backend calls at once,
	// beyond it 503 at once. A goroutine per call bounded this way costs
	// nothing while idle, where a fixed pool would park its goroutines.
	calls chan struct{}
	// timeout is the route's DeferTimeout.
	timeout time.Duration
}

// newProxy returns the /v1/proxy route's handler for backend, with at
// most calls backend calls at once, each answered within timeout.
func newProxy(backend string, calls int, timeout time.Duration) *proxy {
	return &proxy{backend: backend, client: &http.Client{}, calls: make(chan struct{}, calls), timeout: timeout}
}

// register adds the route to s, counted by m.
func (p *proxy) register(s *server.Server, m *metrics) {
	s.HandleWith("GET", "/v1/proxy/{id}", server.RouteOptions{DeferTimeout: p.timeout}, m.wrap("GET /v1/proxy/{id}", p.serve))
}

// serve defers the request and hands the backend call to a goroutine.
func (p *proxy) serve(c *server.Ctx) {
	if p.backend == "" {
		fail(c, http.StatusServiceUnavailable, "no backend configured")
		return
	}
	// The handler's Ctx is reused once it returns: build the URL now.
	target := p.backend + "/" + url.PathEscape(string(c.PathValue("id")))
	select {
	case p.calls <- struct{}{}:
	default:
		fail(c, http.StatusServiceUnavailable, "too many backend calls")
		return
	}
	d := c.Defer()
	if d.Context().Err() != nil {
		<-p.calls // refused (the worker holds too many): answered 503 already
		return
	}
	go func() {
		defer func() { <-p.calls }()
		body, ctype, err := p.call(d, target)
		if err != nil && d.Context().Err() != nil {
			return // the deadline (the worker answers 504) or the client left
		}
		d.Finish(func(c *server.Ctx) {
			if err != nil {
				fail(c, http.StatusBadGateway, err.Error())
				return
			}
			c.SetContentType(ctype)
			c.Write(body)
		})
	}()
}

// errTooLarge: the backend's answer is over proxyBodyLimit.
var errTooLarge = errors.New("backend answer too large")

// call GETs target bound to d's context and returns the body and its
// content type; a status other than 200 is an error.
func (p *proxy) call(d *server.Deferred, target string) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(d.Context(), "GET", target, nil)
	if err != nil {
		return nil, "", fmt.Errorf("backend request: %w", err)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, "", errors.New("backend failed")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("backend answered %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, proxyBodyLimit+1))
	if err != nil {
		return nil, "", errors.New("backend failed")
	}
	if len(body) > proxyBodyLimit {
		return nil, "", errTooLarge
	}
	ctype := resp.Header.Get("Content-Type")
	if ctype == "" {
		ctype = "application/json"
	}
	return body, ctype, nil
}
