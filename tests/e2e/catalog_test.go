package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCheckCatalog runs CheckCatalog on loopback, without a VM: it passes
// against the example API built from this tree, and fails, naming each
// check, against a server that answers in text or without the route
// limit.
func TestCheckCatalog(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "catalog")
	build := exec.Command("go", "build", "-o", bin, "github.com/hotpath-dev/hotpath/server/examples/catalog")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	backend := NewCatalogBackend()
	bsrv := httptest.NewServer(backend)
	t.Cleanup(bsrv.Close)
	t.Cleanup(backend.Close) // first: the hung requests end, then Close returns
	cmd := exec.Command(bin, "-addr", "127.0.0.1", "-port", strconv.Itoa(port), "-cpus", "0",
		"-backend", bsrv.URL, "-proxy-timeout", catalogProxyTimeout.String())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		c, err := net.Dial("tcp", base[len("http://"):])
		if err == nil {
			c.Close()
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the catalog did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for _, err := range CheckCatalog(ctx, client, base) {
		t.Error(err)
	}
	for _, err := range CheckCatalogProxy(ctx, client, base, backend, catalogProxyTimeout, time.Second) {
		t.Error(err)
	}

	// A server in text/plain, without the limit: every check but none
	// should fail, each with its own error.
	text := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not found", 404)
	}))
	defer text.Close()
	errs := CheckCatalog(ctx, client, text.URL)
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{"a route with a parameter: GET /v1/items/42: status 404", "bad JSON: POST /v1/score: status 404",
		`the server's own 404: GET /v1/nothing/here: Content-Type "text/plain; charset=utf-8"`, "the route's lower body limit: POST /v1/score: status 404"} {
		if !strings.Contains(all, want) {
			t.Errorf("against a text server, no error %q in:\n%s", want, all)
		}
	}
}

// TestCheckCatalogProxy: CheckCatalogProxy fails, naming each check,
// against a server that answers /v1/proxy without calling the backend: a
// wrong body, a 504 at once (no deadline), a call never cancelled; and
// against one in text/plain. (It passes against the real workload in
// TestCheckCatalog.)
func TestCheckCatalogProxy(t *testing.T) {
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/proxy/42":
			io.WriteString(w, `{"backend":"43"}`)
		case "/v1/proxy/hang":
			w.WriteHeader(504)
			io.WriteString(w, `{"error":"deferred response not finished in time"}`)
		}
	}))
	defer fake.Close()
	text := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "gateway timeout", 504)
	}))
	defer text.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := &http.Client{Timeout: 10 * time.Second}
	for _, tc := range []struct {
		base string
		want []string
	}{
		{fake.URL, []string{`the backend's answer: GET /v1/proxy/42: body "{\"backend\":\"43\"}"`,
			"a hung backend: 504 after", "a hung backend: its call not cancelled"}},
		{text.URL, []string{"the backend's answer: GET /v1/proxy/42: status 504",
			`a hung backend: GET /v1/proxy/hang: Content-Type "text/plain; charset=utf-8"`}},
	} {
		var msgs []string
		for _, e := range CheckCatalogProxy(ctx, client, tc.base, NewCatalogBackend(), 300*time.Millisecond, 300*time.Millisecond) {
			msgs = append(msgs, e.Error())
		}
		all := strings.Join(msgs, "\n")
		for _, want := range tc.want {
			if !strings.Contains(all, want) {
				t.Errorf("no error %q in:\n%s", want, all)
			}
		}
	}
}
