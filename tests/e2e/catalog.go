package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hotpath-dev/hotpath/server/examples/catalog/items"
)

// catalogPkg is the example API (README's "Your own workload" starts
// from it): TestSecureBoot ships it as its other workload and checks it
// with CheckCatalog.
const catalogPkg = "./server/examples/catalog"

// catalogItems is the catalogue the workload serves by default.
const catalogItems = 10000

// CheckCatalog checks the example API at base (http://addr:port) from
// outside: a route with a parameter answering an item from the dataset,
// the score of a JSON body, 400 with a JSON body (error and offset) on
// bad JSON, 404 in JSON through the server's ErrorHandler, 413 in JSON on
// /v1/score, whose limit (4 KiB) is below the server's. It returns every
// difference found.
func CheckCatalog(ctx context.Context, client *http.Client, base string) []error {
	cat := items.Generate(catalogItems, 1)
	var sample items.ScoreRequest
	if err := json.Unmarshal([]byte(items.SampleScoreBody), &sample); err != nil {
		return []error{err}
	}
	var errs []error
	for _, c := range []struct {
		what, method, path, body string
		code                     int
		want                     string // the whole body, or "" to check errorKeys only
		errorKeys                []string
	}{
		{"a route with a parameter", "GET", "/v1/items/42", "", 200, string(cat.Get(42).AppendJSON(nil)), nil},
		{"another id", "GET", "/v1/items/9999", "", 200, string(cat.Get(9999).AppendJSON(nil)), nil},
		{"a JSON body scored", "POST", "/v1/score", items.SampleScoreBody, 200, string(items.Score(&sample, cat.Get(42)).AppendJSON(nil)), nil},
		{"bad JSON", "POST", "/v1/score", `{"user_id":12,"age":"x"}`, 400, "", []string{"error", "field", "offset"}},
		{"no such item", "GET", "/v1/items/10001", "", 404, `{"error":"no such item"}`, nil},
		{"the server's own 404", "GET", "/v1/nothing/here", "", 404, `{"error":"not found"}`, nil},
		{"the route's lower body limit", "POST", "/v1/score", `{"user_id":1` + strings.Repeat(" ", 5000) + `}`, 413, `{"error":"request body too large"}`, nil},
	} {
		if err := checkJSONAnswer(ctx, client, base, c.method, c.path, c.body, c.code, c.want, c.errorKeys); err != nil {
			errs = append(errs, fmt.Errorf("catalog: %s: %w", c.what, err))
		}
	}
	return errs
}

func checkJSONAnswer(ctx context.Context, client *http.Client, base, method, path, body string, code int, want string, keys []string) error {
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != code {
		return fmt.Errorf("%s %s: status %d, want %d (body %.200q)", method, path, resp.StatusCode, code, got)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		return fmt.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	if want != "" && string(got) != want {
		return fmt.Errorf("%s %s: body %.300q, want %.300q", method, path, got, want)
	}
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil {
		return fmt.Errorf("%s %s: body %.200q is not a JSON object: %v", method, path, got, err)
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return fmt.Errorf("%s %s: body %.200q has no %q", method, path, got, k)
		}
	}
	return nil
}

// The example API's /v1/proxy/{id} in the boot check: its backend runs in
// the test (inside the guest's network namespace, at vm.HostAddr), and the
// image's init configuration gives the workload its address
// (workload.env) and the route's deadline (workload.args).
const (
	catalogBackendPort  = 9000
	catalogProxyTimeout = time.Second
)

// catalogInitConfig is the init configuration of an image whose catalog
// workload calls a backend at host.
func catalogInitConfig(host string) []byte {
	return fmt.Appendf(nil, "workload.env=CATALOG_BACKEND=http://%s\nworkload.args=-proxy-timeout=%s\n",
		net.JoinHostPort(host, strconv.Itoa(catalogBackendPort)), catalogProxyTimeout)
}

// CatalogBackend is the backend CheckCatalogProxy expects behind the
// catalog: GET /{id} answers {"backend":"id"}; GET /hang never answers and
// sends its path on Cancelled when its request's context ends (the
// catalog cancelled the call).
type CatalogBackend struct {
	Cancelled chan string
	quit      chan struct{}
	once      sync.Once
}

// NewCatalogBackend returns a backend; Close ends its hung requests.
func NewCatalogBackend() *CatalogBackend {
	return &CatalogBackend{Cancelled: make(chan string, 16), quit: make(chan struct{})}
}

func (b *CatalogBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/hang" {
		select {
		case <-r.Context().Done():
			select {
			case b.Cancelled <- r.URL.Path:
			default:
			}
		case <-b.quit:
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"backend":%q}`, strings.TrimPrefix(r.URL.Path, "/"))
}

// Close ends the requests still hanging (http.Server.Shutdown would wait
// for them).
func (b *CatalogBackend) Close() { b.once.Do(func() { close(b.quit) }) }

// CheckCatalogProxy checks the catalog's /v1/proxy/{id} at base, whose
// backend is b and whose route deadline is deadline: an id answered with
// the backend's body; a call the backend never answers gets the JSON 504
// at the deadline (not before, and within slack after), and the backend
// sees that call cancelled. It returns every difference found.
func CheckCatalogProxy(ctx context.Context, client *http.Client, base string, b *CatalogBackend, deadline, slack time.Duration) []error {
	var errs []error
	if err := checkJSONAnswer(ctx, client, base, "GET", "/v1/proxy/42", "", 200, `{"backend":"42"}`, nil); err != nil {
		errs = append(errs, fmt.Errorf("catalog proxy: the backend's answer: %w", err))
	}
	t0 := time.Now()
	err := checkJSONAnswer(ctx, client, base, "GET", "/v1/proxy/hang", "", 504, `{"error":"deferred response not finished in time"}`, nil)
	took := time.Since(t0)
	if err != nil {
		return append(errs, fmt.Errorf("catalog proxy: a hung backend: %w", err))
	}
	if took < deadline || took > deadline+slack {
		errs = append(errs, fmt.Errorf("catalog proxy: a hung backend: 504 after %v, want at the %v deadline (+%v)", took.Round(time.Millisecond), deadline, slack))
	}
	select {
	case <-b.Cancelled:
	case <-time.After(slack):
		errs = append(errs, fmt.Errorf("catalog proxy: a hung backend: its call not cancelled %v after the 504", slack))
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("catalog proxy: a hung backend: %w", ctx.Err()))
	}
	return errs
}
