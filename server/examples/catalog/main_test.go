package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/server"
	"github.com/hotpath-dev/hotpath/server/examples/catalog/items"
)

// start serves a on a loopback port, a worker per CPU, and returns its base
// URL.
func start(t *testing.T, a *api) string {
	t.Helper()
	return startWith(t, a, nil)
}

// startWith is start with set, if not nil, changing the configuration.
func startWith(t *testing.T, a *api, set func(*server.Config)) string {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.Addr, cfg.Port = "127.0.0.1", 0
	cfg.Log = io.Discard
	cfg.CPUs = cfg.CPUs[:0]
	a.config(&cfg)
	if set != nil {
		set(&cfg)
	}
	s := server.New(cfg)
	a.register(s)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return "http://127.0.0.1:" + strconv.Itoa(s.Port())
}

type answer struct {
	code  int
	ctype string
	body  string
	allow string
}

func do(t *testing.T, method, url, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(b), resp.Header.Get("Allow")}
}

// TestAPI: every route and every error, over a real socket; every answer
// is JSON.
func TestAPI(t *testing.T) {
	cat := items.Generate(100, 1)
	base := start(t, newAPI(cat))
	var req items.ScoreRequest
	if err := json.Unmarshal([]byte(items.SampleScoreBody), &req); err != nil {
		t.Fatal(err)
	}
	scored := string(items.Score(&req, cat.Get(42)).AppendJSON(nil))
	big := `{"user_id":1` + strings.Repeat(" ", scoreBodyLimit) + `}`
	limit := `{"user_id":1` + strings.Repeat(" ", scoreBodyLimit-len(`{"user_id":1}`)) + `}`
	for _, tc := range []struct {
		name, method, path, body string
		want                     answer
	}{
		{"item", "GET", "/v1/items/42", "", answer{200, "", string(cat.Get(42).AppendJSON(nil)), ""}},
		{"last item", "GET", "/v1/items/100", "", answer{200, "", string(cat.Get(100).AppendJSON(nil)), ""}},
		{"no such item", "GET", "/v1/items/101", "", answer{404, "", `{"error":"no such item"}`, ""}},
		{"bad id", "GET", "/v1/items/4x2", "", answer{400, "", `{"error":"id must be a positive integer"}`, ""}},
		{"no route", "GET", "/v1/nothing", "", answer{404, "", `{"error":"not found"}`, ""}},
		{"method", "DELETE", "/v1/items/42", "", answer{405, "", `{"error":"method not allowed"}`, "GET, HEAD"}},
		{"score", "POST", "/v1/score", items.SampleScoreBody, answer{200, "", scored, ""}},
		{"bad JSON", "POST", "/v1/score", `{"user_id":12,"age":"x"}`, answer{400, "", `{"error":"invalid JSON: expected an integer","field":"age","offset":20}`, ""}},
		{"truncated", "POST", "/v1/score", `{"user_id":1,`, answer{400, "", `{"error":"invalid JSON: unexpected end of input","offset":13}`, ""}},
		{"unknown member", "POST", "/v1/score", `{"user_id":1,"zz":2}`, answer{400, "", `{"error":"invalid JSON: unknown member","field":"zz","offset":13}`, ""}},
		{"trailing data", "POST", "/v1/score", items.SampleScoreBody + `x`, answer{400, "", `{"error":"invalid JSON: data after the object","offset":` + strconv.Itoa(len(items.SampleScoreBody)) + `}`, ""}},
		{"invalid", "POST", "/v1/score", `{"user_id":1,"item_id":1,"features":[1],"country":"de"}`, answer{422, "", `{"error":"country must be two capital letters"}`, ""}},
		{"score no such item", "POST", "/v1/score", strings.Replace(items.SampleScoreBody, `"item_id":42`, `"item_id":4200`, 1), answer{404, "", `{"error":"no such item"}`, ""}},
		{"at the limit", "POST", "/v1/score", limit, answer{422, "", `{"error":"item_id must be positive"}`, ""}},
		{"over the limit", "POST", "/v1/score", big, answer{413, "", `{"error":"request body too large"}`, ""}},
	} {
		got := do(t, tc.method, base+tc.path, tc.body)
		tc.want.ctype = "application/json"
		if got != tc.want {
			t.Errorf("%s: %s %s\n got %+v\nwant %+v", tc.name, tc.method, tc.path, got, tc.want)
		}
	}
}

// TestMetrics: the middleware counts each route's requests, status
// classes and bytes.
func TestMetrics(t *testing.T) {
	base := start(t, newAPI(items.Generate(10, 1)))
	var bytes2xx int
	for range 3 {
		bytes2xx += len(do(t, "GET", base+"/v1/items/1", "").body)
	}
	notFound := do(t, "GET", base+"/v1/items/11", "").body
	do(t, "POST", base+"/v1/score", `{`)
	do(t, "GET", base+"/v1/nothing", "")                   // the server's own 404: no route, not counted
	noBackend := do(t, "GET", base+"/v1/proxy/1", "").body // 503 by the handler, not deferred
	m := readMetrics(t, base)
	if len(m.Routes) != 3 || m.Version != 1 {
		t.Fatalf("metrics %+v", m)
	}
	items, score, proxy := m.Routes[0], m.Routes[1], m.Routes[2]
	if items.Route != "GET /v1/items/{id}" || items.Requests != 4 || items.OK != 3 || items.C4 != 1 || items.C5 != 0 ||
		items.Len != uint64(bytes2xx+len(notFound)) || items.Deferred != 0 {
		t.Errorf("items route: %+v (2xx bytes %d + 404 %d)", items, bytes2xx, len(notFound))
	}
	if score.Route != "POST /v1/score" || score.Requests != 1 || score.C4 != 1 {
		t.Errorf("score route: %+v", score)
	}
	if want := (routeMetrics{Route: "GET /v1/proxy/{id}", Requests: 1, C5: 1, Len: uint64(len(noBackend))}); proxy != want {
		t.Errorf("proxy route: %+v, want %+v", proxy, want)
	}
}

// routeMetrics is one route's object in GET /v1/metrics.
type routeMetrics struct {
	Route                     string
	Requests, OK, C4, C5, Len uint64
	Deferred, Dropped         uint64
	DeferredUS                uint64 `json:"deferred_us"`
}

// readMetrics GETs /v1/metrics; a member the test does not know fails it.
func readMetrics(t *testing.T, base string) (m struct {
	Version int64 `json:"catalog_version"`
	Routes  []routeMetrics
}) {
	t.Helper()
	got := do(t, "GET", base+"/v1/metrics", "").body
	dec := json.NewDecoder(strings.NewReader(strings.NewReplacer(`"2xx"`, `"OK"`, `"4xx"`, `"C4"`, `"5xx"`, `"C5"`, `"bytes"`, `"Len"`).Replace(got)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	return m
}

// TestReload: the catalogue is swapped while requests are served, and
// every answer comes from one whole version.
func TestReload(t *testing.T) {
	a := newAPI(items.Generate(50, 1))
	base := start(t, a)
	done := make(chan struct{})
	defer close(done)
	load := func(v int64) *items.Catalog {
		c := items.Generate(50, v%2+1) // two contents, alternating
		c.Version = v
		return c
	}
	go a.reload(time.Millisecond, load, done)
	one, two := string(items.Generate(50, 1).Get(7).AppendJSON(nil)), string(items.Generate(50, 2).Get(7).AppendJSON(nil))
	if one == two {
		t.Fatal("the two contents are the same")
	}
	seen := map[string]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for len(seen) < 2 && time.Now().Before(deadline) {
		got := do(t, "GET", base+"/v1/items/7", "")
		if got.code != 200 || (got.body != one && got.body != two) {
			t.Fatalf("during reloads: %+v", got)
		}
		seen[got.body] = true
	}
	if len(seen) < 2 {
		t.Error("never saw the second catalogue")
	}
	if v := a.catalog.Load().Version; v < 2 {
		t.Errorf("version %d after reloads", v)
	}
}

// TestNoAllocs: a GET with a parameter and a POST decoding the score
// request allocate nothing, counted over the whole process (server and
// client) while a kept-alive connection sends them.
func TestNoAllocs(t *testing.T) {
	base := start(t, newAPI(items.Generate(100, 1)))
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, tc := range []struct{ name, req string }{
		{"GET /v1/items/{id}", "GET /v1/items/42 HTTP/1.1\r\nHost: a\r\n\r\n"},
		{"POST /v1/score", "POST /v1/score HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: " +
			strconv.Itoa(len(items.SampleScoreBody)) + "\r\n\r\n" + items.SampleScoreBody},
	} {
		req := []byte(tc.req)
		// The answer's length, from a first exchange.
		if _, err := conn.Write(req); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4096)
		conn.SetReadDeadline(time.Now().Add(60 * time.Second))
		n, err := conn.Read(buf)
		if err != nil || !bytes.HasPrefix(buf[:n], []byte("HTTP/1.1 200 ")) {
			t.Fatalf("%s: %q %v", tc.name, buf[:n], err)
		}
		resp := buf[:n]
		// Not testing.AllocsPerRun: it sets GOMAXPROCS to 1, and the
		// worker's thread, blocked in epoll_wait, then holds the one P
		// until sysmon takes it back (27 ms a request).
		const runs = 2000
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			if _, err := conn.Write(req); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(conn, resp); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		// The process's other goroutines (the runtime's, the server's
		// once-a-second release of memory) may allocate a few times; one
		// allocation per request would be 2,000.
		allocs := float64(after.Mallocs-before.Mallocs) / runs
		if allocs >= 0.01 {
			t.Errorf("%s: %v allocations per request, want 0", tc.name, allocs)
		}
	}
}
