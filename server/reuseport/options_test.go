package reuseport

import (
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestListenOptions reads every socket option back from the kernel: a
// value the options ask for is set, and a zero keeps the kernel's own
// default (the default read from a fresh socket in the same test, so
// the test holds whatever the machine's sysctls are). A zero passed on
// to the kernel would not be the default: SO_RCVBUF=0 clamps the buffer
// to its minimum and listen(fd, 0) allows one pending connection.
func TestListenOptions(t *testing.T) {
	fresh, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fresh)
	defRcv, _ := unix.GetsockoptInt(fresh, unix.SOL_SOCKET, unix.SO_RCVBUF)
	defSnd, _ := unix.GetsockoptInt(fresh, unix.SOL_SOCKET, unix.SO_SNDBUF)
	// A new socket's SO_BUSY_POLL is net.core.busy_read; BusyPoll 0 must
	// leave it (on a machine where busy_read is 0, setting 0 would look
	// the same: the init raises busy_read at boot, a unit test does not).
	defBusy, _ := unix.GetsockoptInt(fresh, unix.SOL_SOCKET, unix.SO_BUSY_POLL)
	somaxconn := unix.SOMAXCONN
	if b, err := os.ReadFile("/proc/sys/net/core/somaxconn"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n < somaxconn {
			somaxconn = n
		}
	}
	lo := netip.MustParseAddr("127.0.0.1")
	tests := []struct {
		name                  string
		o                     Options
		rcv, snd, backlog, nd int
	}{
		// The kernel doubles SO_RCVBUF/SO_SNDBUF for its bookkeeping
		// (socket(7)).
		{"defaults", Options{Addr: lo}, defRcv, defSnd, somaxconn, 0},
		{"set", Options{Addr: lo, RecvBuf: 65536, SendBuf: 32768, Backlog: 100, NoDelay: true}, 131072, 65536, 100, 1},
		{"backlog 1", Options{Addr: lo, Backlog: 1}, defRcv, defSnd, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fds, _, err := Listen([]int{0}, tt.o)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fds[0])
			fd := fds[0]
			for _, c := range []struct {
				name      string
				level, so int
				want      int
			}{
				{"SO_RCVBUF", unix.SOL_SOCKET, unix.SO_RCVBUF, tt.rcv},
				{"SO_SNDBUF", unix.SOL_SOCKET, unix.SO_SNDBUF, tt.snd},
				{"TCP_NODELAY", unix.IPPROTO_TCP, unix.TCP_NODELAY, tt.nd},
				{"SO_REUSEPORT", unix.SOL_SOCKET, unix.SO_REUSEPORT, 1},
				{"SO_BUSY_POLL", unix.SOL_SOCKET, unix.SO_BUSY_POLL, defBusy},
			} {
				got, err := unix.GetsockoptInt(fd, c.level, c.so)
				if err != nil {
					t.Fatalf("getsockopt %s: %v", c.name, err)
				}
				if got != c.want {
					t.Errorf("%s = %d, want %d", c.name, got, c.want)
				}
			}
			// For a listener, tcp_get_info reports the accept queue's
			// limit (sk_max_ack_backlog) in tcpi_sacked.
			info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
			if err != nil {
				t.Fatal(err)
			}
			if int(info.Sacked) != tt.backlog {
				t.Errorf("listen backlog = %d, want %d", info.Sacked, tt.backlog)
			}
		})
	}
}

// TestListenRefusesTakenPortSaysWhy: a port held by a listener outside
// any reuseport group is refused with the reason, not the bare errno of
// the probe's bind.
func TestListenRefusesTakenPortSaysWhy(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 1); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := sa.(*unix.SockaddrInet4).Port
	fds, _, err := Listen([]int{0}, Options{Addr: netip.MustParseAddr("127.0.0.1"), Port: port})
	for _, f := range fds {
		unix.Close(f)
	}
	if err == nil || !strings.Contains(err.Error(), "another process listens on the port") {
		t.Errorf("Listen on a taken port: %v, want the reason (another process listens on the port)", err)
	}
}
