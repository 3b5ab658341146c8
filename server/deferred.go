package server

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Deferred responses: a handler that must wait on a backend detaches its
// request (Ctx.Defer) and returns; the worker goes on with its other
// connections. Any goroutine later hands the worker a function to run
// (Deferred.Finish): the worker runs it on its own thread with the
// request's own Ctx, as libreactor resumes a held request from an event
// fd and h2o's handler sends later. Other goroutines never touch the
// worker's buffers.
//
// The hand-over is per worker, with no lock: Finish pushes the Deferred on
// the worker's lock-free stack (finHead, many producers, one consumer
// that takes the whole stack at once) and writes the worker's eventfd,
// which is in its epoll set, unless a write is already pending (finWake).
// The synchronous path does not change: a handler that does not defer
// costs one comparison more per request (respond's loop stops behind a
// deferred request) and no allocation.
//
// Order: a connection's responses go out in request order. While a
// request of a connection is deferred, the requests behind it wait in the
// connection's input buffer, unparsed, and the connection is not read
// (its epoll registration keeps only EPOLLRDHUP; hang-ups and errors are
// always reported): what a connection with a deferred request can make
// the worker hold is its input buffer. So at most one request per
// connection is deferred at a time.

// Deferred is a request detached from its handler by Ctx.Defer.
type Deferred struct {
	// Set by Defer; read by any goroutine.
	w      *worker
	ctx    context.Context
	state  atomic.Int32
	fn     func(*Ctx) // Finish's, read by the worker once it took d
	next   *Deferred  // the worker's finish stack
	cancel context.CancelCauseFunc
	stop   context.CancelFunc

	// The worker's own.
	cn       *conn // nil once d is finished or dropped
	deadline int64 // w.now at which the request is answered 504
	idx      int   // in w.held
	size     int64 // what d holds, in the worker's memory budget
	c        Ctx   // the request, its bytes in raw
	raw      []byte
}

const (
	deferPending   int32 = iota // waiting for Finish
	deferFinishing              // Finish was called; the worker has not run fn yet
	deferDone                   // fn ran, or the 504 was sent
	deferGone                   // cancelled: client gone, deadline, drain, overload
)

// The causes of a deferred request's cancellation (context.Cause of
// Deferred.Context); a deadline is context.DeadlineExceeded.
var (
	ErrClientGone = errors.New("server: client closed the connection")
	ErrDrained    = errors.New("server: server stopped before the response was finished")
	ErrOverloaded = errors.New("server: too many deferred requests")
)

// deferOverhead is what a deferred request holds besides its request
// bytes: its Deferred (Ctx included), two contexts and a timer.
const deferOverhead = int64(unsafe.Sizeof(Deferred{})) + 512

// deferrals is the part of a worker that holds its deferred requests.
type deferrals struct {
	held         []*Deferred // pending and finishing, by idx
	nextDeadline int64       // no deadline in held is earlier
	pendingDefer *Deferred   // made by the running handler, held once it returns

	// Written by other goroutines (Finish).
	_           [64]byte
	finHead     atomic.Pointer[Deferred]
	finWake     atomic.Bool  // an eventfd write is pending
	finClosed   atomic.Bool  // the worker stopped: no more writes to its eventfd
	finInflight atomic.Int32 // Finish calls between their finClosed check and write
	_           [64]byte
}

// Defer detaches the request: the handler returns without a response, and
// the response is made later by the function passed to Finish, on this
// worker. The request must be answered before its deadline: the route's
// RouteOptions.DeferTimeout, else Config.DeferTimeout. Use DeferTimeout
// for another one.
//
// Everything the handler set before calling Defer (headers, the value
// slot) stays with the request; after Defer it must not write a response.
// When the worker already holds Config.MaxDeferredPerWorker deferred
// requests, or their memory would exceed Config.MemoryBudget, the request
// is answered 503 at once (through Config.ErrorHandler) and the Deferred
// returned is already cancelled (context.Cause: ErrOverloaded) and its
// Finish reports false. Defer panics outside a handler and when called
// twice for one request.
func (c *Ctx) Defer() *Deferred { return c.DeferTimeout(0) }

// DeferTimeout is Defer with the request's deadline timeout from now (0:
// the route's or the server's).
func (c *Ctx) DeferTimeout(timeout time.Duration) *Deferred {
	w := c.w
	if c != &w.ctx || !w.inHandler || w.pendingDefer != nil {
		panic("server: Defer outside a handler, or twice")
	}
	cfg := &w.srv.cfg
	if timeout <= 0 && c.leaf != nil {
		timeout = c.leaf.deferTimeout
	}
	if timeout <= 0 {
		timeout = cfg.DeferTimeout
	}
	lo, n, extra := requestSpan(c)
	size := deferOverhead + int64(n+extra)
	if len(w.held) >= cfg.MaxDeferredPerWorker || !w.bud.takeHeld(size) {
		w.serverError(c, 503, "server busy: too many deferred requests")
		return w.srv.refused
	}
	d := &Deferred{w: w, size: size, deadline: w.now + int64(timeout)}
	d.c = *c
	d.raw = make([]byte, n, n+extra)
	copy(d.raw, unsafe.Slice(unsafe.SliceData(c.req.Method), n))
	d.rebase(lo, n)
	base, cancel := context.WithCancelCause(context.Background())
	d.ctx, d.stop = context.WithDeadline(base, time.Now().Add(timeout))
	d.cancel = cancel
	w.pendingDefer = d
	c.status = 0 // serve holds the request instead of answering it
	return d
}

// Context returns the request's context: cancelled when the client
// closes or resets the connection (cause ErrClientGone), at the
// request's deadline (context.DeadlineExceeded; its Deadline is set, for
// a backend client's timeout), when the server stops before the
// response is made (ErrDrained), and once the response is made.
func (d *Deferred) Context() context.Context { return d.ctx }

// Finish hands fn to the request's worker, which runs it on its thread
// with the request's Ctx to write the response with the usual calls
// (SetStatus, WriteJSON, AddHeader, ...), and reports true. It reports
// false, and fn never runs, when the request is already gone: its client
// left, its deadline passed (it was answered 504), the server stopped, it
// was refused (503), or Finish was called before. Finish may be called
// from any goroutine and never blocks. Should the client leave in the
// short time between a true Finish and the worker's turn, fn is not run.
func (d *Deferred) Finish(fn func(c *Ctx)) bool {
	if fn == nil {
		panic("server: Finish(nil)")
	}
	// The context's own timer may end it a little before the worker
	// answers 504: the request is gone from that moment.
	if d.ctx.Err() != nil || !d.state.CompareAndSwap(deferPending, deferFinishing) {
		return false
	}
	d.fn = fn
	w := d.w
	for {
		old := w.finHead.Load()
		d.next = old
		if w.finHead.CompareAndSwap(old, d) {
			break
		}
	}
	if !w.finWake.Swap(true) {
		// finInflight keeps the eventfd open until the write is done:
		// the worker sets finClosed, then waits for it to fall to 0.
		w.finInflight.Add(1)
		if !w.finClosed.Load() {
			w.wake()
		}
		w.finInflight.Add(-1)
	}
	return true
}

// requestSpan returns where c's request bytes start, how many they are,
// and how many bytes of wildcard values lie outside them (decoded into
// scratch).
func requestSpan(c *Ctx) (lo uintptr, n, extra int) {
	// From the method (the request line's start, after any empty lines
	// the parser skipped) to the end of the last slice the request has:
	// the head's last field, or the body. Not HeaderLen past the method:
	// HeaderLen counts the skipped empty lines too.
	r := &c.req
	lo = uintptr(unsafe.Pointer(unsafe.SliceData(r.Method)))
	hi := lo + uintptr(len(r.Method))
	end := func(s []byte) {
		if p := uintptr(unsafe.Pointer(unsafe.SliceData(s))); len(s) > 0 && p >= lo {
			hi = max(hi, p+uintptr(len(s)))
		}
	}
	end(r.Target)
	for i := range r.NumHeaders {
		end(r.Headers[i].Value)
		end(r.Headers[i].Name)
	}
	end(r.Body)
	n = int(hi - lo)
	for _, v := range c.vals {
		if !inside(v, lo, n) {
			extra += len(v)
		}
	}
	return lo, n, extra
}

func inside(s []byte, lo uintptr, n int) bool {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	return p >= lo && p+uintptr(len(s)) <= lo+uintptr(n)
}

// rebase points every slice of d's request at d.raw, which holds a copy
// of the n bytes at lo; wildcard values outside them are appended to it.
func (d *Deferred) rebase(lo uintptr, n int) {
	mv := func(s []byte) []byte {
		if s == nil {
			return nil
		}
		if !inside(s, lo, n) {
			if len(s) == 0 {
				return d.raw[:0:0]
			}
			k := len(d.raw)
			d.raw = append(d.raw, s...)
			return d.raw[k:len(d.raw):len(d.raw)]
		}
		off := int(uintptr(unsafe.Pointer(unsafe.SliceData(s))) - lo)
		return d.raw[off : off+len(s) : off+len(s)]
	}
	r := &d.c.req
	r.Method, r.Target, r.Path, r.Query = mv(r.Method), mv(r.Target), mv(r.Path), mv(r.Query)
	for i := range r.NumHeaders {
		r.Headers[i].Name, r.Headers[i].Value = mv(r.Headers[i].Name), mv(r.Headers[i].Value)
	}
	for i := r.NumHeaders; i < len(r.Headers); i++ {
		// No stale slices of the worker's buffer.
		r.Headers[i].Name, r.Headers[i].Value = nil, nil
	}
	r.Host, r.Body = mv(r.Host), mv(r.Body)
	for i := range d.c.vals {
		d.c.vals[i] = mv(d.c.vals[i])
	}
}

// hold takes the request the handler deferred (serve, when the handler
// returned with c.status 0 and pendingDefer set): the connection stops
// reading and parsing until it is answered.
func (w *worker) hold(out []byte, cn *conn) []byte {
	d := w.pendingDefer
	w.pendingDefer = nil
	d.cn = cn
	d.c.c = cn
	cn.d = d
	d.idx = len(w.held)
	w.held = append(w.held, d)
	if len(w.held) == 1 || d.deadline < w.nextDeadline {
		w.nextDeadline = d.deadline
	}
	// Not EPOLLIN: the requests behind it wait. A failure leaves EPOLLIN
	// on; handleEvent then ignores input (see deferredEvent).
	ev := unix.EpollEvent{Events: unix.EPOLLRDHUP, Fd: cn.slot, Pad: cn.gen}
	unix.EpollCtl(w.epfd, unix.EPOLL_CTL_MOD, cn.fd, &ev)
	return out
}

// abandonPending drops the Deferred of a handler that panicked after
// calling Defer.
func (w *worker) abandonPending() {
	if d := w.pendingDefer; d != nil {
		w.pendingDefer = nil
		d.state.Store(deferGone)
		d.cancel(context.Canceled)
		d.stop()
		w.bud.giveHeld(d.size)
	}
}

// deferredEvent handles an event of a connection with a deferred request:
// a hang-up, reset or error cancels it and closes the connection at once
// (its client is gone); pending output is flushed; input waits.
func (w *worker) deferredEvent(c *conn, events uint32) {
	if events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		w.closeConn(c)
		return
	}
	if c.state == stateWriting && events&unix.EPOLLOUT != 0 {
		w.flush(c)
	}
}

// dropDeferred cancels d with cause and frees what it holds; nothing is
// written for it. Its connection, if still open, is the caller's.
func (w *worker) dropDeferred(d *Deferred, cause error) {
	d.state.CompareAndSwap(deferPending, deferGone)
	d.cancel(cause)
	d.stop()
	w.releaseDeferred(d)
}

// releaseDeferred takes d out of the worker's and its connection's hands.
func (w *worker) releaseDeferred(d *Deferred) {
	last := w.held[len(w.held)-1]
	w.held[d.idx] = last
	last.idx = d.idx
	w.held[len(w.held)-1] = nil
	w.held = w.held[:len(w.held)-1]
	w.bud.giveHeld(d.size)
	d.cn.d = nil
	d.cn = nil
	d.c.c = nil
	d.fn = nil
}

// runFinished runs the functions handed over by Finish, oldest first.
func (w *worker) runFinished() {
	w.finWake.Store(false)
	d := w.finHead.Swap(nil)
	var rev *Deferred
	for d != nil {
		next := d.next
		d.next = rev
		rev = d
		d = next
	}
	for d := rev; d != nil; {
		next := d.next
		d.next = nil
		if d.cn != nil { // else dropped since (client gone)
			w.complete(d, d.fn)
		}
		d = next
	}
}

// complete answers d with fn, or with the 504 when fn is nil, and gives
// its connection back to its other requests.
func (w *worker) complete(d *Deferred, fn func(*Ctx)) {
	cn := d.cn
	c := &d.c
	head := string(c.req.Method) == "HEAD"
	w.body = w.body[:0]
	w.scratch = w.scratch[:0]
	c.status = 200
	if w.draining {
		c.closeConn = true
	}
	if fn != nil {
		d.state.Store(deferDone)
		w.runDeferred(c, fn)
	} else {
		w.serverError(c, 504, "deferred response not finished in time")
	}
	if c.status < 200 || c.status > 599 {
		c.status = 500
	}
	if c.closeConn {
		cn.closeAfter = true
	}
	d.cancel(context.Canceled)
	d.stop()
	w.releaseDeferred(d)
	out := w.appendResponse(w.out[:0], c, head)
	w.bodyHigh = max(w.bodyHigh, len(w.body))
	w.outHigh = max(w.outHigh, len(out))
	switch cn.state {
	case stateWriting:
		// Earlier responses are still pending: this one goes after
		// them; flush resumes reading once all is out.
		p := make([]byte, 0, len(cn.pending)+len(out))
		p = append(append(p, cn.pending...), out...)
		cn.pending = w.bud.replacePending(cn.pending, p)
	default:
		w.send(cn, out)
		if cn.fd >= 0 && cn.state == stateOpen && w.setEvents(cn, unix.EPOLLIN|unix.EPOLLRDHUP) && len(cn.in) > 0 {
			// The requests that waited behind it: their header timeout
			// runs from now, not from before the wait.
			cn.reqStart = w.now
			w.enqueue(cn)
		}
	}
	w.out = out[:0]
	c.req.Body, c.req.Method = nil, nil
	d.raw = nil
}

// runDeferred runs Finish's fn; a panic is answered 500 and closes the
// connection, as a handler's.
func (w *worker) runDeferred(c *Ctx, fn func(*Ctx)) {
	defer func() {
		if p := recover(); p != nil {
			w.logPanic(p)
			c.nheaders = 0
			c.closeConn = true
			w.body = w.body[:0]
			w.serverError(c, 500, "internal server error")
		}
	}()
	fn(c)
}

// expireDeferred answers 504 to the deferred requests whose deadline
// passed, cancelling their context; a Finish after that reports false.
func (w *worker) expireDeferred() {
	if len(w.held) == 0 || w.now < w.nextDeadline {
		return
	}
	next := int64(1<<63 - 1)
	for i := 0; i < len(w.held); {
		d := w.held[i]
		if d.deadline <= w.now && d.state.CompareAndSwap(deferPending, deferGone) {
			d.cancel(context.DeadlineExceeded)
			w.complete(d, nil) // moves the last one to i
			continue
		}
		next = min(next, d.deadline)
		i++
	}
	w.nextDeadline = next
}

// deferWait shortens the loop's epoll_wait timeout (ms) to the nearest
// deadline of a deferred request.
func (w *worker) deferWait(timeout int) int {
	if len(w.held) == 0 {
		return timeout
	}
	ms := int((w.nextDeadline-w.now)/int64(time.Millisecond)) + 1
	if ms < 0 {
		ms = 0
	}
	if timeout < 0 || ms < timeout {
		return ms
	}
	return timeout
}

// stopDeferred ends the deferred requests of a worker that stops (a
// forced drain, or a failure): each is cancelled (ErrDrained) and its
// connection closed without an answer. No Finish writes to the eventfd
// after it.
func (w *worker) stopDeferred() {
	w.finClosed.Store(true)
	for w.finInflight.Load() != 0 {
		runtime.Gosched()
	}
	for len(w.held) > 0 {
		d := w.held[len(w.held)-1]
		cn := d.cn
		w.dropDeferred(d, ErrDrained)
		w.closeConn(cn)
	}
	w.abandonPending()
}

// takeHeld accounts for n bytes a deferred request holds, if the budget
// allows them.
func (b *budget) takeHeld(n int64) bool {
	if b.extra+n > b.limit {
		return false
	}
	b.held += n
	b.extra += n
	return true
}

// giveHeld gives back what takeHeld took.
func (b *budget) giveHeld(n int64) {
	b.held -= n
	b.extra -= n
}

// newRefused returns the Deferred that Defer returns when it refuses a
// request: already cancelled, Finish reports false.
func newRefused() *Deferred {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrOverloaded)
	d := &Deferred{ctx: ctx, cancel: cancel, stop: func() {}}
	d.state.Store(deferGone)
	return d
}
