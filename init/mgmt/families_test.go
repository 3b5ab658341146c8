package mgmt

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestBothFamilies: with mgmt.addr empty the init listens on
// net.JoinHostPort("", port) (observe.go), which is [::] with IPv4 mapped:
// a dual-stack load balancer's health check reaches /healthz over either
// family.
func TestBothFamilies(t *testing.T) {
	ln, err := net.Listen("tcp", net.JoinHostPort("", "0"))
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, Handler(Options{}), DefaultLimits, t.Logf) }()
	defer func() { cancel(); <-done }()
	c := &http.Client{Timeout: 5 * time.Second}
	for _, host := range []string{"127.0.0.1", "::1"} {
		resp, err := c.Get("http://" + net.JoinHostPort(host, port) + "/healthz")
		if err != nil {
			t.Errorf("/healthz over %s: %v", host, err)
			continue
		}
		resp.Body.Close()
		// No workload in Options: 503, but answered.
		if resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusOK {
			t.Errorf("/healthz over %s: %s", host, resp.Status)
		}
	}
}
