package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

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
