package reuseport

import (
	"net/netip"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel's numbers, written out here rather than taken from the code
// under test, so that a wrong constant there cannot agree with itself.
// From the Linux UAPI headers (include/uapi/linux/filter.h and
// bpf_common.h):
//
//	#define SKF_AD_OFF (-0x1000)
//	#define SKF_AD_CPU 36           (SKF_AD_RXHASH is 32, SKF_AD_QUEUE 24)
//	#define BPF_LD 0x00, BPF_W 0x00, BPF_ABS 0x20
//	#define BPF_ALU 0x04, BPF_MOD 0x90, BPF_K 0x00
//	#define BPF_JMP 0x05, BPF_JEQ 0x10
//	#define BPF_RET 0x06, BPF_A 0x10
const (
	kernelSkfAdOff = -0x1000
	kernelSkfAdCPU = 36
	// loadCPU is the K of "ld [SKF_AD_OFF+SKF_AD_CPU]": -4096+36 as
	// the two's complement the kernel reads from the u32 field.
	loadCPU = 0xfffff024

	opLdAbsW = 0x20 // BPF_LD | BPF_W | BPF_ABS
	opModK   = 0x94 // BPF_ALU | BPF_MOD | BPF_K
	opJeqK   = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	opRetA   = 0x16 // BPF_RET | BPF_A
	opRetK   = 0x06 // BPF_RET | BPF_K
)

// TestCPUProgramInstructions compares CPUProgram's output, instruction by
// instruction, with programs written out from the kernel's constants
// above: the first instruction must load the CPU, not the packet hash or
// the queue.
func TestCPUProgramInstructions(t *testing.T) {
	if off := int32(kernelSkfAdOff + kernelSkfAdCPU); uint32(off) != loadCPU {
		t.Fatalf("SKF_AD_OFF+SKF_AD_CPU = %#x, want %#x", uint32(off), loadCPU)
	}
	type ins = unix.SockFilter
	ld := ins{Code: opLdAbsW, K: loadCPU}
	tests := []struct {
		cpus []int
		want []ins
	}{
		{[]int{0, 1}, []ins{ld, {Code: opModK, K: 2}, {Code: opRetA}}},
		{[]int{4, 5, 6, 7}, []ins{ld, {Code: opModK, K: 4}, {Code: opRetA}}},
		{[]int{3, 5, 9}, []ins{
			ld,
			{Code: opJeqK, Jf: 1, K: 3}, {Code: opRetK, K: 0},
			{Code: opJeqK, Jf: 1, K: 5}, {Code: opRetK, K: 1},
			{Code: opJeqK, Jf: 1, K: 9}, {Code: opRetK, K: 2},
			{Code: opModK, K: 3}, {Code: opRetA},
		}},
	}
	for _, tt := range tests {
		got := CPUProgram(tt.cpus)
		if len(got) != len(tt.want) {
			t.Errorf("CPUProgram(%v): %d instructions %+v, want %+v", tt.cpus, len(got), got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("CPUProgram(%v)[%d] = %+v, want %+v", tt.cpus, i, got[i], tt.want[i])
			}
		}
	}
}

// TestKernelConstantsMatchHeader checks the numbers written out above
// against the UAPI header installed on this machine, where there is one
// (linux-libc-dev), so that a typo in them cannot pass for the kernel's.
func TestKernelConstantsMatchHeader(t *testing.T) {
	src, err := os.ReadFile("/usr/include/linux/filter.h")
	if err != nil {
		t.Skipf("no kernel UAPI header to compare with: %v", err)
	}
	for name, want := range map[string]string{"SKF_AD_OFF": "(-0x1000)", "SKF_AD_CPU": "36"} {
		m := regexp.MustCompile(`(?m)^#define\s+` + name + `\s+(\S+)`).FindSubmatch(src)
		if m == nil || string(m[1]) != want {
			t.Errorf("filter.h defines %s as %q, the test uses %s", name, m, want)
		}
	}
}

// run interprets the subset of classic BPF that CPUProgram emits, so the
// mapping can be checked for CPUs this machine does not have.
func run(t *testing.T, prog []unix.SockFilter, cpu uint32) uint32 {
	var a uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case opLdAbsW:
			if in.K != loadCPU {
				t.Fatalf("load of %#x, want SKF_AD_OFF+SKF_AD_CPU (%#x)", in.K, uint32(loadCPU))
			}
			a = cpu
		case opModK:
			a %= in.K
		case opJeqK:
			if a == in.K {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case opRetA:
			return a
		case opRetK:
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
		// The default is both families: an IPv6 socket on "::" with
		// IPV6_V6ONLY off.
		if sa6, ok := sa.(*unix.SockaddrInet6); !ok || sa6.Addr != [16]byte{} || sa6.Port != port {
			t.Errorf("fd %d bound to %#v, want [::]:%d", fd, sa, port)
		}
		if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT); err != nil || v != 1 {
			t.Errorf("SO_REUSEPORT = %d, %v", v, err)
		}
		if v, err := unix.GetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY); err != nil || v != 0 {
			t.Errorf("IPV6_V6ONLY = %d, %v; want 0", v, err)
		}
	}
	// Accepted sockets inherit the listener's options: the server relies
	// on it to avoid setsockopt calls per connection. Both families reach
	// the group.
	for _, lo := range []string{"127.0.0.1", "::1"} {
		c := dial(t, netip.AddrPortFrom(netip.MustParseAddr(lo), uint16(port)))
		afd := acceptOne(t, fds)
		for _, o := range []struct {
			name       string
			level, opt int
			want       int
		}{
			{"TCP_NODELAY", unix.IPPROTO_TCP, unix.TCP_NODELAY, 1},
			{"SO_BUSY_POLL", unix.SOL_SOCKET, unix.SO_BUSY_POLL, 50},
		} {
			if v, err := unix.GetsockoptInt(afd, o.level, o.opt); err != nil || v != o.want {
				t.Errorf("%s: accepted socket %s = %d, %v; want %d", lo, o.name, v, err, o.want)
			}
		}
		unix.Close(afd)
		unix.Close(c)
	}
	if _, _, err := Listen(nil, Options{}); err == nil {
		t.Error("Listen with no CPUs succeeded")
	}
}

// dial connects a blocking socket to ap.
func dial(t *testing.T, ap netip.AddrPort) int {
	t.Helper()
	c, err := unix.Socket(familyOf(ap.Addr()), unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Connect(c, toSockaddr(ap)); err != nil {
		unix.Close(c)
		t.Fatalf("connect %v: %v", ap, err)
	}
	return c
}

// acceptOne accepts one connection from whichever listener has it.
func acceptOne(t *testing.T, fds []int) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, fd := range fds {
			if afd, _, err := unix.Accept4(fd, unix.SOCK_CLOEXEC); err == nil {
				return afd
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no connection accepted on any listener")
	return -1
}

func familyOf(a netip.Addr) int {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

func toSockaddr(ap netip.AddrPort) unix.Sockaddr {
	if ap.Addr().Is4() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
}

// portOf is the port of an IPv4 or IPv6 socket address.
func portOf(sa unix.Sockaddr) int {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return sa.Port
	case *unix.SockaddrInet6:
		return sa.Port
	}
	return -1
}

// TestListenFamilies checks what each kind of address binds: IPv4 only,
// IPv6 only, or both, and that an explicit IPv6 address is not dual-stack.
func TestListenFamilies(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		v4, v6 bool
	}{
		{"127.0.0.1", true, false},
		{"0.0.0.0", true, false},
		{"::1", false, true},
		{"::", true, true},
		{"", true, true},
	} {
		var a netip.Addr
		if tc.addr != "" {
			a = netip.MustParseAddr(tc.addr)
		}
		fds, port, err := Listen([]int{0}, Options{Addr: a})
		if err != nil {
			t.Fatalf("%q: %v", tc.addr, err)
		}
		for _, lo := range []struct {
			addr string
			want bool
		}{{"127.0.0.1", tc.v4}, {"::1", tc.v6}} {
			ap := netip.AddrPortFrom(netip.MustParseAddr(lo.addr), uint16(port))
			c, err := unix.Socket(familyOf(ap.Addr()), unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			err = unix.Connect(c, toSockaddr(ap))
			unix.Close(c)
			if (err == nil) != lo.want {
				t.Errorf("listening on %q: connect %v: %v, want reachable %v", tc.addr, ap, err, lo.want)
			}
		}
		for _, fd := range fds {
			unix.Close(fd)
		}
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
	// The dual-stack default and "::" collide with an IPv4 listener too.
	for _, addr := range []netip.Addr{lo, {}, netip.IPv6Unspecified()} {
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

// TestSteeringOverLoopback checks over real connections that the kernel
// runs the program on the CPU that receives a SYN and queues the
// connection on that CPU's socket. On loopback a packet is received on
// the sender's CPU (loopback_xmit hands it to the backlog of the CPU that
// sends it, and the softirq runs there), so a client whose thread is
// pinned to CPU c must see every one of its connections accepted on the
// socket of c. A program that read the packet hash, the queue or anything
// else would spread them over the group. On a machine with one usable
// CPU the group gets a second socket for a CPU it does not have, so the
// check still sees a wrong choice. Each group is built in CPU order and
// reversed: the reversed list is not cpu mod N, so both forms of the
// program run in the kernel.
func TestSteeringOverLoopback(t *testing.T) {
	if b, err := os.ReadFile("/sys/class/net/lo/queues/rx-0/rps_cpus"); err == nil && strings.Trim(string(b), "0,\n") != "" {
		t.Skipf("RPS steers loopback packets to other CPUs (rps_cpus %s): the receiving CPU is not the sender's", b)
	}
	cpus := usableCPUs(t)
	group := cpus
	if len(group) < 2 {
		group = append(group, group[0]+1)
	}
	reversed := make([]int, len(group))
	for i, c := range group {
		reversed[len(group)-1-i] = c
	}
	perCPU := max(16, 128/len(cpus))
	// The same over IPv4, IPv6, and both families into one dual-stack
	// group (v4-mapped connections are steered by the same program).
	for _, fam := range []struct{ bind, dial string }{
		{"127.0.0.1", "127.0.0.1"},
		{"::1", "::1"},
		{"::", "127.0.0.1"},
		{"::", "::1"},
	} {
		for _, order := range [][]int{group, reversed} {
			steerOnce(t, order, cpus, perCPU, netip.MustParseAddr(fam.bind), netip.MustParseAddr(fam.dial))
		}
	}
}

// steerOnce builds a group for order on bind and checks that connections
// to dial from each of cpus land on that CPU's socket.
func steerOnce(t *testing.T, order, cpus []int, perCPU int, bind, dialAddr netip.Addr) {
	t.Helper()
	fds, port, err := Listen(order, Options{Addr: bind, Backlog: 2 * perCPU})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, cpu := range cpus {
		want := slices.Index(order, cpu)
		clients, ports := dialFrom(t, cpu, netip.AddrPortFrom(dialAddr, uint16(port)), perCPU)
		got := acceptAll(t, fds, len(ports))
		wrong := 0
		for _, p := range ports {
			if got[p] != want {
				wrong++
			}
		}
		if wrong > 0 {
			t.Errorf("group %v on %v, clients to %v: %d of %d connections from cpu %d accepted on other sockets than its own, %d", order, bind, dialAddr, wrong, len(ports), cpu, want)
		}
		for _, fd := range clients {
			unix.Close(fd)
		}
	}
}

// usableCPUs returns the CPUs this process may run on.
func usableCPUs(t *testing.T) []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for c := range 1024 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// dialFrom connects n times to ap from a thread pinned to cpu and
// returns the client sockets and their local ports. The thread is locked
// and never unlocked, so it ends with the goroutine and its affinity goes
// with it.
func dialFrom(t *testing.T, cpu int, ap netip.AddrPort, n int) (fds, ports []int) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			errc <- err
			return
		}
		for range n {
			fd, err := unix.Socket(familyOf(ap.Addr()), unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				errc <- err
				return
			}
			fds = append(fds, fd)
			if err := unix.Connect(fd, toSockaddr(ap)); err != nil {
				errc <- err
				return
			}
			sa, err := unix.Getsockname(fd)
			if err != nil {
				errc <- err
				return
			}
			ports = append(ports, portOf(sa))
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		for _, fd := range fds {
			unix.Close(fd)
		}
		t.Fatalf("connecting from cpu %d: %v", cpu, err)
	}
	return fds, ports
}

// acceptAll accepts n connections from the listening sockets fds and
// returns, for each client port, the index of the socket it was queued on.
func acceptAll(t *testing.T, fds []int, n int) map[int]int {
	t.Helper()
	got := make(map[int]int, n)
	pfds := make([]unix.PollFd, len(fds))
	for i, fd := range fds {
		pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < n {
		if time.Now().After(deadline) {
			t.Fatalf("accepted %d of %d connections", len(got), n)
		}
		if _, err := unix.Poll(pfds, 100); err != nil && err != unix.EINTR {
			t.Fatal(err)
		}
		for i, fd := range fds {
			for {
				afd, sa, err := unix.Accept4(fd, unix.SOCK_CLOEXEC)
				if err != nil {
					break // EAGAIN: this queue is empty for now
				}
				unix.Close(afd)
				got[portOf(sa)] = i
			}
		}
	}
	return got
}
