package server

import (
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hotpath-dev/hotpath/server/http1"
)

// Tags in the epoll data of the two non-connection descriptors. Connection
// events carry their slot index and generation instead.
const (
	tagListener = -1
	tagWake     = -2
)

const (
	maxEvents      = 512
	acceptBatch    = 64 // accepts per listener event: new connections must not starve old ones
	lingerTime     = time.Second
	scanInterval   = time.Second
	initialOutSize = 64 << 10
)

type connState uint8

const (
	stateOpen    connState = iota
	stateWriting           // a response is pending; not reading until it is sent
	stateLinger            // response sent, write side shut down, discarding input until EOF
)

type conn struct {
	fd    int
	slot  int32
	gen   int32
	state connState

	in      []byte // buffered request bytes; cap is the read buffer
	pending []byte // response bytes the socket did not take yet

	closeAfter bool // close once pending output is sent
	sent100    bool // 100 Continue sent for the request being read

	lastActive int64 // unix nanos of the last read or write
	reqStart   int64 // when the request being read began; 0 when none
	lingerEnd  int64
}

// worker is one CPU's event loop. Every field is touched only by its own
// thread, except requests (read by Server.Requests) and evfd (written by
// Server.wake).
type worker struct {
	srv    *Server
	idx    int
	cpu    int
	lfd    int
	epfd   int
	evfd   int
	limits http1.Limits

	events []unix.EpollEvent
	conns  []*conn // by slot
	spare  []*conn // closed connections by slot, for reuse
	free   []int32 // free slots
	nconns int

	out  []byte // responses of the batch being processed
	body []byte // response body of the request being handled
	ctx  Ctx

	now      int64
	dateSec  int64
	date     []byte // "Date: ...\r\n", re-rendered when the second changes
	lastScan int64
	draining bool

	acceptPaused bool // listener out of the epoll set after EMFILE and the like

	requests atomic.Uint64
	_        [64]byte // keep other workers' data off this cache line
}

func newWorker(s *Server, idx, cpu, lfd int) (*worker, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		unix.Close(lfd)
		return nil, fmt.Errorf("server: worker %d: epoll_create1: %w", cpu, err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(lfd)
		unix.Close(epfd)
		return nil, fmt.Errorf("server: worker %d: eventfd: %w", cpu, err)
	}
	w := &worker{
		srv: s, idx: idx, cpu: cpu, lfd: lfd, epfd: epfd, evfd: evfd,
		limits: http1.Limits{MaxHeaderBytes: s.cfg.MaxHeaderBytes, MaxBodyBytes: s.cfg.MaxBodyBytes},
		events: make([]unix.EpollEvent, maxEvents),
		out:    make([]byte, 0, initialOutSize),
		body:   make([]byte, 0, 4096),
		date:   make([]byte, 0, 64),
	}
	w.ctx.w = w
	for _, d := range []struct {
		fd  int
		tag int32
	}{{lfd, tagListener}, {evfd, tagWake}} {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: d.tag}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, d.fd, &ev); err != nil {
			w.closeFDs()
			unix.Close(evfd)
			return nil, fmt.Errorf("server: worker %d: epoll_ctl add: %w", cpu, err)
		}
	}
	return w, nil
}

// closeFDs closes the listener and epoll descriptors. The eventfd stays
// open: other goroutines may still write to it, so the Server closes it
// under wakeMu once every worker has returned.
func (w *worker) closeFDs() {
	if w.lfd >= 0 {
		unix.Close(w.lfd)
		w.lfd = -1
	}
	if w.epfd >= 0 {
		unix.Close(w.epfd)
		w.epfd = -1
	}
}

// wake interrupts epoll_wait; the Server calls it with wakeMu held.
func (w *worker) wake() {
	one := [8]byte{1}
	unix.Write(w.evfd, one[:])
}

func (w *worker) run(ready chan<- error) {
	defer w.srv.wg.Done()
	defer w.closeFDs()
	if err := pinThread(w.cpu); err != nil {
		ready <- err
		return
	}
	w.tick()
	w.lastScan = w.now
	ready <- nil
	if err := w.loop(); err != nil {
		w.srv.fail(err)
	}
	for _, c := range w.conns {
		if c != nil {
			w.closeConn(c)
		}
	}
}

// tick reads the clock once per loop iteration and re-renders the Date
// header when the second changes: no per-request clock read, no state
// shared between CPUs.
func (w *worker) tick() {
	now := time.Now()
	w.now = now.UnixNano()
	if sec := now.Unix(); sec != w.dateSec {
		w.dateSec = sec
		w.date = append(w.date[:0], "Date: "...)
		w.date = now.UTC().AppendFormat(w.date, "Mon, 02 Jan 2006 15:04:05 GMT")
		w.date = append(w.date, "\r\n"...)
	}
}

func (w *worker) loop() error {
	for {
		timeout := int(scanInterval / time.Millisecond)
		if w.nconns == 0 && !w.draining {
			timeout = -1 // nothing can time out; sleep until an event
		}
		n, err := unix.EpollWait(w.epfd, w.events, timeout)
		if err != nil && err != unix.EINTR {
			return fmt.Errorf("server: worker %d: epoll_wait: %w", w.cpu, err)
		}
		w.tick()
		for i := 0; i < n; i++ {
			ev := &w.events[i]
			switch ev.Fd {
			case tagListener:
				w.accept()
			case tagWake:
				var b [8]byte
				unix.Read(w.evfd, b[:])
				if w.srv.forced.Load() {
					return nil
				}
				if w.srv.draining.Load() && !w.draining {
					w.startDrain()
				}
			default:
				c := w.conns[ev.Fd]
				if c == nil || c.gen != ev.Pad {
					continue // closed earlier in this batch
				}
				w.handleEvent(c, ev.Events)
			}
		}
		if w.now-w.lastScan >= int64(scanInterval) {
			w.lastScan = w.now
			w.scan()
		}
		if w.draining && w.nconns == 0 {
			return nil
		}
	}
}

func (w *worker) handleEvent(c *conn, events uint32) {
	if c.state == stateWriting {
		// Not reading until the pending response is out; an error or
		// hang-up surfaces as a failed send.
		w.flush(c)
		return
	}
	if events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		w.read(c)
	}
}

func (w *worker) accept() {
	if w.lfd < 0 {
		return // closed by a drain earlier in this batch
	}
	for range acceptBatch {
		fd, err := accept4(w.lfd)
		switch err {
		case 0:
		case unix.EAGAIN, unix.EINTR, unix.ECONNABORTED:
			return
		case unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
			// Out of descriptors or memory: the listener would stay readable
			// and spin the loop. Stop watching it until a connection closes
			// or the next timeout scan.
			fmt.Fprintf(w.srv.cfg.Log, "hotpath: worker %d: accept4: %v; pausing accepts\n", w.cpu, err)
			w.pauseAccept()
			return
		default:
			fmt.Fprintf(w.srv.cfg.Log, "hotpath: worker %d: accept4: %v\n", w.cpu, err)
			return
		}
		if w.nconns >= w.srv.cfg.MaxConnsPerWorker || w.draining {
			// Refuse clearly rather than leave the client in the queue.
			sendRaw(fd, overloadResponse)
			unix.Close(fd)
			continue
		}
		w.addConn(fd)
	}
}

func (w *worker) pauseAccept() {
	if !w.acceptPaused && w.lfd >= 0 {
		unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, w.lfd, nil)
		w.acceptPaused = true
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

var overloadResponse = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

func (w *worker) addConn(fd int) {
	var slot int32
	if k := len(w.free); k > 0 {
		slot = w.free[k-1]
		w.free = w.free[:k-1]
	} else {
		slot = int32(len(w.conns))
		w.conns = append(w.conns, nil)
	}
	c := w.connFor(slot)
	c.fd = fd
	c.slot = slot
	c.gen++
	c.state = stateOpen
	c.in = c.in[:0]
	c.pending = c.pending[:0]
	c.closeAfter = false
	c.sent100 = false
	c.lastActive = w.now
	c.reqStart = w.now // the first request must arrive within HeaderTimeout
	w.conns[slot] = c
	w.nconns++
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: slot, Pad: c.gen}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		fmt.Fprintf(w.srv.cfg.Log, "hotpath: worker %d: epoll_ctl: %v\n", w.cpu, err)
		w.closeConn(c)
	}
}

// spare holds closed connections' structs and buffers for reuse, so a new
// connection allocates only while the worker grows past its previous peak.
func (w *worker) connFor(slot int32) *conn {
	if int(slot) < len(w.spare) && w.spare[slot] != nil {
		c := w.spare[slot]
		w.spare[slot] = nil
		return c
	}
	return &conn{in: make([]byte, 0, w.srv.cfg.ReadBufferSize)}
}

func (w *worker) closeConn(c *conn) {
	unix.Close(c.fd)
	c.fd = -1
	w.conns[c.slot] = nil
	w.free = append(w.free, c.slot)
	w.nconns--
	w.resumeAccept()
	if cap(c.in) > w.srv.cfg.ReadBufferSize {
		c.in = make([]byte, 0, w.srv.cfg.ReadBufferSize) // drop a body-sized buffer
	}
	for int(c.slot) >= len(w.spare) {
		w.spare = append(w.spare, nil)
	}
	w.spare[c.slot] = c
}

func (w *worker) setEvents(c *conn, events uint32) {
	ev := unix.EpollEvent{Events: events, Fd: c.slot, Pad: c.gen}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_MOD, c.fd, &ev); err != nil {
		w.closeConn(c)
	}
}

func (w *worker) read(c *conn) {
	if len(c.in) == cap(c.in) {
		if c.state == stateLinger {
			c.in = c.in[:0]
		} else {
			// respond grows the buffer for any request Parse can accept,
			// so a full buffer is a request beyond every limit.
			out := w.appendError(w.out[:0], 413, "request too large")
			c.closeAfter = true
			w.out = out
			w.send(c, out)
			return
		}
	}
	n, err := recvRaw(c.fd, c.in[len(c.in):cap(c.in)])
	switch {
	case err == unix.EAGAIN || err == unix.EINTR:
		return
	case err != 0 || n == 0:
		w.closeConn(c) // reset, or the peer closed
		return
	}
	c.lastActive = w.now
	if c.state == stateLinger {
		return // input after our final response is discarded
	}
	c.in = c.in[:len(c.in)+n]
	w.process(c)
}

// process answers every complete request in c.in, in order, and sends all
// the responses with one send.
func (w *worker) process(c *conn) {
	out := w.respond(c)
	w.out = out
	w.send(c, out)
}

// respond parses and serves every complete request in c.in and returns
// their responses, appended to the worker's output buffer.
func (w *worker) respond(c *conn) []byte {
	out := w.out[:0]
	p := 0
	served := 0
	for p < len(c.in) && !c.closeAfter {
		req := &w.ctx.req
		n, err := http1.Parse(c.in[p:], req, w.limits)
		if err == http1.ErrIncomplete {
			if req.HeaderLen > 0 {
				// A body larger than the buffer: make room for exactly this
				// request, or for a chunked one double the buffer, never
				// beyond the largest request Parse accepts.
				need := req.HeaderLen + int(req.ContentLength)
				if req.Chunked {
					need = 0
					if p == 0 && len(c.in) == cap(c.in) {
						need = min(2*cap(c.in), w.limits.MaxRequestBytes())
					}
				}
				if need > cap(c.in)-p {
					grown := make([]byte, len(c.in)-p, need)
					copy(grown, c.in[p:])
					c.in = grown
					p = 0
				}
				if req.Expect100 && !c.sent100 {
					c.sent100 = true
					out = append(out, "HTTP/1.1 100 Continue\r\n\r\n"...)
				}
			}
			break
		}
		if err != nil {
			perr, _ := err.(*http1.Error)
			out = w.appendError(out, perr.Status, perr.Reason)
			c.closeAfter = true
			p = len(c.in)
			break
		}
		p += n
		served++
		c.sent100 = false
		out = w.serve(out, c)
	}
	if served > 0 {
		w.requests.Add(uint64(served))
	}
	// Keep the unparsed tail at the start of the buffer.
	if p > 0 {
		c.in = c.in[:copy(c.in, c.in[p:])]
	}
	// The header timeout runs from the first byte of the request now at
	// the front of the buffer.
	switch {
	case len(c.in) == 0:
		c.reqStart = 0
	case served > 0 || c.reqStart == 0:
		c.reqStart = w.now
	}
	return out
}

// send writes out; what the socket does not take waits in c.pending and the
// connection stops reading until it is flushed (back-pressure on a client
// that pipelines without reading).
func (w *worker) send(c *conn, out []byte) {
	if len(out) > 0 {
		n, err := sendRaw(c.fd, out)
		if err != 0 && err != unix.EAGAIN && err != unix.EINTR {
			w.closeConn(c)
			return
		}
		if n < len(out) {
			c.pending = append(c.pending[:0], out[max(n, 0):]...)
			c.state = stateWriting
			w.setEvents(c, unix.EPOLLOUT)
			return
		}
		c.lastActive = w.now
	}
	if c.closeAfter {
		w.linger(c)
	}
}

func (w *worker) flush(c *conn) {
	n, err := sendRaw(c.fd, c.pending)
	if err != 0 && err != unix.EAGAIN && err != unix.EINTR {
		w.closeConn(c)
		return
	}
	if n > 0 {
		c.lastActive = w.now
		c.pending = c.pending[:copy(c.pending, c.pending[n:])]
	}
	if len(c.pending) > 0 {
		return
	}
	if c.closeAfter {
		w.linger(c)
		return
	}
	c.state = stateOpen
	w.setEvents(c, unix.EPOLLIN|unix.EPOLLRDHUP)
	if len(c.in) > 0 {
		w.process(c) // requests that arrived while we were writing
	}
}

// linger ends a connection after its final response without losing that
// response: closing a socket with unread input makes the kernel send a
// reset, which can destroy data the peer has not read yet. So shut down
// our side, read and discard until the peer closes, and close then (or
// after lingerTime).
func (w *worker) linger(c *conn) {
	if c.state == stateLinger {
		return
	}
	wasWriting := c.state == stateWriting
	unix.Shutdown(c.fd, unix.SHUT_WR)
	c.state = stateLinger
	c.in = c.in[:0]
	c.lingerEnd = w.now + int64(lingerTime)
	if wasWriting {
		w.setEvents(c, unix.EPOLLIN|unix.EPOLLRDHUP)
	}
}

// scan enforces the timeouts, once per second: a deadline scan over this
// worker's connections costs less than a timer per connection and needs no
// allocation.
func (w *worker) scan() {
	cfg := &w.srv.cfg
	w.resumeAccept()
	for _, c := range w.conns {
		if c == nil {
			continue
		}
		switch {
		case c.state == stateLinger:
			if w.now > c.lingerEnd {
				w.closeConn(c)
			}
		case c.state == stateWriting:
			if w.now-c.lastActive > int64(cfg.IdleTimeout) {
				w.closeConn(c)
			}
		case c.reqStart != 0:
			if w.now-c.reqStart > int64(cfg.HeaderTimeout) {
				out := w.appendError(w.out[:0], 408, "request not received in time")
				c.closeAfter = true
				w.out = out
				w.send(c, out)
			}
		default:
			if w.now-c.lastActive > int64(cfg.IdleTimeout) || w.draining {
				w.closeConn(c)
			}
		}
	}
}

// startDrain stops accepting and closes idle connections; connections in
// the middle of a request finish it and are then closed.
func (w *worker) startDrain() {
	w.draining = true
	// Connections already queued get a clear 503 rather than a reset.
	w.accept()
	w.pauseAccept()
	unix.Close(w.lfd)
	w.lfd = -1
	for _, c := range w.conns {
		if c != nil && c.state == stateOpen && len(c.in) == 0 {
			w.closeConn(c)
		}
	}
}

// Raw system calls for the hot path. recv/send/accept4 on non-blocking
// sockets never block, so they skip the runtime's entersyscall/exitsyscall
// bookkeeping (RawSyscall6), and pass no address arguments, so unlike
// unix.Recvfrom/unix.Accept4 they allocate nothing.

func recvRaw(fd int, p []byte) (int, unix.Errno) {
	if len(p) == 0 {
		return 0, unix.ENOBUFS
	}
	n, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), 0, 0, 0)
	return int(n), e
}

func sendRaw(fd int, p []byte) (int, unix.Errno) {
	n, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), unix.MSG_NOSIGNAL, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}

func accept4(lfd int) (int, unix.Errno) {
	fd, _, e := unix.RawSyscall6(unix.SYS_ACCEPT4, uintptr(lfd), 0, 0, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
	return int(fd), e
}
