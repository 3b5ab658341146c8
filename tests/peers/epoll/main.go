// Command epoll is the floor of the benchmark: one thread, one epoll loop,
// recv, count the requests in what arrived (by their terminating empty
// line), and one send of that many copies of a canned response. (A partial
// send is dropped: wrk's responses are small enough to fit the socket.) No
// parsing, no routing, no Date refresh: no server can do less per request
// on this kernel. (A request split across two reads is not counted; wrk
// never splits its small requests.)
package main

import (
	"bytes"
	"flag"
	"log"
	"net/netip"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

var response = []byte("HTTP/1.1 200 OK\r\nServer: epoll\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nContent-Type: application/json\r\nContent-Length: 27\r\n\r\n{\"message\":\"Hello, World!\"}")

func main() {
	addr := flag.String("addr", "127.0.0.1:8083", "listen address")
	flag.Parse()
	ap := netip.MustParseAddrPort(*addr)
	runtime.LockOSThread()

	lfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	check(err)
	check(unix.SetsockoptInt(lfd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1))
	check(unix.Bind(lfd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}))
	check(unix.Listen(lfd, 4096))
	ep, err := unix.EpollCreate1(0)
	check(err)
	check(unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, lfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(lfd)}))
	log.Printf("epoll: ready on %s", *addr)

	events := make([]unix.EpollEvent, 512)
	in := make([]byte, 64<<10)
	out := make([]byte, 0, 1<<20)
	for {
		n, err := unix.EpollWait(ep, events, -1)
		if err == unix.EINTR {
			continue
		}
		check(err)
		for _, ev := range events[:n] {
			fd := int(ev.Fd)
			if fd == lfd {
				for {
					cfd, _, err := unix.Accept4(lfd, unix.SOCK_NONBLOCK)
					if err != nil {
						break
					}
					unix.SetsockoptInt(cfd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
					unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, cfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(cfd)})
				}
				continue
			}
			r, err := recv(fd, in)
			if err == unix.EAGAIN {
				continue
			}
			if err != 0 || r == 0 {
				unix.Close(fd)
				continue
			}
			count := bytes.Count(in[:r], []byte("\r\n\r\n"))
			out = out[:0]
			for range count {
				out = append(out, response...)
			}
			if len(out) > 0 {
				send(fd, out)
			}
		}
	}
}

// recv and send are raw system calls without the runtime's syscall
// bookkeeping (the sockets are non-blocking), as cheap as Go can make them.
func recv(fd int, p []byte) (int, unix.Errno) {
	n, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), 0, 0, 0)
	return int(n), e
}

func send(fd int, p []byte) {
	unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), unix.MSG_NOSIGNAL, 0, 0)
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
