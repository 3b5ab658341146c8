package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotpath-dev/hotpath/server/reuseport"
)

// TestCloseIdempotent makes EPOLL_CTL_MOD fail in flush (the connection's
// socket is not in the epoll set the worker uses at that moment) with a
// request waiting in the buffer. The failure closes the connection; flush
// must then stop, not serve the request on the closed connection and close
// it again (which freed its slot twice, so that two later connections
// shared one slot).
func TestCloseIdempotent(t *testing.T) {
	s := New(Config{Log: io.Discard})
	s.Handle("GET", "/json", func(c *Ctx) { c.Text("x") })
	fds, _, err := reuseport.Listen([]int{0}, reuseport.Options{Addr: netip.MustParseAddr("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	w, err := newWorker(s, 0, 0, fds[0])
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		w.closeFDs()
		unix.Close(w.evfd)
	}()
	w.tick()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pair[1])
	c := w.addConn(pair[0], true)
	if c == nil {
		t.Fatal("addConn failed")
	}
	c.pending = w.bud.setPending(c.pending, []byte("pending"))
	c.state = stateWriting
	c.in = append(c.in, "GET /json HTTP/1.1\r\nHost: x\r\n\r\n"...)

	other, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(other)
	w.epfd, other = other, w.epfd
	w.flush(c)
	w.epfd, other = other, w.epfd

	if w.nconns != 0 || len(w.free) != 1 || c.fd != -1 {
		t.Fatalf("after the failed flush: %d connections, free slots %v, fd %d; want 0, one slot, -1", w.nconns, w.free, c.fd)
	}
	if n := w.requests.Load(); n != 0 {
		t.Errorf("%d requests served on the closed connection", n)
	}
	w.closeConn(c)
	if w.nconns != 0 || len(w.free) != 1 {
		t.Errorf("after a second close: %d connections, free slots %v", w.nconns, w.free)
	}
	if w.bud.held != int64(s.cfg.ReadBufferSize) || w.bud.extra != 0 {
		t.Errorf("accounting after close: held %d extra %d, want the one spare input buffer", w.bud.held, w.bud.extra)
	}
}

// TestTimeoutsIgnoreWallClock steps the wall clock the worker sees by
// three hours forward and then back. The Date header must follow it;
// timeouts (2 s idle here) must not: a keep-alive connection stays open
// and keeps being served.
func TestTimeoutsIgnoreWallClock(t *testing.T) {
	var step atomic.Int64
	s := startSteppedClock(t, &step, func(cfg *Config) {
		cfg.IdleTimeout, cfg.HeaderTimeout = 2*time.Second, 2*time.Second
	}, func(s *Server) {
		s.Handle("GET", "/json", func(c *Ctx) { c.Text("x") })
	})
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.Port()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	for _, d := range []time.Duration{0, 3 * time.Hour, -3 * time.Hour} {
		step.Store(int64(d))
		time.Sleep(1200 * time.Millisecond) // a timeout scan runs
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write([]byte("GET /json HTTP/1.1\r\nHost: x\r\n\r\n"))
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("wall clock stepped by %v: %v (connection timed out?)", d, err)
		}
		io.Copy(io.Discard, resp.Body)
		date, err := http.ParseTime(resp.Header.Get("Date"))
		if err != nil {
			t.Fatal(err)
		}
		if off := date.Sub(time.Now().Add(d)); off < -3*time.Second || off > 3*time.Second {
			t.Errorf("wall clock stepped by %v: Date %v is %v off it", d, date, off)
		}
	}
}

// startSteppedClock starts a one-worker server on loopback whose Date
// header follows the wall clock moved by step, with mod applied to its
// configuration and handle registering its handlers; it is shut down when
// the test ends.
func startSteppedClock(t *testing.T, step *atomic.Int64, mod func(*Config), handle func(*Server)) *Server {
	t.Helper()
	cfg := DefaultConfig()
	cpus, err := affinityCPUs()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr, cfg.Port, cfg.CPUs, cfg.Log = "127.0.0.1", 0, cpus[:1], io.Discard
	if mod != nil {
		mod(&cfg)
	}
	s := New(cfg)
	s.wallClock = func() time.Time { return time.Now().Add(time.Duration(step.Load())) }
	handle(s)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return s
}

// TestDrainAcceptBounded: the drain accepts what waits in the listen
// queue, but at most Config.Backlog connections (what the queue could hold
// when it began), so that clients connecting faster than it accepts cannot
// keep it going, and none once the stop is forced.
func TestDrainAcceptBounded(t *testing.T) {
	for _, tc := range []struct {
		queued, backlog int
		forced          bool
		want            int
	}{
		{queued: 10, backlog: 64, want: 10},
		{queued: 200, backlog: 64, want: 64},
		{queued: 200, backlog: 128, want: 128},
		{queued: 200, backlog: 64, forced: true, want: 0},
	} {
		s := New(Config{Log: io.Discard, Backlog: tc.backlog})
		// The kernel's queue is larger than the configured backlog: the
		// drain's bound is what must stop it.
		fds, port, err := reuseport.Listen([]int{0}, reuseport.Options{Addr: netip.MustParseAddr("127.0.0.1"), Backlog: 4096})
		if err != nil {
			t.Fatal(err)
		}
		w, err := newWorker(s, 0, 0, fds[0])
		if err != nil {
			t.Fatal(err)
		}
		w.tick()
		var clients []net.Conn
		for range tc.queued {
			c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
			if err != nil {
				t.Fatal(err)
			}
			clients = append(clients, c)
		}
		s.forced.Store(tc.forced)
		w.startDrain()
		if w.nconns != tc.want || w.lfd != -1 {
			t.Errorf("%d queued, backlog %d, forced %v: drain accepted %d (listener %d), want %d and the listener closed",
				tc.queued, tc.backlog, tc.forced, w.nconns, w.lfd, tc.want)
		}
		for _, c := range w.conns {
			if c != nil {
				w.closeConn(c)
			}
		}
		w.closeFDs()
		unix.Close(w.evfd)
		for _, c := range clients {
			c.Close()
		}
	}
}
