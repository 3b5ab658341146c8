package server_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotpath-dev/hotpath/server"
)

// families are the listen and dial addresses the socket-level tests run
// over: each family on its own socket, and both into the dual-stack
// default (IPv4 arrives there v4-mapped).
var families = []struct{ name, listen, dial string }{
	{"v4", "127.0.0.1", "127.0.0.1"},
	{"v6", "::1", "::1"},
	{"dual-v4", "", "127.0.0.1"},
	{"dual-v6", "", "::1"},
}

// keepAlive is one client connection driven by raw system calls from a
// thread locked to a CPU, so that the client allocates nothing per
// request either: what the heap counters see is the server's.
type keepAlive struct {
	fd  int
	req []byte
	buf []byte
}

// dialKeepAlive connects to addr from the calling goroutine's thread,
// which the caller has locked.
func dialKeepAlive(addr string) (*keepAlive, error) {
	ap := mustAddrPort(addr)
	family, sa := unix.AF_INET6, unix.Sockaddr(&unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()})
	if ap.Addr().Is4() {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Connect(fd, sa); err != nil {
		unix.Close(fd)
		return nil, err
	}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5})
	return &keepAlive{fd: fd, req: []byte("GET /json HTTP/1.1\r\nHost: x\r\n\r\n"), buf: make([]byte, 4096)}, nil
}

// roundTrip sends one request and reads until the response's body (27
// bytes of JSON after the blank line) is in.
func (k *keepAlive) roundTrip() error {
	for {
		_, err := unix.Write(k.fd, k.req)
		if err == nil {
			break
		}
		if err != unix.EINTR { // the runtime's preemption signal
			return err
		}
	}
	got := 0
	for {
		n, err := unix.Read(k.fd, k.buf[got:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return unix.ECONNRESET
		}
		got += n
		if i := bytes.Index(k.buf[:got], []byte("\r\n\r\n")); i >= 0 && got >= i+4+len(`{"message":"Hello, World!"}`) {
			return nil
		}
	}
}

// TestNoAllocsOverSockets is the zero-allocation guarantee measured over
// real sockets, on each family: n keep-alive requests through accept,
// epoll, recv, the request path and send must not allocate per request.
// The tolerance (n/100) is for the once-a-second work of the server
// (the Date refresh) and of the runtime; one allocation per request
// would be n.
func TestNoAllocsOverSockets(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	const n = 5000
	for _, fam := range families {
		t.Run(fam.name, func(t *testing.T) {
			s, _ := start(t, func(c *server.Config) { c.Addr = fam.listen })
			addr := net.JoinHostPort(fam.dial, strconv.Itoa(s.Port()))
			errc := make(chan error, 1)
			var mallocs uint64
			go func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				k, err := dialKeepAlive(addr)
				if err != nil {
					errc <- err
					return
				}
				defer unix.Close(k.fd)
				// Warm up: the connection slot and its buffers are
				// allocated once, on the first request.
				for range 100 {
					if err := k.roundTrip(); err != nil {
						errc <- err
						return
					}
				}
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for range n {
					if err := k.roundTrip(); err != nil {
						errc <- err
						return
					}
				}
				runtime.ReadMemStats(&after)
				mallocs = after.Mallocs - before.Mallocs
				errc <- nil
			}()
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			t.Logf("%d requests over %s: %d allocations in the process", n, addr, mallocs)
			if mallocs > n/100 {
				t.Errorf("%d allocations for %d requests over %s, want at most %d", mallocs, n, addr, n/100)
			}
		})
	}
}

// BenchmarkFamilies measures one keep-alive round trip over loopback per
// family, and IPv4 into the dual-stack socket: the figure behind
// reuseport.DualStack (one v6 group with IPV6_V6ONLY off rather than one
// group per family). Run it with -cpu 1 so that client and worker share
// nothing but the loopback path.
func BenchmarkFamilies(b *testing.B) {
	for _, fam := range families {
		b.Run(fam.name, func(b *testing.B) {
			// Start raises GOMAXPROCS by one (reserveIdleP); put it back.
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
			cfg := server.DefaultConfig()
			cfg.Addr, cfg.Port, cfg.CPUs, cfg.Log = fam.listen, 0, []int{affinityB(b)[0]}, io.Discard
			s := server.New(cfg)
			s.Handle("GET", "/json", func(c *server.Ctx) { server.WriteJSON(c, hello{"Hello, World!"}) })
			if err := s.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				s.Shutdown(ctx)
			}()
			addr := net.JoinHostPort(fam.dial, strconv.Itoa(s.Port()))
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			k, err := dialKeepAlive(addr)
			if err != nil {
				b.Fatal(err)
			}
			defer unix.Close(k.fd)
			b.ReportAllocs()
			var r0, r1 unix.Rusage
			unix.Getrusage(unix.RUSAGE_SELF, &r0)
			for b.Loop() {
				if err := k.roundTrip(); err != nil {
					b.Fatal(err)
				}
			}
			unix.Getrusage(unix.RUSAGE_SELF, &r1)
			// CPU time of the process (client and worker) per round
			// trip: on a shared machine wall time is mostly waiting
			// for a core, CPU time is the cost of the path.
			cpu := r1.Utime.Nano() - r0.Utime.Nano() + r1.Stime.Nano() - r0.Stime.Nano()
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

func affinityB(b *testing.B) []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		b.Fatal(err)
	}
	var cpus []int
	for c := range 1024 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}
