// Package reuseport creates a SO_REUSEPORT group of TCP listeners, one per
// CPU, and steers each new connection to the listener of the CPU that
// received it.
//
// The kernel hashes a new connection onto one socket of the group unless a
// classic BPF program attached with SO_ATTACH_REUSEPORT_CBPF picks the
// socket index. Our program returns the index of the receiving CPU, so with
// NIC queue i's interrupt on CPU i (the init arranges that) a connection is
// accepted and served on the CPU that took its packets: no cross-CPU cache
// traffic for the socket. Socket indices are the order in which sockets
// joined the group, which is why Listen creates them strictly in CPU order.
package reuseport

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"golang.org/x/sys/unix"
)

// Classic BPF ancillary-data offsets from linux/filter.h, not exported by
// x/sys/unix: loading from SKF_AD_OFF+SKF_AD_CPU yields the CPU that is
// running the program, which for an incoming SYN is the receiving CPU.
const (
	skfAdOff = -0x1000
	skfAdCPU = 36
)

// Options are the socket options of every listener in the group.
type Options struct {
	// Addr is the IPv4 or IPv6 address to bind. The zero Addr and "::"
	// mean both families: one IPv6 socket per CPU with IPV6_V6ONLY off,
	// which takes IPv4 connections as v4-mapped addresses (the zero Addr
	// falls back to 0.0.0.0 where the kernel has no IPv6). "0.0.0.0" is
	// IPv4 only. See DualStack for why one group rather than two.
	Addr    netip.Addr
	Port    int // 0 picks a free port (the same for every socket)
	Backlog int // listen(2) backlog, capped by net.core.somaxconn
	// RecvBuf and SendBuf set SO_RCVBUF/SO_SNDBUF on the listeners; accepted
	// sockets inherit them. 0 keeps the kernel's autotuning.
	RecvBuf, SendBuf int
	// BusyPoll sets SO_BUSY_POLL (microseconds) on the listeners, inherited
	// by accepted sockets; 0 leaves the net.core.busy_read default.
	BusyPoll int
	// NoDelay sets TCP_NODELAY on the listeners (inherited on Linux).
	NoDelay bool
}

// Listen creates one non-blocking listening socket per entry of cpus, in
// order, all bound to the same address and port, and attaches the CPU
// steering program. fds[i] belongs to cpus[i]. On error every socket
// created so far is closed.
func Listen(cpus []int, o Options) (fds []int, port int, err error) {
	if len(cpus) == 0 {
		return nil, 0, fmt.Errorf("reuseport: no CPUs")
	}
	defer func() {
		if err != nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
			fds = nil
		}
	}()
	o.Addr = Resolve(o.Addr)
	port = o.Port
	if port != 0 {
		if err := probeFree(o); err != nil {
			return nil, 0, err
		}
	}
	for i, cpu := range cpus {
		fd, err := listenOne(o, port)
		if err != nil {
			return fds, 0, fmt.Errorf("reuseport: listener %d (cpu %d): %w", i, cpu, err)
		}
		fds = append(fds, fd)
		if port == 0 {
			sa, err := unix.Getsockname(fd)
			if err != nil {
				return fds, 0, fmt.Errorf("reuseport: getsockname: %w", err)
			}
			switch sa := sa.(type) {
			case *unix.SockaddrInet4:
				port = sa.Port
			case *unix.SockaddrInet6:
				port = sa.Port
			}
		}
	}
	// Attaching to any member sets the program of the whole group.
	prog := CPUProgram(cpus)
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.SetsockoptSockFprog(fds[0], unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &fprog); err != nil {
		return fds, 0, fmt.Errorf("reuseport: attach CPU steering program: %w", err)
	}
	return fds, port, nil
}

// probeFree refuses a port on which something already listens. With
// SO_REUSEPORT, a second process of the same user binding the same port
// would silently join the first one's group and take a share of its
// connections (and the CPU steering program would then index a group it
// did not build). A socket without SO_REUSEPORT cannot bind a port that
// has a listener (SO_REUSEADDR lets it past connections in TIME_WAIT), so
// binding one first and closing it tells. Another process could still
// start listening between the probe and our own bind; that window is the
// few system calls of Listen.
func probeFree(o Options) error {
	addr, family, sa := sockaddr(o.Addr, o.Port)
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("reuseport: probe socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fmt.Errorf("reuseport: probe setsockopt SO_REUSEADDR: %w", err)
	}
	if family == unix.AF_INET6 {
		// A dual-stack probe also collides with an IPv4 listener.
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, v6only(addr)); err != nil {
			return fmt.Errorf("reuseport: probe setsockopt IPV6_V6ONLY: %w", err)
		}
	}
	if err := unix.Bind(fd, sa); err != nil {
		if err == unix.EADDRINUSE {
			return fmt.Errorf("reuseport: %s: address already in use (another process listens on the port; not joining its SO_REUSEPORT group)", netip.AddrPortFrom(addr, uint16(o.Port)))
		}
		return fmt.Errorf("reuseport: probe bind %s: %w", netip.AddrPortFrom(addr, uint16(o.Port)), err)
	}
	return nil
}

// DualStack reports whether listeners for a are IPv6 sockets that also take
// IPv4 (IPV6_V6ONLY off): the zero Addr and "::".
//
// One dual-stack group rather than one group per family: both keep the
// CBPF steering (the program reads only the receiving CPU, whatever the
// family), but two groups double the listening sockets, the epoll
// registrations and the accept paths of every worker, and a v4-mapped
// connection costs nothing measurable over a native IPv4 one (the figures
// are in the commit that made this the default and in BenchmarkFamilies).
func DualStack(a netip.Addr) bool {
	return !a.IsValid() || a == netip.IPv6Unspecified()
}

// Resolve returns the address Listen binds for a: "::" for the zero Addr
// when the kernel has IPv6, 0.0.0.0 when it has not.
func Resolve(a netip.Addr) netip.Addr {
	if a.IsValid() {
		return a
	}
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		// EAFNOSUPPORT: a kernel without IPv6 or booted with
		// ipv6.disable=1; IPv4 alone is then all there is.
		return netip.IPv4Unspecified()
	}
	unix.Close(fd)
	return netip.IPv6Unspecified()
}

// sockaddr returns the address to bind (see Resolve for the zero Addr),
// its socket family and its sockaddr.
func sockaddr(a netip.Addr, port int) (netip.Addr, int, unix.Sockaddr) {
	if !a.IsValid() {
		a = Resolve(a)
	}
	if a.Is6() && !a.Is4In6() {
		sa := &unix.SockaddrInet6{Port: port, Addr: a.As16()}
		if z := a.Zone(); z != "" {
			// A link-local literal such as fe80::1%eth0: the kernel
			// wants the interface index.
			if ifi, err := net.InterfaceByName(z); err == nil {
				sa.ZoneId = uint32(ifi.Index)
			} else if n, err := strconv.ParseUint(z, 10, 32); err == nil {
				sa.ZoneId = uint32(n)
			}
		}
		return a, unix.AF_INET6, sa
	}
	return a, unix.AF_INET, &unix.SockaddrInet4{Port: port, Addr: a.As4()}
}

// v6only is the IPV6_V6ONLY value of an IPv6 listener for a.
func v6only(a netip.Addr) int {
	if DualStack(a) {
		return 0
	}
	return 1
}

func listenOne(o Options, port int) (fd int, err error) {
	addr, family, sa := sockaddr(o.Addr, port)
	fd, err = unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	defer func() {
		if err != nil {
			unix.Close(fd)
		}
	}()
	opts := []struct {
		name       string
		level, opt int
		val        int
		skip       bool
	}{
		{"SO_REUSEADDR", unix.SOL_SOCKET, unix.SO_REUSEADDR, 1, false},
		{"SO_REUSEPORT", unix.SOL_SOCKET, unix.SO_REUSEPORT, 1, false},
		{"TCP_NODELAY", unix.IPPROTO_TCP, unix.TCP_NODELAY, 1, !o.NoDelay},
		{"SO_RCVBUF", unix.SOL_SOCKET, unix.SO_RCVBUF, o.RecvBuf, o.RecvBuf <= 0},
		{"SO_SNDBUF", unix.SOL_SOCKET, unix.SO_SNDBUF, o.SendBuf, o.SendBuf <= 0},
		{"SO_BUSY_POLL", unix.SOL_SOCKET, unix.SO_BUSY_POLL, o.BusyPoll, o.BusyPoll <= 0},
		// Set either way on an IPv6 socket so that the sysctl
		// net.ipv6.bindv6only cannot change what "::" means.
		{"IPV6_V6ONLY", unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, v6only(o.Addr), family != unix.AF_INET6},
	}
	for _, so := range opts {
		if so.skip {
			continue
		}
		if err := unix.SetsockoptInt(fd, so.level, so.opt, so.val); err != nil {
			return -1, fmt.Errorf("setsockopt %s=%d: %w", so.name, so.val, err)
		}
	}
	if err := unix.Bind(fd, sa); err != nil {
		return -1, fmt.Errorf("bind %s: %w", netip.AddrPortFrom(addr, uint16(port)), err)
	}
	backlog := o.Backlog
	if backlog <= 0 {
		backlog = unix.SOMAXCONN
	}
	// listen(2) is what adds the socket to the reuseport group, so the
	// order of these calls is the order of socket indices.
	if err := unix.Listen(fd, backlog); err != nil {
		return -1, fmt.Errorf("listen: %w", err)
	}
	return fd, nil
}

// CPUProgram returns the classic BPF program that maps the receiving CPU to
// the index of its socket in a group created for cpus.
//
// When cpus[i]%len(cpus) == i for every i (0-3, or 4-7 of 8), the index is
// simply cpu mod N: three instructions. For any other list (0,2 or 3,5,9)
// the program compares the CPU with each listed one and returns its index,
// falling back to cpu mod N for a CPU outside the list (an interrupt routed
// elsewhere still lands on some worker).
func CPUProgram(cpus []int) []unix.SockFilter {
	n := uint32(len(cpus))
	off := int32(skfAdOff + skfAdCPU)
	ld := unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: uint32(off)}
	tail := []unix.SockFilter{
		{Code: unix.BPF_ALU | unix.BPF_MOD | unix.BPF_K, K: n},
		{Code: unix.BPF_RET | unix.BPF_A},
	}
	identity := true
	for i, c := range cpus {
		if uint32(c)%n != uint32(i) {
			identity = false
		}
	}
	prog := []unix.SockFilter{ld}
	if !identity {
		// Each test: if A == cpus[i] fall through to "ret #i", else skip it.
		for i, c := range cpus {
			prog = append(prog,
				unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: uint32(c), Jt: 0, Jf: 1},
				unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: uint32(i)},
			)
		}
	}
	return append(prog, tail...)
}
