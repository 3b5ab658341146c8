package server_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotpath-dev/hotpath/server"
	"github.com/hotpath-dev/hotpath/server/jsonenc"
)

type loopbackMessage struct{ Message string }

func (m loopbackMessage) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"message":`...)
	dst = jsonenc.AppendString(dst, m.Message)
	return append(dst, '}')
}

// BenchmarkLoopback is the whole worker over real loopback sockets: its
// epoll loop, recv, parse, route, handler and send, 16 connections with
// one request (depth1) or 16 pipelined requests (depth16) outstanding on
// each, as tests/peers/fixedload loads a server. The client runs in the
// same process. make pgo takes the default workload's profile from it and
// from the request path's benchmarks.
func BenchmarkLoopback(b *testing.B) {
	for _, depth := range []int{1, 16} {
		b.Run(fmt.Sprintf("depth%d", depth), func(b *testing.B) {
			var set unix.CPUSet
			if err := unix.SchedGetaffinity(0, &set); err != nil {
				b.Fatal(err)
			}
			cpu := 0
			for !set.IsSet(cpu) {
				cpu++
			}
			cfg := server.DefaultConfig()
			cfg.Addr, cfg.Port, cfg.CPUs, cfg.Log = "127.0.0.1", 0, []int{cpu}, io.Discard
			s := server.New(cfg)
			s.Handle("GET", "/json", func(c *server.Ctx) { server.WriteJSON(c, loopbackMessage{"Hello, World!"}) })
			s.Handle("GET", "/plaintext", func(c *server.Ctx) { c.Text("Hello, World!") })
			if err := s.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				s.Shutdown(ctx)
			}()
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port()))
			req := []byte(strings.Repeat("GET /json HTTP/1.1\r\nHost: "+addr+"\r\n\r\n", depth))
			conns := make([]net.Conn, 16)
			for i := range conns {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				conns[i] = c
			}
			// One response's length (the Date header's is fixed).
			one := make([]byte, 4096)
			conns[0].Write(req[:len(req)/depth])
			n, err := conns[0].Read(one)
			if err != nil || !strings.HasPrefix(string(one[:n]), "HTTP/1.1 200") {
				b.Fatalf("first response: %q, %v", one[:n], err)
			}
			buf := make([]byte, n*depth)
			b.ResetTimer()
			for i := 0; i < b.N; i += len(conns) * depth {
				for _, c := range conns {
					if _, err := c.Write(req); err != nil {
						b.Fatal(err)
					}
				}
				for _, c := range conns {
					if _, err := io.ReadFull(c, buf); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
