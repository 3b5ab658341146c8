package e2e

import (
	"context"
	"fmt"
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
	cmd := exec.Command(bin, "-addr", "127.0.0.1", "-port", strconv.Itoa(port), "-cpus", "0")
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
