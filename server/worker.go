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
	maxEvents    = 512
	acceptBatch  = 64 // accepts per listener event: new connections must not starve old ones
	lingerTime   = time.Second
	scanInterval = time.Second
	// acceptRetry is how long accepts stay paused after EMFILE and the
	// like. The timer is what resumes them on a worker with no connection
	// of its own to close.
	acceptRetry = 250 * time.Millisecond
	// busyWindow: a worker that had events this recently waits for the
	// next ones without the Go scheduler (see wait).
	busyWindow = 50 * time.Millisecond

	// The worker's output buffer and handler body buffer start at these
	// sizes and are cut back to them when a large response grew them.
	initialOutSize  = 64 << 10
	initialBodySize = 4 << 10
	maxKeptBodySize = 64 << 10
	// maxFreeIn bounds the default-size input buffers kept for new
	// connections (4 MiB at the default 16 KiB).
	maxFreeIn = 256
	// lingerOverflow is how many connections beyond MaxConnsPerWorker may
	// linger after their 503; beyond it, a refused connection is closed
	// at once.
	lingerOverflow = 1024
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

	in      []byte // buffered request bytes; nil while lingering
	pending []byte // response bytes the socket did not take yet
	chunk   http1.ChunkedState

	closeAfter bool // close once pending output is sent
	sent100    bool // 100 Continue sent for the request being read
	queued     bool // in w.ready: requests left over from a turn cut short

	lastActive int64 // w.now (monotonic) of the last read or write
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
	spare  []*conn // closed connections by slot, for reuse (without buffers)
	free   []int32 // free slots
	nconns int
	ready  []readyConn // connections with requests left after their turn

	out  []byte // responses of the batch being processed
	body []byte // response body of the request being handled
	// The largest out and body used since the last scan: a buffer a large
	// response grew is cut back once a second passed without such a
	// response (shrinkBuffers), not after every one, which would allocate
	// per request for a handler whose responses are all large.
	outHigh, bodyHigh int
	discard           []byte   // where lingering connections' input goes
	freeIn            [][]byte // default-size input buffers for reuse
	ctx               Ctx

	// held is the bytes of every connection buffer the worker holds
	// (input, pending output, the free list); extra the part of it the
	// memory budget covers: input buffers grown beyond ReadBufferSize
	// and pending output.
	held, extra int64
	mem         atomic.Int64 // held plus the worker's own buffers, for Server.MemoryInUse
	memPeak     atomic.Int64 // the highest mem since Server.releaseMemory last looked

	epoch    time.Time // w.now is monotonic nanoseconds since epoch
	now      int64
	dateSec  int64
	date     []byte // "Date: ...\r\n", re-rendered when the second changes
	head200  []byte // status line, Server and Date of a 200, with date
	route    *route // the route of the last request: pipelines repeat one path
	lastScan int64
	busyAt   int64 // w.now when epoll_wait last returned events
	draining bool

	acceptPaused  bool  // listener out of the epoll set after EMFILE and the like
	pausedAt      int64 // when; accepts resume acceptRetry later
	acceptFailing bool  // the pause has been logged

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
		limits:  http1.Limits{MaxHeaderBytes: s.cfg.MaxHeaderBytes, MaxBodyBytes: s.cfg.MaxBodyBytes},
		events:  make([]unix.EpollEvent, maxEvents),
		out:     make([]byte, 0, initialOutSize),
		body:    make([]byte, 0, initialBodySize),
		discard: make([]byte, s.cfg.ReadBufferSize),
		date:    make([]byte, 0, 64),
		// Start the monotonic clock a second back, so that w.now is never
		// 0 (0 means "no request started" in conn.reqStart).
		epoch: time.Now().Add(-time.Second),
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
	w.publishMem()
	ready <- nil
	if err := w.loop(); err != nil {
		w.srv.fail(err)
	}
	for _, c := range w.conns {
		if c != nil {
			w.closeConn(c)
		}
	}
	w.publishMem()
}

// tick reads the clock once per loop iteration and re-renders the Date
// header when the second changes: no per-request clock read, no state
// shared between CPUs. Timeouts run on the monotonic clock (time.Now
// carries a monotonic reading; Sub uses it), so a step of the wall clock
// neither closes every connection nor keeps dead ones open; only the Date
// header follows the wall clock.
func (w *worker) tick() {
	now := time.Now()
	w.now = int64(now.Sub(w.epoch))
	wall := now
	if w.srv.wallClock != nil {
		wall = w.srv.wallClock()
	}
	if sec := wall.Unix(); sec != w.dateSec {
		w.dateSec = sec
		w.date = append(w.date[:0], "Date: "...)
		w.date = wall.UTC().AppendFormat(w.date, "Mon, 02 Jan 2006 15:04:05 GMT")
		w.date = append(w.date, "\r\n"...)
		// The head of every 200 response changes only with the date.
		w.head200 = append(w.head200[:0], statusLines[200]...)
		w.head200 = append(w.head200, w.srv.serverHeader...)
		w.head200 = append(w.head200, w.date...)
	}
}

func (w *worker) loop() error {
	for {
		timeout := int(scanInterval / time.Millisecond)
		if w.nconns == 0 && !w.draining && len(w.freeIn) == 0 &&
			cap(w.out) <= initialOutSize && cap(w.body) <= maxKeptBodySize {
			timeout = -1 // nothing can time out or shrink; sleep until an event
		}
		if w.acceptPaused {
			// Nothing else may ever wake a worker with no connections.
			timeout = int(acceptRetry / time.Millisecond)
		}
		if len(w.ready) > 0 {
			timeout = 0 // connections wait for their next turn
		}
		n, err := w.wait(timeout)
		if err != 0 && err != unix.EINTR {
			return fmt.Errorf("server: worker %d: epoll_wait: %w", w.cpu, err)
		}
		w.tick()
		if n > 0 {
			w.busyAt = w.now
		}
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
		w.runReady()
		if w.acceptPaused && w.now-w.pausedAt >= int64(acceptRetry) {
			w.resumeAccept()
		}
		if w.now-w.lastScan >= int64(scanInterval) {
			w.lastScan = w.now
			w.scan()
		}
		w.publishMem()
		if w.draining && w.nconns == 0 {
			return nil
		}
	}
}

// wait is epoll_wait, without the Go scheduler wherever that is safe.
//
// A worker is a goroutine locked to its thread that, under load, never
// leaves it. The runtime's entersyscall/exitsyscall around a blocking
// system call let sysmon take the worker's P while it sleeps in the
// kernel: it then wakes another thread with a futex to run nothing, the
// worker has to get a P back on return, and sysmon, having "done work",
// keeps polling every 20 µs instead of backing off to 10 ms. On a loaded
// worker that was ~1,700 sysmon wake-ups and ~1,400 involuntary context
// switches per second on the worker's CPU. So:
//   - a busy worker (events within the last busyWindow), and any poll
//     with timeout 0, calls epoll_wait through RawSyscall6: to the
//     runtime the worker is simply running. Every 10 ms sysmon asks it to
//     yield with a signal, which ends a wait with EINTR; the loop then
//     passes a preemption point. That is the only runtime cost left:
//     ~100 preemptions a second, which stopping the world for a
//     collection relies on anyway;
//   - an idle worker blocks through Syscall6, so that the runtime parks
//     its P and a server with nothing to do is not woken 100 times a
//     second.
func (w *worker) wait(timeout int) (int, unix.Errno) {
	ev := uintptr(unsafe.Pointer(&w.events[0]))
	if timeout == 0 || w.now-w.busyAt < int64(busyWindow) {
		n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(w.epfd), ev, uintptr(len(w.events)), uintptr(timeout), 0, 0)
		return int(n), e
	}
	n, _, e := unix.Syscall6(unix.SYS_EPOLL_PWAIT, uintptr(w.epfd), ev, uintptr(len(w.events)), uintptr(timeout), 0, 0)
	return int(n), e
}

type readyConn struct{ slot, gen int32 }

// runReady gives each connection whose turn was cut short (per-turn limits,
// see respond) one more turn. Connections queued again during this pass
// wait for the next loop iteration, after the events that arrived since.
func (w *worker) runReady() {
	n := len(w.ready)
	if n == 0 {
		return
	}
	for _, r := range w.ready[:n] {
		c := w.conns[r.slot]
		if c == nil || c.gen != r.gen {
			continue
		}
		c.queued = false
		if c.state == stateOpen {
			w.process(c)
		}
	}
	w.ready = w.ready[:copy(w.ready, w.ready[n:])]
}

func (w *worker) enqueue(c *conn) {
	if !c.queued {
		c.queued = true
		w.ready = append(w.ready, readyConn{c.slot, c.gen})
	}
}

// publishMem makes the worker's memory figure visible to MemoryInUse.
func (w *worker) publishMem() {
	m := w.held + int64(cap(w.out)+cap(w.body)+cap(w.discard))
	if w.mem.Load() != m {
		w.mem.Store(m)
		if m > w.memPeak.Load() {
			w.memPeak.Store(m)
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
	fd, err := accept4(w.lfd)
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
	limit := w.srv.cfg.MaxConnsPerWorker
	if w.nconns < limit {
		return w.addConn(fd, true), true
	}
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
		w.send(c, overloadResponse)
	}
	return nil, true
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

var overloadResponse = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

// addConn registers an accepted socket; withBuffer gives it an input
// buffer (a refused connection only lingers and needs none). It returns
// nil when the socket could not be registered (it is closed then).
func (w *worker) addConn(fd int, withBuffer bool) *conn {
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
	if withBuffer {
		c.in = w.getIn()
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

// spare holds closed connections' structs for reuse, so a new connection
// allocates its struct only while the worker grows past its previous peak.
// Buffers are not kept there: a worker that once had 16,384 connections
// would hold 16,384 input buffers for good.
func (w *worker) connFor(slot int32) *conn {
	if int(slot) < len(w.spare) && w.spare[slot] != nil {
		c := w.spare[slot]
		w.spare[slot] = nil
		return c
	}
	return &conn{}
}

// closeConn closes c and frees its slot and buffers. It may be called more
// than once for the same connection (a failed epoll_ctl and the caller's
// own error path, say): only the first call does anything.
func (w *worker) closeConn(c *conn) {
	if c.fd < 0 {
		return
	}
	unix.Close(c.fd)
	c.fd = -1
	w.conns[c.slot] = nil
	w.free = append(w.free, c.slot)
	w.nconns--
	w.resumeAccept()
	w.putIn(c.in)
	c.in = nil
	w.setPendingCap(c, nil)
	for int(c.slot) >= len(w.spare) {
		w.spare = append(w.spare, nil)
	}
	w.spare[c.slot] = c
}

// Buffer accounting. Every connection buffer the worker allocates or drops
// goes through these, so held and extra are exact.

func (w *worker) budgetPart(n int) int64 {
	return int64(max(n-w.srv.cfg.ReadBufferSize, 0))
}

// getIn returns an empty default-size input buffer.
func (w *worker) getIn() []byte {
	if k := len(w.freeIn); k > 0 {
		b := w.freeIn[k-1]
		w.freeIn = w.freeIn[:k-1]
		return b
	}
	w.held += int64(w.srv.cfg.ReadBufferSize)
	return make([]byte, 0, w.srv.cfg.ReadBufferSize)
}

// putIn takes back an input buffer: a default-size one into the free list
// while it has room, anything else to the garbage collector.
func (w *worker) putIn(b []byte) {
	if b == nil {
		return
	}
	if cap(b) == w.srv.cfg.ReadBufferSize && len(w.freeIn) < maxFreeIn {
		w.freeIn = append(w.freeIn, b[:0])
		return
	}
	w.held -= int64(cap(b))
	w.extra -= w.budgetPart(cap(b))
	if cap(b) > w.srv.cfg.ReadBufferSize {
		// The last parsed request's slices may point into it and would
		// keep a body-sized array alive after the connection is gone.
		w.ctx.req = http1.Request{}
	}
}

// growIn moves c.in[from:] into a new buffer of capacity size, if the
// memory budget allows, and reports whether it did.
func (w *worker) growIn(c *conn, from, size int) bool {
	delta := w.budgetPart(size) - w.budgetPart(cap(c.in))
	if w.extra+delta > w.srv.cfg.MemoryBudget {
		return false
	}
	grown := make([]byte, len(c.in)-from, size)
	copy(grown, c.in[from:])
	w.held += int64(size)
	w.extra += w.budgetPart(size)
	w.putIn(c.in)
	c.in = grown
	return true
}

// shrinkIn moves c.in (which fits) back into a default-size buffer.
func (w *worker) shrinkIn(c *conn) {
	b := w.getIn()
	b = b[:copy(b[:len(c.in)], c.in)]
	w.putIn(c.in)
	c.in = b
}

// setPending keeps out in c.pending, accounted against the budget.
func (w *worker) setPending(c *conn, out []byte) {
	if cap(c.pending) < len(out) {
		w.setPendingCap(c, make([]byte, 0, len(out)))
	}
	c.pending = append(c.pending[:0], out...)
}

// setPendingCap replaces c.pending by b (nil to drop it).
func (w *worker) setPendingCap(c *conn, b []byte) {
	d := int64(cap(b) - cap(c.pending))
	w.held += d
	w.extra += d
	c.pending = b
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

func (w *worker) read(c *conn) {
	if c.state == stateLinger {
		// Input after our final response is read and discarded, into one
		// buffer shared by every lingering connection.
		n, err := recvRaw(c.fd, w.discard)
		if err != unix.EAGAIN && err != unix.EINTR && (err != 0 || n == 0) {
			w.closeConn(c)
		}
		return
	}
	if c.queued {
		// Its turn was cut short and runReady gives it the next one after
		// this batch of events; reading and serving now would be a second
		// turn in the same pass. Level-triggered epoll reports what waits
		// in the socket again.
		return
	}
	if len(c.in) == cap(c.in) {
		// respond grows the buffer for any request Parse can accept,
		// so a full buffer is a request beyond every limit.
		out := w.appendError(w.out[:0], 413, "request too large", false)
		c.closeAfter = true
		w.out = out
		w.send(c, out)
		return
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
	c.in = c.in[:len(c.in)+n]
	w.process(c)
}

// process answers the complete requests in c.in, in order, up to the
// per-turn limits, and sends all the responses with one send.
func (w *worker) process(c *conn) {
	out := w.respond(c)
	w.send(c, out)
	w.outHigh = max(w.outHigh, len(out))
	w.out = out[:0]
}

// respond parses and serves the complete requests in c.in and returns
// their responses, appended to the worker's output buffer.
//
// One turn of a connection ends at MaxRequestsPerTurn requests or once its
// responses reach MaxOutputPerTurn bytes (one request per turn while the
// worker's memory budget is spent). What is left waits in c.in, and the
// connection in w.ready: other connections get their turn first, and the
// output a client that does not read can make us hold stays bounded.
func (w *worker) respond(c *conn) []byte {
	cfg := &w.srv.cfg
	out := w.out[:0]
	p := 0
	served := 0
	maxReqs, maxOut := cfg.MaxRequestsPerTurn, cfg.MaxOutputPerTurn
	if w.extra >= cfg.MemoryBudget {
		maxReqs = 1
	}
	bigFront := false // the incomplete request at the front needs a grown buffer
	for p < len(c.in) && !c.closeAfter {
		if served >= maxReqs || len(out) >= maxOut {
			w.enqueue(c)
			break
		}
		req := &w.ctx.req
		n, err := http1.ParseResume(c.in[p:], req, w.limits, &c.chunk)
		if err == http1.ErrIncomplete {
			if req.HeaderLen > 0 {
				// A body larger than the buffer: make room for exactly this
				// request, or for a chunked one double the buffer, never
				// beyond the largest request Parse accepts, and only within
				// the worker's memory budget.
				need := req.HeaderLen + int(req.ContentLength)
				if req.Chunked {
					need = 0
					if p == 0 && len(c.in) == cap(c.in) {
						need = min(2*cap(c.in), w.limits.MaxRequestBytes())
					}
				}
				if need > cap(c.in) {
					if !w.growIn(c, p, need) {
						out = w.appendError(out, 503, "server busy: memory budget exhausted", string(req.Method) == "HEAD")
						c.closeAfter = true
						p = len(c.in)
						break
					}
					p = 0
				}
				bigFront = req.Chunked || need > cfg.ReadBufferSize
				if req.Expect100 && !c.sent100 {
					c.sent100 = true
					out = append(out, "HTTP/1.1 100 Continue\r\n\r\n"...)
				}
			}
			break
		}
		c.chunk.Reset()
		if err != nil {
			perr, _ := err.(*http1.Error)
			out = w.appendError(out, perr.Status, perr.Reason, string(req.Method) == "HEAD")
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
	// A buffer grown for a large body goes back to the default size once
	// that request is done: kept, it would let every later recv take in a
	// body's worth of pipelined requests.
	if cap(c.in) > cfg.ReadBufferSize && len(c.in) <= cfg.ReadBufferSize && !bigFront {
		w.shrinkIn(c)
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
			w.setPending(c, out[max(n, 0):])
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
	// Drained: a connection holds no output buffer between partial
	// sends, so that idle connections cost only their input buffer.
	w.setPendingCap(c, nil)
	if c.closeAfter {
		w.linger(c)
		return
	}
	c.state = stateOpen
	if !w.setEvents(c, unix.EPOLLIN|unix.EPOLLRDHUP) {
		return
	}
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
	if c.state == stateLinger || c.fd < 0 {
		return
	}
	wasWriting := c.state == stateWriting
	unix.Shutdown(c.fd, unix.SHUT_WR)
	c.state = stateLinger
	w.putIn(c.in)
	c.in = nil
	c.lingerEnd = w.now + int64(lingerTime)
	if wasWriting {
		w.setEvents(c, unix.EPOLLIN|unix.EPOLLRDHUP)
	}
}

// shrinkBuffers gives back the output and body buffers a large response
// grew, once a second in which none needed them (see outHigh).
func (w *worker) shrinkBuffers() {
	if cap(w.out) > initialOutSize && w.outHigh <= initialOutSize {
		w.out = make([]byte, 0, initialOutSize)
	}
	if cap(w.body) > maxKeptBodySize && w.bodyHigh <= maxKeptBodySize {
		w.body = make([]byte, 0, initialBodySize)
	}
	w.outHigh, w.bodyHigh = 0, 0
}

// scan enforces the timeouts, once per second: a deadline scan over this
// worker's connections costs less than a timer per connection and needs no
// allocation.
func (w *worker) scan() {
	w.shrinkBuffers()
	cfg := &w.srv.cfg
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
				out := w.appendError(w.out[:0], 408, "request not received in time", false)
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
	if len(w.freeIn) > 0 && w.nconns == 0 {
		// Idle: give the spare input buffers back too.
		for _, b := range w.freeIn {
			w.held -= int64(cap(b))
		}
		clear(w.freeIn)
		w.freeIn = w.freeIn[:0]
	}
}

// startDrain stops accepting and closes idle connections; connections in
// the middle of a request finish it and are then closed. Every connection
// still in the listen queue is accepted and answered (served with
// "Connection: close" when its request arrives within the grace period, a
// 503 beyond the connection cap) rather than reset by the listener's close.
func (w *worker) startDrain() {
	w.draining = true
	for _, c := range w.conns {
		if c != nil && c.state == stateOpen && len(c.in) == 0 {
			// Accepted but not read yet (its event may be in the next
			// batch): a request waiting in the socket is served; closing
			// over it would reset the connection.
			w.read(c)
			if c.fd >= 0 && c.state == stateOpen && len(c.in) == 0 {
				w.closeConn(c)
			}
		}
	}
	w.resumeAccept()
	for {
		c, more := w.acceptOne()
		if !more {
			break
		}
		if c != nil {
			w.read(c) // its request is often already there
		}
	}
	w.pauseAccept()
	unix.Close(w.lfd)
	w.lfd = -1
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
