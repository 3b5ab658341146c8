package server

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// loopbackPair returns the accepted end of a loopback TCP connection (a
// raw descriptor, as the worker has it) and closes both ends after b.
func loopbackPair(b *testing.B) (fd int) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	a, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	f, err := a.(*net.TCPConn).File()
	a.Close()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return int(f.Fd())
}

// BenchmarkIncomingCPU is the cost countAccept adds to each accepted
// connection: one getsockopt(SO_INCOMING_CPU). Compare it with
// BenchmarkLoopbackConnect, what a connection costs on loopback without it.
func BenchmarkIncomingCPU(b *testing.B) {
	fd := loopbackPair(b)
	b.ReportAllocs()
	for b.Loop() {
		if incomingCPU(fd) < 0 {
			b.Fatal("no SO_INCOMING_CPU")
		}
	}
}

// BenchmarkLoopbackConnect: connect, accept4 and close both ends of one
// loopback TCP connection, on raw system calls: the least a connection
// costs the machine.
func BenchmarkLoopbackConnect(b *testing.B) {
	lfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(lfd)
	if err := unix.Bind(lfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		b.Fatal(err)
	}
	if err := unix.Listen(lfd, 128); err != nil {
		b.Fatal(err)
	}
	sa, err := unix.Getsockname(lfd)
	if err != nil {
		b.Fatal(err)
	}
	var rsa unix.RawSockaddrAny
	for b.Loop() {
		cfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		// SO_LINGER 0: a reset, so that TIME_WAIT sockets do not pile up.
		unix.SetsockoptLinger(cfd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1})
		if err := unix.Connect(cfd, sa); err != nil {
			b.Fatal(err)
		}
		n := uint32(unix.SizeofSockaddrAny)
		fd, e := accept4(lfd, &rsa, &n)
		if e != 0 {
			b.Fatal(e)
		}
		unix.Close(cfd)
		unix.Close(fd)
	}
}
