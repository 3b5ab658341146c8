package reuseport

import (
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// run interprets the subset of classic BPF that CPUProgram emits, so the
// mapping can be checked for CPUs this machine does not have.
func run(t *testing.T, prog []unix.SockFilter, cpu uint32) uint32 {
	var a uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			if int32(in.K) != skfAdOff+skfAdCPU {
				t.Fatalf("load of %d, want SKF_AD_CPU", int32(in.K))
			}
			a = cpu
		case unix.BPF_ALU | unix.BPF_MOD | unix.BPF_K:
			a %= in.K
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			if a == in.K {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_RET | unix.BPF_A:
			return a
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		default:
			t.Fatalf("unexpected instruction %#x", in.Code)
		}
	}
	t.Fatal("program fell off the end")
	return 0
}

func TestCPUProgram(t *testing.T) {
	tests := []struct {
		cpus    []int
		wantLen int
		check   map[uint32]uint32 // receiving cpu -> socket index
	}{
		{[]int{0, 1}, 3, map[uint32]uint32{0: 0, 1: 1, 2: 0, 3: 1}},
		{[]int{0, 1, 2, 3}, 3, map[uint32]uint32{0: 0, 3: 3, 5: 1}},
		{[]int{4, 5, 6, 7}, 3, map[uint32]uint32{4: 0, 7: 3}},
		{[]int{1}, 3, map[uint32]uint32{0: 0, 1: 0, 9: 0}},
		{[]int{0, 2}, 7, map[uint32]uint32{0: 0, 2: 1, 1: 1, 3: 1}},
		{[]int{3, 5, 9}, 9, map[uint32]uint32{3: 0, 5: 1, 9: 2, 4: 1}},
	}
	for _, tt := range tests {
		prog := CPUProgram(tt.cpus)
		if len(prog) != tt.wantLen {
			t.Errorf("CPUProgram(%v) has %d instructions, want %d", tt.cpus, len(prog), tt.wantLen)
		}
		for cpu, want := range tt.check {
			if got := run(t, prog, cpu); got != want {
				t.Errorf("CPUProgram(%v) on cpu %d = %d, want %d", tt.cpus, cpu, got, want)
			}
		}
	}
}

// TestListen checks that the group is created, shares one port, and that
// the kernel accepts the steering program (it verifies classic BPF on
// attach).
func TestListen(t *testing.T) {
	fds, port, err := Listen([]int{0, 2, 5}, Options{Backlog: 16, NoDelay: true, BusyPoll: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if len(fds) != 3 || port == 0 {
		t.Fatalf("Listen = %v, port %d", fds, port)
	}
	for _, fd := range fds {
		sa, err := unix.Getsockname(fd)
		if err != nil {
			t.Fatal(err)
		}
		if p := sa.(*unix.SockaddrInet4).Port; p != port {
			t.Errorf("fd %d on port %d, want %d", fd, p, port)
		}
		if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT); err != nil || v != 1 {
			t.Errorf("SO_REUSEPORT = %d, %v", v, err)
		}
	}
	// Accepted sockets inherit the listener's options: the server relies
	// on it to avoid setsockopt calls per connection.
	c, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(c)
	if err := unix.Connect(c, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	var afd int
	for _, fd := range fds {
		if afd, _, err = unix.Accept(fd); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("accept on every listener: %v", err)
	}
	defer unix.Close(afd)
	for _, o := range []struct {
		name       string
		level, opt int
		want       int
	}{
		{"TCP_NODELAY", unix.IPPROTO_TCP, unix.TCP_NODELAY, 1},
		{"SO_BUSY_POLL", unix.SOL_SOCKET, unix.SO_BUSY_POLL, 50},
	} {
		if v, err := unix.GetsockoptInt(afd, o.level, o.opt); err != nil || v != o.want {
			t.Errorf("accepted socket %s = %d, %v; want %d", o.name, v, err, o.want)
		}
	}
	if _, _, err := Listen(nil, Options{}); err == nil {
		t.Error("Listen with no CPUs succeeded")
	}
}

// TestListenRefusesTakenPort checks that a second group on a port that
// already has one (another process of the same user, say) is refused
// instead of silently joining the first group, and that the port can be
// used again once the first group is closed.
func TestListenRefusesTakenPort(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	first, port, err := Listen([]int{0}, Options{Addr: lo})
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []netip.Addr{lo, {}} {
		fds, _, err := Listen([]int{0}, Options{Addr: addr, Port: port})
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			t.Errorf("second group on %v port %d: %v, want address already in use", addr, port, err)
		}
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	for _, fd := range first {
		unix.Close(fd)
	}
	again, _, err := Listen([]int{0}, Options{Addr: lo, Port: port})
	if err != nil {
		t.Fatalf("port %d after the first group closed: %v", port, err)
	}
	for _, fd := range again {
		unix.Close(fd)
	}
}
