package txload

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/server"
)

// TestTxLoad drives the load against a real hotpath server on loopback
// with the /large body: every answer is read and counted, a wrong length
// is an error.
func TestLoad(t *testing.T) {
	body := strings.Repeat("x", 32<<10)
	cfg, err := server.ConfigFromEnv(func(k string) string { return map[string]string{"HOTPATH_CPUS": "0", "HOTPATH_PORT": "0"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = "127.0.0.1"
	s := server.New(cfg)
	s.Handle("GET", "/large", func(c *server.Ctx) { c.WriteString(body) })
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	<-s.Ready()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port()))
	dial := func(ctx context.Context) (net.Conn, error) { return (&net.Dialer{}).DialContext(ctx, "tcp", addr) }
	l := Load{Conns: 4, Depth: 3, Path: "/large", BodyLen: 32 << 10, Duration: 300 * time.Millisecond}
	r := l.Run(context.Background(), dial)
	// A connection's last batch may be cut by the end: its answers count,
	// its latency does not.
	if len(r.Errors) != 0 || r.Answers < l.Conns*l.Depth || r.Answers < l.Depth*len(r.Batches) || r.Answers >= l.Depth*(len(r.Batches)+l.Conns) {
		t.Fatalf("%d answers in %d batches, errors %v", r.Answers, len(r.Batches), r.Errors)
	}
	if p := r.Percentile(99); p <= 0 || p < r.Percentile(50) || p > l.Duration {
		t.Fatalf("p99 %v, median %v", p, r.Percentile(50))
	}
	l.BodyLen = 100
	if r := l.Run(context.Background(), dial); len(r.Errors) != l.Conns {
		t.Fatalf("wrong length: %d errors, want one per connection", len(r.Errors))
	}
}

func TestPercentile(t *testing.T) {
	var r Result
	for i := 1; i <= 200; i++ {
		r.Batches = append(r.Batches, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]time.Duration{50: 100 * time.Millisecond, 99: 198 * time.Millisecond, 100: 200 * time.Millisecond} {
		if got := r.Percentile(p); got != want {
			t.Errorf("p%v = %v, want %v", p, got, want)
		}
	}
	if (Result{}).Percentile(99) != 0 {
		t.Error("percentile without batches")
	}
}
