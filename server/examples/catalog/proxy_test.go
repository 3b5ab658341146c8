package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotpath-dev/hotpath/server"
	"github.com/hotpath-dev/hotpath/server/examples/catalog/items"
)

// backend is an httptest server: /ok/{id} answers {"item":"id"}, /fail
// 500, /hang waits for its request's context (and reports it on ended),
// /held waits for release.
type backend struct {
	*httptest.Server
	started chan string   // each request's path, when it arrives
	ended   chan string   // a /hang or /held request whose context ended
	release chan struct{} // closed: the /held requests answer
	quit    chan struct{} // closed at the test's end: every request ends
}

func newBackend(t *testing.T) *backend {
	b := &backend{started: make(chan string, 100), ended: make(chan string, 100), release: make(chan struct{}), quit: make(chan struct{})}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.started <- r.URL.Path
		switch {
		case r.URL.Path == "/big", r.URL.Path == "/limit":
			w.Header().Set("Content-Type", "application/json")
			n := proxyBodyLimit // the limit: passed on
			if r.URL.Path == "/big" {
				n++ // past it: 502
			}
			io.WriteString(w, `"`+strings.Repeat("x", n-2)+`"`)
		case r.URL.Path == "/fail":
			http.Error(w, "down", http.StatusInternalServerError)
		case r.URL.Path == "/hang":
			select {
			case <-r.Context().Done():
				b.ended <- r.URL.Path
			case <-b.quit: // a call never cancelled must not hold Close
			}
		case r.URL.Path == "/held":
			select {
			case <-b.release:
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"held":true}`)
			case <-r.Context().Done():
				b.ended <- r.URL.Path
			case <-b.quit:
			}
		default:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"item":"`+strings.TrimPrefix(r.URL.Path, "/")+`"}`)
		}
	}))
	t.Cleanup(func() {
		close(b.quit)
		select {
		case <-b.release:
		default:
			close(b.release)
		}
		b.Close()
	})
	return b
}

// oneWorker runs the server on one worker (the first CPU of the
// process's affinity mask): every connection on the same worker, so a
// worker blocked by a backend call would show.
func oneWorker(t *testing.T) func(*server.Config) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	for cpu := range len(set) * 64 {
		if set.IsSet(cpu) {
			return func(cfg *server.Config) { cfg.CPUs = []int{cpu} }
		}
	}
	t.Fatal("no CPU in the affinity mask")
	return nil
}

// errJSON is the API's error body for msg.
func errJSON(msg string) string {
	return string(items.ErrorBody{Error: msg, Offset: -1}.AppendJSON(nil))
}

// TestProxy: the answers of /v1/proxy/{id}, over loopback sockets.
func TestProxy(t *testing.T) {
	b := newBackend(t)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // nothing listens there now
	for _, tc := range []struct {
		name, backend, id string
		want              answer
	}{
		{"answer", b.URL, "42", answer{code: 200, ctype: "application/json", body: `{"item":"42"}`}},
		{"escaped id", b.URL, "a%20b", answer{code: 200, ctype: "application/json", body: `{"item":"a b"}`}},
		{"answer at the size limit", b.URL, "limit", answer{code: 200, ctype: "application/json", body: `"` + strings.Repeat("x", proxyBodyLimit-2) + `"`}},
		{"answer past the size limit", b.URL, "big", answer{code: 502, ctype: "application/json", body: errJSON("backend answer too large")}},
		{"backend 500", b.URL, "fail", answer{code: 502, ctype: "application/json", body: errJSON("backend answered 500")}},
		{"backend down", dead.URL, "42", answer{code: 502, ctype: "application/json", body: errJSON("backend failed")}},
		{"no backend", "", "42", answer{code: 503, ctype: "application/json", body: errJSON("no backend configured")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAPI(items.Generate(10, 1))
			a.proxy = newProxy(tc.backend, 4, 2*time.Second)
			base := startWith(t, a, oneWorker(t))
			if got := do(t, "GET", base+"/v1/proxy/"+tc.id, ""); got != tc.want {
				t.Errorf("GET /v1/proxy/%s = %d %q %.200q, want %d %q %.200q", tc.id,
					got.code, got.ctype, got.body, tc.want.code, tc.want.ctype, tc.want.body)
			}
		})
	}
}

// TestProxyHung: a backend that never answers gets the route's JSON 504
// at its deadline, its call is cancelled, and the worker (one) answers
// other requests meanwhile.
func TestProxyHung(t *testing.T) {
	b := newBackend(t)
	const deadline = 300 * time.Millisecond
	a := newAPI(items.Generate(10, 1))
	a.proxy = newProxy(b.URL, 4, deadline)
	base := startWith(t, a, oneWorker(t))

	type result struct {
		got     answer
		elapsed time.Duration
	}
	res := make(chan result, 1)
	begin := time.Now()
	go func() {
		var got answer
		if resp, err := http.Get(base + "/v1/proxy/hang"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got = answer{code: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), body: string(body)}
		}
		res <- result{got, time.Since(begin)}
	}()
	if p := <-b.started; p != "/hang" {
		t.Fatalf("backend called for %s", p)
	}
	// While the call hangs: the other routes answer, each well before the
	// deadline (a worker blocked on the call would answer none of them).
	served := 0
	for time.Since(begin) < deadline-100*time.Millisecond {
		t0 := time.Now()
		if got := do(t, "GET", base+"/v1/items/7", ""); got.code != 200 {
			t.Fatalf("GET /v1/items/7 while the backend hangs: %+v", got)
		}
		if d := time.Since(t0); d > deadline/2 {
			t.Fatalf("GET /v1/items/7 took %v while the backend hangs", d)
		}
		served++
	}
	r := <-res
	want := answer{code: 504, ctype: "application/json", body: errJSON("deferred response not finished in time")}
	if r.got != want {
		t.Fatalf("hung backend: %+v, want %+v", r.got, want)
	}
	if r.elapsed < deadline || r.elapsed > deadline+time.Second {
		t.Errorf("504 after %v, want at the %v deadline", r.elapsed, deadline)
	}
	select {
	case <-b.ended:
	case <-time.After(2 * time.Second):
		t.Fatal("the backend call was not cancelled at the deadline")
	}
	t.Logf("504 after %v; %d other requests served meanwhile", r.elapsed, served)
}

// rawGet sends GET path on a new connection and returns it.
func rawGet(t *testing.T, base, path string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: catalog\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// readAnswer reads one response from conn within limit.
func readAnswer(t *testing.T, conn net.Conn, limit time.Duration) answer {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(limit))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer within %v: %v", limit, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{code: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), body: string(body)}
}

// TestProxyClientGone: a client that leaves cancels the backend call (the
// backend sees its request's context end) long before the deadline.
func TestProxyClientGone(t *testing.T) {
	b := newBackend(t)
	a := newAPI(items.Generate(10, 1))
	a.proxy = newProxy(b.URL, 4, 10*time.Second)
	base := startWith(t, a, oneWorker(t))
	conn := rawGet(t, base, "/v1/proxy/hang")
	<-b.started
	t0 := time.Now()
	conn.Close()
	select {
	case <-b.ended:
		t.Logf("backend call cancelled %v after the client closed", time.Since(t0))
	case <-time.After(2 * time.Second):
		t.Fatal("the client left, the backend call was not cancelled within 2 s")
	}
	// The call's slot is given back: a new call gets through.
	if got := do(t, "GET", base+"/v1/proxy/5", ""); got.code != 200 {
		t.Fatalf("after the cancelled call: %+v", got)
	}
}

// TestProxyFull: with -proxy-calls 2 in flight, a third call is answered
// 503 in JSON at once; the two held are then answered.
func TestProxyFull(t *testing.T) {
	b := newBackend(t)
	a := newAPI(items.Generate(10, 1))
	a.proxy = newProxy(b.URL, 2, 5*time.Second)
	base := startWith(t, a, oneWorker(t))
	held := []net.Conn{rawGet(t, base, "/v1/proxy/held"), rawGet(t, base, "/v1/proxy/held")}
	<-b.started
	<-b.started
	t0 := time.Now()
	got := readAnswer(t, rawGet(t, base, "/v1/proxy/7"), time.Second)
	if want := (answer{code: 503, ctype: "application/json", body: errJSON("too many backend calls")}); got != want {
		t.Fatalf("third call: %+v, want %+v", got, want)
	}
	t.Logf("503 in %v", time.Since(t0))
	select {
	case p := <-b.started:
		t.Fatalf("the refused call reached the backend (%s)", p)
	default:
	}
	close(b.release)
	for _, c := range held {
		if got := readAnswer(t, c, 2*time.Second); got.code != 200 || got.body != `{"held":true}` {
			t.Fatalf("held call: %+v", got)
		}
	}
}

// TestProxyServerRefuses: when the server refuses to defer (its
// MaxDeferredPerWorker reached) the client gets its JSON 503 and the
// route gives its call slot back.
func TestProxyServerRefuses(t *testing.T) {
	b := newBackend(t)
	a := newAPI(items.Generate(10, 1))
	a.proxy = newProxy(b.URL, 4, 5*time.Second)
	one := oneWorker(t)
	base := startWith(t, a, func(cfg *server.Config) { one(cfg); cfg.MaxDeferredPerWorker = 1 })
	held := rawGet(t, base, "/v1/proxy/held")
	<-b.started
	got := readAnswer(t, rawGet(t, base, "/v1/proxy/7"), time.Second)
	if want := (answer{code: 503, ctype: "application/json", body: errJSON("server busy: too many deferred requests")}); got != want {
		t.Fatalf("second call, the worker's one deferred held: %+v, want %+v", got, want)
	}
	close(b.release)
	if got := readAnswer(t, held, 2*time.Second); got.code != 200 {
		t.Fatalf("held call: %+v", got)
	}
	for deadline := time.Now().Add(2 * time.Second); len(a.proxy.calls) != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d call slots still taken with no call in flight", len(a.proxy.calls))
		}
	}
}

// TestProxyMetrics: the metrics middleware counts /v1/proxy's deferred
// requests when they end, with the status their response had (200, the
// 502 of a failed call, the server's 504 at the deadline), their bytes
// and how long they were held; a request whose client left is counted as
// dropped, with no status.
func TestProxyMetrics(t *testing.T) {
	b := newBackend(t)
	const deadline = 300 * time.Millisecond
	a := newAPI(items.Generate(10, 1))
	a.proxy = newProxy(b.URL, 4, deadline)
	base := startWith(t, a, oneWorker(t))
	ok := do(t, "GET", base+"/v1/proxy/42", "")
	failed := do(t, "GET", base+"/v1/proxy/fail", "")
	hung := do(t, "GET", base+"/v1/proxy/hang", "")
	if ok.code != 200 || failed.code != 502 || hung.code != 504 {
		t.Fatalf("answers %d %d %d, want 200 502 504", ok.code, failed.code, hung.code)
	}
	<-b.ended // the 504's call
	for range 3 {
		<-b.started
	}
	gone := rawGet(t, base, "/v1/proxy/hang")
	<-b.started
	gone.Close()
	<-b.ended
	want := routeMetrics{Route: "GET /v1/proxy/{id}", Requests: 4, OK: 1, C5: 2,
		Len: uint64(len(ok.body) + len(failed.body) + len(hung.body)), Deferred: 4, Dropped: 1}
	var got routeMetrics
	for end := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
		got = readMetrics(t, base).Routes[2]
		if got.Deferred == 4 || time.Now().After(end) {
			break
		}
	}
	us := got.DeferredUS
	got.DeferredUS = 0
	if got != want {
		t.Fatalf("proxy route: %+v, want %+v", got, want)
	}
	// The 504 alone was held for its deadline; the four for less than
	// this test took.
	if us < uint64(deadline/time.Microsecond) || us > 10_000_000 {
		t.Errorf("deferred_us %d, want the %v deadline and less than 10 s", us, deadline)
	}
	t.Logf("%+v, deferred_us %d", got, us)
}

// TestCheckBackend: -backend must be an http(s) URL with a host.
func TestCheckBackend(t *testing.T) {
	for _, tc := range []struct {
		backend string
		ok      bool
	}{
		{"", true},
		{"http://10.77.0.1:9000", true},
		{"https://backend.example/api", true},
		{"10.77.0.1:9000", false},
		{"ftp://backend", false},
		{"http://", false},
		{"http://a b", false},
	} {
		if err := checkBackend(tc.backend); (err == nil) != tc.ok {
			t.Errorf("checkBackend(%q) = %v, want ok %v", tc.backend, err, tc.ok)
		}
	}
}
