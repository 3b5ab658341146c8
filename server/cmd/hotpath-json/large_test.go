package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/server"
)

// TestLarge: /large answers LargeSize bytes of its pattern, whole, to
// four pipelined requests on one connection over a real socket (the
// bench-vm and e2e loads that fill the transmit path rely on it).
func TestLarge(t *testing.T) {
	cfg, err := server.ConfigFromEnv(func(k string) string {
		return map[string]string{"HOTPATH_CPUS": "0", "HOTPATH_PORT": "0"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = "127.0.0.1"
	s := newServer(cfg)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	}()
	<-s.Ready()
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.Port()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	const n = 4
	if _, err := io.WriteString(c, strings.Repeat("GET /large HTTP/1.1\r\nHost: x\r\n\r\n", n)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	for i := 0; i < n; i++ {
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("response %d body: %v", i, err)
		}
		if resp.StatusCode != 200 || len(body) != LargeSize || string(body) != string(large) || body[27] != 'b' {
			t.Fatalf("response %d: %d, %d bytes", i, resp.StatusCode, len(body))
		}
	}
}
