package imds

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestChoose: the first endpoint that grants a token is kept; when the
// IPv6 one is the last and does not answer, the error says so plainly.
func TestChoose(t *testing.T) {
	var puts int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		puts++
		w.Write([]byte("token"))
	}))
	defer srv.Close()
	// A closed port on each loopback: connection refused at once.
	closed := func(network, host string) string {
		l, err := net.Listen(network, net.JoinHostPort(host, "0"))
		if err != nil {
			t.Skipf("no %s loopback: %v", network, err)
		}
		addr := l.Addr().String()
		l.Close()
		return "http://" + addr
	}
	dead4, dead6 := closed("tcp4", "127.0.0.1"), closed("tcp6", "::1")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	c := &Client{Attempts: 1}
	got, err := c.Choose(ctx, []string{dead4, srv.URL})
	if err != nil || got != srv.URL || c.Base != srv.URL || puts != 1 {
		t.Errorf("Choose(dead, live) = %q, %v; Base %q, %d token requests", got, err, c.Base, puts)
	}
	c = &Client{Attempts: 1}
	if _, err := c.Choose(ctx, []string{dead4, dead6}); !errors.Is(err, ErrIPv6Disabled) {
		t.Errorf("no endpoint, IPv6 last: %v, want ErrIPv6Disabled", err)
	}
	c = &Client{Attempts: 1}
	if _, err := c.Choose(ctx, []string{dead4}); err == nil || errors.Is(err, ErrIPv6Disabled) {
		t.Errorf("IPv4 only, dead: %v, want an error that does not blame IPv6", err)
	}
	if _, err := (&Client{}).Choose(ctx, nil); err == nil {
		t.Error("no bases: no error")
	}
	if b := Bases(true, true); len(b) != 2 || b[0] != DefaultBase || b[1] != Base6 {
		t.Errorf("Bases(v4, v6) = %v, want IPv4 first", b)
	}
	if b := Bases(false, true); len(b) != 1 || b[0] != Base6 {
		t.Errorf("Bases(v6 only) = %v", b)
	}
}
