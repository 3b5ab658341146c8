package server

import (
	"fmt"
	"net/netip"

	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hotpath-dev/hotpath/server/http1"
)

type connState uint8

const (
	stateOpen    connState = iota
	stateWriting           // a response is pending; not reading until it is sent
	stateLinger            // response sent, write side shut down, discarding input until EOF
)

// conn is one accepted connection. Its buffers come from the worker's
// budget and go back to it (closeConn, linger).
type conn struct {
	fd    int
	slot  int32
	gen   int32
	state connState

	in      []byte // buffered request bytes; nil while lingering
	pending []byte // response bytes the socket did not take yet
	chunk   http1.ChunkedState

	closeAfter bool // close once pending output is sent
	sent100    bool // 100 Continue sent for the request being read
	queued     bool // in w.ready: requests left over from a turn cut short

	deferQueue // its deferred requests and the responses queued behind them (deferred.go)

	remote netip.AddrPort // the peer, from accept4 (Ctx.RemoteAddr)

	lastActive int64 // w.now (monotonic) of the last read or write
	reqStart   int64 // when the request being read began; 0 when none
	lingerEnd  int64
}

// Connection slots. A connection's slot is its index in w.conns and, with
// its generation, the data of its epoll registration: an event for a slot
// reused since (a different generation) is recognised and dropped.

// slots is the part of a worker that owns the connection slots.
type slots struct {
	conns  []*conn // by slot
	spare  []*conn // closed connections by slot, for reuse (without buffers)
	free   []int32 // free slots
	nconns int
}

// take returns a free slot and the connection struct to use in it.
func (s *slots) take() (int32, *conn) {
	var slot int32
	if k := len(s.free); k > 0 {
		slot = s.free[k-1]
		s.free = s.free[:k-1]
	} else {
		slot = int32(len(s.conns))
		s.conns = append(s.conns, nil)
	}
	// spare holds closed connections' structs for reuse, so a new
	// connection allocates its struct only while the worker grows past its
	// previous peak. Buffers are not kept there: a worker that once had
	// 16,384 connections would hold 16,384 input buffers for good.
	if int(slot) < len(s.spare) && s.spare[slot] != nil {
		c := s.spare[slot]
		s.spare[slot] = nil
		return slot, c
	}
	return slot, &conn{}
}

// release frees c's slot and keeps its struct for reuse.
func (s *slots) release(c *conn) {
	s.conns[c.slot] = nil
	s.free = append(s.free, c.slot)
	s.nconns--
	for int(c.slot) >= len(s.spare) {
		s.spare = append(s.spare, nil)
	}
	s.spare[c.slot] = c
}

var overloadResponse = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

func (w *worker) accept() {
	for range acceptBatch {
		if _, more := w.acceptOne(); !more {
			return
		}
	}
}

// acceptOne accepts one connection and reports whether to go on; c is the
// new connection when it is being served.
func (w *worker) acceptOne() (c *conn, more bool) {
	if w.lfd < 0 || w.acceptPaused {
		return nil, false // closed by a drain, or paused, earlier in this batch
	}
	w.salen = uint32(unsafe.Sizeof(w.sa))
	fd, err := accept4(w.lfd, &w.sa, &w.salen)
	switch err {
	case 0:
	case unix.EAGAIN, unix.EINTR, unix.ECONNABORTED:
		return nil, false
	case unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
		// Out of descriptors or memory: the listener would stay readable
		// and spin the loop. Stop watching it until a connection closes
		// or acceptRetry has passed. Said once until an accept succeeds.
		if !w.acceptFailing {
			w.acceptFailing = true
			fmt.Fprintf(w.srv.cfg.Log, "hotpath: worker %d: accept4: %v; pausing accepts, retrying every %v\n", w.cpu, err, acceptRetry)
		}
		w.pauseAccept()
		return nil, false
	default:
		fmt.Fprintf(w.srv.cfg.Log, "hotpath: worker %d: accept4: %v\n", w.cpu, err)
		return nil, false
	}
	w.acceptFailing = false
	w.countAccept(fd)
	limit := w.srv.cfg.MaxConnsPerWorker
	if w.nconns < limit {
		return w.addConn(fd, true), true
	}
	// The ErrorHandler's 503 for a refused connection, when there is
	// one; beyond lingerOverflow the fixed one below, without one.
	// Refuse clearly rather than leave the client in the queue, and
	// linger like every other final response: closing a socket with
	// unread input resets it, and the reset can destroy the 503.
	if w.nconns >= limit+lingerOverflow {
		sendRaw(fd, overloadResponse)
		unix.Close(fd)
		return nil, true
	}
	if c := w.addConn(fd, false); c != nil {
		c.closeAfter = true
		resp := overloadResponse
		if w.srv.cfg.ErrorHandler != nil {
			resp = w.appendError(w.discard[:0], c, 503, "server busy: too many connections", false, false)
		}
		w.send(c, resp)
	}
	return nil, true
}

// countAccept counts an accepted connection, and whether the kernel
// received it on another CPU than the worker's: the CBPF steering
// (package reuseport) sends a new connection to the worker of the CPU whose
// softirq took its SYN, and the accepted socket's SO_INCOMING_CPU names the
// CPU that took the handshake's last packet; in a flow the NIC and RPS
// steer to one CPU they are the same. One getsockopt per accepted
// connection, never per request: 0.45 µs (BenchmarkIncomingCPU) beside the
// 32-38 µs of a loopback connect, accept and close (BenchmarkLoopbackConnect);
// it allocates nothing.
func (w *worker) countAccept(fd int) {
	w.accepted.Add(1)
	if incomingCPU(fd) != w.cpu {
		w.foreign.Add(1)
	}
}

func (w *worker) pauseAccept() {
	if !w.acceptPaused && w.lfd >= 0 {
		unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, w.lfd, nil)
		w.acceptPaused = true
		w.pausedAt = w.now
	}
}

func (w *worker) resumeAccept() {
	if w.acceptPaused && w.lfd >= 0 {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: tagListener}
		if unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, w.lfd, &ev) == nil {
			w.acceptPaused = false
		}
	}
}

// addConn registers an accepted socket; withBuffer gives it an input
// buffer (a refused connection only lingers and needs none). It returns
// nil when the socket could not be registered (it is closed then).
func (w *worker) addConn(fd int, withBuffer bool) *conn {
	slot, c := w.take()
	c.fd = fd
	c.slot = slot
	c.gen++
	c.state = stateOpen
	c.remote = sockaddrAddrPort(&w.sa)
	if withBuffer {
		c.in = w.bud.getIn()
	}
	c.closeAfter = false
	c.sent100 = false
	c.queued = false
	c.chunk.Reset()
	c.lastActive = w.now
	c.reqStart = w.now // the first request must arrive within HeaderTimeout
	w.conns[slot] = c
	w.nconns++
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: slot, Pad: c.gen}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		fmt.Fprintf(w.srv.cfg.Log, "hotpath: worker %d: epoll_ctl: %v\n", w.cpu, err)
		w.closeConn(c)
		return nil
	}
	return c
}

// closeConn closes c and frees its slot and buffers. It may be called more
// than once for the same connection (a failed epoll_ctl and the caller's
// own error path, say): only the first call does anything.
func (w *worker) closeConn(c *conn) {
	if c.fd < 0 {
		return
	}
	if c.d != nil {
		w.dropQueue(c, ErrClientGone)
	}
	unix.Close(c.fd)
	c.fd = -1
	w.release(c)
	w.resumeAccept()
	w.putIn(c.in)
	c.in = nil
	c.pending = w.bud.replacePending(c.pending, nil)
}

// setEvents changes c's epoll events; on failure it closes c and reports
// false, and the caller must not touch c any further.
func (w *worker) setEvents(c *conn, events uint32) bool {
	ev := unix.EpollEvent{Events: events, Fd: c.slot, Pad: c.gen}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_MOD, c.fd, &ev); err != nil {
		w.closeConn(c)
		return false
	}
	return true
}

// sockaddrAddrPort converts the address accept4 wrote: IPv4-mapped IPv6
// addresses (IPv4 clients of a dual-stack listener) become IPv4. A
// link-local IPv6 address loses its zone: naming it would need the
// interface's name (a system call and an allocation per connection).
func sockaddrAddrPort(sa *unix.RawSockaddrAny) netip.AddrPort {
	switch sa.Addr.Family {
	case unix.AF_INET:
		p := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(p.Addr), networkPort(p.Port))
	case unix.AF_INET6:
		p := (*unix.RawSockaddrInet6)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom16(p.Addr).Unmap(), networkPort(p.Port))
	}
	return netip.AddrPort{}
}

// networkPort reads a port stored in network byte order.
func networkPort(p uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(&p))
	return uint16(b[0])<<8 | uint16(b[1])
}
