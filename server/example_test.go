package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hotpath-dev/hotpath/server"
	"github.com/hotpath-dev/hotpath/server/jsonenc"
)

// greeting describes its JSON encoding with a jsonenc.Encoder. A value
// receiver lets server.WriteJSON keep each request's fresh value on the
// stack: no allocation.
type greeting struct {
	Name  string
	Count int64
}

func (g greeting) AppendJSON(dst []byte) []byte {
	e := jsonenc.NewEncoder(dst)
	e.BeginObject()
	e.Key("hello")
	e.String(g.Name)
	e.Key("count")
	e.Int(g.Count)
	e.EndObject()
	return e.Bytes()
}

func Example() {
	cfg := server.DefaultConfig() // or server.ConfigFromEnv(os.Getenv) in a workload
	cfg.Addr, cfg.Port = "127.0.0.1", 0
	cfg.Log = io.Discard

	s := server.New(cfg)
	s.Handle("GET", "/hello", func(c *server.Ctx) {
		n, _ := strconv.ParseInt(string(c.Query()), 10, 64)
		server.WriteJSON(c, greeting{Name: "world", Count: n})
	})
	s.Handle("POST", "/len", func(c *server.Ctx) {
		c.SetResponseBody(strconv.AppendInt(c.ResponseBody(), int64(len(c.Body())), 10))
	})
	if err := s.Start(); err != nil {
		fmt.Println(err)
		return
	}
	// A workload calls s.ListenAndServe(ctx) instead, with ctx from
	// signal.NotifyContext(..., syscall.SIGTERM, os.Interrupt).
	defer s.Shutdown(context.Background())

	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(s.Port()) + "/hello?3")
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"), string(body))
	// Output: 200 application/json {"hello":"world","count":3}
}

// routeStats counts the requests of one route and the bytes it answered.
// One per route, made at registration: a middleware keeps its state per
// route, never per request, so that it allocates nothing.
type routeStats struct {
	requests, errors, bytes atomic.Int64
}

// withStats is a middleware: a Handler that wraps a Handler. It reads
// what the handler set (Status, ResponseLen) after calling it. The
// counters are atomics because every worker runs the same handler: a
// real one would keep them per worker (Ctx.WorkerCPU) to share no cache
// line between CPUs.
func withStats(st *routeStats, h server.Handler) server.Handler {
	return func(c *server.Ctx) {
		h(c)
		st.requests.Add(1)
		st.bytes.Add(int64(c.ResponseLen()))
		if c.Status() >= 400 {
			st.errors.Add(1)
		}
	}
}

// item is what GET /v1/items/{id} answers.
type item struct {
	ID    []byte
	Limit int64
}

func (it item) AppendJSON(dst []byte) []byte {
	e := jsonenc.NewEncoder(dst)
	e.BeginObject()
	e.Key("id")
	e.StringBytes(it.ID)
	e.Key("limit")
	e.Int(it.Limit)
	e.EndObject()
	return e.Bytes()
}

// An API: a route with a parameter and a query value, a route with a
// lower body limit, errors in JSON, and a middleware that counts per
// route.
func Example_api() {
	cfg := server.DefaultConfig()
	cfg.Addr, cfg.Port = "127.0.0.1", 0
	cfg.Log = io.Discard
	// Every response the server makes on its own (404, 405, 413, ...) in
	// the API's format.
	cfg.ErrorHandler = func(c *server.Ctx, code int, msg string) {
		c.SetContentType("application/json")
		c.SetResponseBody(fmt.Appendf(c.ResponseBody(), `{"error":%q}`, msg))
	}
	s := server.New(cfg)

	var items routeStats
	s.Handle("GET", "/v1/items/{id}", withStats(&items, func(c *server.Ctx) {
		limit := int64(10)
		if v, ok := c.QueryValue("limit"); ok {
			limit, _ = strconv.ParseInt(string(v), 10, 64)
		}
		server.WriteJSON(c, item{ID: c.PathValue("id"), Limit: limit})
	}))
	s.HandleWith("POST", "/v1/score", server.RouteOptions{MaxBodyBytes: 4 << 10}, func(c *server.Ctx) {
		c.SetResponseBody(strconv.AppendInt(c.ResponseBody(), int64(len(c.Body())), 10))
	})
	if err := s.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer s.Shutdown(context.Background())

	base := "http://127.0.0.1:" + strconv.Itoa(s.Port())
	show := func(resp *http.Response, err error) {
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body))
	}
	show(http.Get(base + "/v1/items/sku-42?limit=3"))
	show(http.Get(base + "/v1/items/sku%2042"))
	show(http.Get(base + "/v1/nothing"))
	show(http.Post(base+"/v1/score", "application/json", strings.NewReader(strings.Repeat(" ", 5<<10))))
	fmt.Println("items:", items.requests.Load(), "requests,", items.bytes.Load(), "bytes")
	// Output:
	// 200 {"id":"sku-42","limit":3}
	// 200 {"id":"sku 42","limit":10}
	// 404 {"error":"not found"}
	// 413 {"error":"request body too large"}
	// items: 2 requests, 51 bytes
}

// A route that calls a backend without blocking its worker: the handler
// defers the request and returns; a bounded pool of goroutines calls the
// backend with a client bound to the request's context (its deadline is
// the route's DeferTimeout; it ends too when the client leaves or the
// server stops); Finish hands the answer back to the worker, which writes
// it. A backend that does not answer in time gets the client a 504 in the
// API's format.
func Example_deferred() {
	// The backend: another service, here on loopback.
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/items/slow" {
			<-r.Context().Done() // never answers in time
			return
		}
		fmt.Fprintf(w, `{"item":%q}`, strings.TrimPrefix(r.URL.Path, "/items/"))
	}))
	defer backend.Close()

	cfg := server.DefaultConfig()
	cfg.Addr, cfg.Port = "127.0.0.1", 0
	cfg.Log = io.Discard
	cfg.ErrorHandler = func(c *server.Ctx, code int, msg string) {
		c.SetContentType("application/json")
		c.SetResponseBody(fmt.Appendf(c.ResponseBody(), `{"error":%q}`, msg))
	}
	s := server.New(cfg)

	client := &http.Client{}         // no timeout of its own: each call's comes from its request
	calls := make(chan struct{}, 64) // at most 64 backend calls at once
	s.HandleWith("GET", "/v1/proxy/{id}", server.RouteOptions{DeferTimeout: 200 * time.Millisecond}, func(c *server.Ctx) {
		id := string(c.PathValue("id")) // the handler's Ctx is reused once it returns: copy
		d := c.Defer()
		select {
		case calls <- struct{}{}:
		default:
			d.Finish(func(c *server.Ctx) { c.Error(http.StatusServiceUnavailable, "backend busy") })
			return
		}
		go func() {
			defer func() { <-calls }()
			req, _ := http.NewRequestWithContext(d.Context(), "GET", backend.URL+"/items/"+id, nil)
			resp, err := client.Do(req)
			if err != nil {
				return // the deadline (answered 504), or the client left
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			d.Finish(func(c *server.Ctx) {
				if err != nil {
					c.Error(http.StatusBadGateway, "backend failed")
					return
				}
				c.SetContentType("application/json")
				c.Write(body)
			})
		}()
	})
	if err := s.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer s.Shutdown(context.Background())

	base := "http://127.0.0.1:" + strconv.Itoa(s.Port())
	for _, id := range []string{"42", "slow"} {
		resp, err := http.Get(base + "/v1/proxy/" + id)
		if err != nil {
			fmt.Println(err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body))
	}
	// Output:
	// 200 {"item":"42"}
	// 504 {"error":"deferred response not finished in time"}
}
