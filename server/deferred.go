package server

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hotpath-dev/hotpath/server/http1"
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
// costs one comparison more per request (respond's loop stops when a
// connection's queue is full) and no allocation.
//
// Order: a connection's responses go out in request order. The requests
// a client pipelines behind a deferred one are served as usual, but their
// responses wait in the deferred request's after buffer (and the response
// of a deferred request finished before its turn in its resp), counted in
// the memory budget, until the deferred requests before them are
// answered. At most Config.MaxDeferredPerConn deferred requests per
// connection (beyond: 503, in order); once the waiting responses reach
// Config.MaxOutputPerTurn bytes, the connection is neither parsed nor
// read (its epoll registration keeps only EPOLLRDHUP; hang-ups and errors
// are always reported) until they can go.

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
	cn       *conn                    // nil once d is finished or dropped
	start    int64                    // w.now when the handler deferred it
	deadline int64                    // w.now at which the request is answered 504
	onDone   [2]func(*Deferred, *Ctx) // OnDone's; more beyond two
	moreDone []func(*Deferred, *Ctx)
	idx      int   // in w.held
	size     int64 // what d holds, in the worker's memory budget
	c        Ctx   // the request, its bytes in raw
	raw      []byte
	nextc    *Deferred // the connection's next deferred request
	ready    bool      // finished before its turn: resp waits for it
	resp     []byte    // its response, when ready
	after    []byte    // the responses to the requests after it, before nextc
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
	mark         int         // respond's output from here on follows the connection's newest deferred request

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
	if len(w.held) >= cfg.MaxDeferredPerWorker || c.c.dn >= cfg.MaxDeferredPerConn || !w.bud.takeHeld(size) {
		w.serverError(c, 503, "server busy: too many deferred requests")
		return w.srv.refused
	}
	// idx -1 until hold: a Deferred whose handler panics is never held,
	// and runFinished must skip it even when Finish handed it over.
	d := &Deferred{w: w, size: size, start: w.now, deadline: w.now + int64(timeout), idx: -1}
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

// Deferred returns the Deferred the running handler made with Defer, or
// nil when it made none (or Defer refused the request: it was answered
// 503 at once). It is for a middleware: after the handler it wraps
// returned, Status is 0 for a deferred request, and OnDone tells it the
// status the response had in the end.
func (c *Ctx) Deferred() *Deferred {
	if w := c.w; c == &w.ctx && w.inHandler {
		return w.pendingDefer
	}
	return nil
}

// OnDone has fn run on the worker once the deferred request ends: when
// its response is made (by Finish's function, or the 504 at its
// deadline), with the request's Ctx holding the response's Status and
// ResponseLen; or when it ends without a response (its client left, the
// server stopped, or a response before it on its connection closed the
// connection), with Status 0 (context.Cause(d.Context()) says why).
// Elapsed says how long it was held. fn must not write a response.
//
// Call it on the worker, from the handler that deferred the request or
// a middleware around it (see Ctx.Deferred), before the handler returns
// to the server. Functions added by several calls run in the order they
// were added; one that panics is logged and the others still run. OnDone does nothing on a Deferred that Defer refused. fn
// does not run when the handler panics after Defer (the request is
// answered 500, as any panicking handler's).
func (d *Deferred) OnDone(fn func(d *Deferred, c *Ctx)) {
	switch {
	case d.w == nil:
		// Refused: answered 503 already.
	case d.onDone[0] == nil:
		d.onDone[0] = fn
	case d.onDone[1] == nil:
		d.onDone[1] = fn
	default:
		d.moreDone = append(d.moreDone, fn)
	}
}

// Elapsed returns how long the request has been held since the handler
// deferred it, by the worker's clock (read once per turn of its loop).
// Call it on the worker: in an OnDone function.
func (d *Deferred) Elapsed() time.Duration {
	if d.w == nil {
		return 0
	}
	return time.Duration(d.w.now - d.start)
}

// runDone runs d's OnDone functions, each once; a panic in one is
// logged and the others still run.
func (w *worker) runDone(d *Deferred, c *Ctx) {
	if d.onDone[0] == nil {
		return
	}
	fns := d.onDone
	more := d.moreDone
	d.onDone, d.moreDone = [2]func(*Deferred, *Ctx){}, nil
	for _, fn := range fns {
		if fn != nil {
			w.runDoneFn(fn, d, c)
		}
	}
	for _, fn := range more {
		w.runDoneFn(fn, d, c)
	}
}

func (w *worker) runDoneFn(fn func(*Deferred, *Ctx), d *Deferred, c *Ctx) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(w.srv.cfg.Log, "hotpath: panic in a Deferred.OnDone function (the worker goes on): %s\n", panicString(p))
		}
	}()
	fn(d, c)
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

// deferQueue is the part of a connection that keeps its responses in
// order around its deferred requests: d is the oldest, each one's after
// holds the responses of the requests that came after it (up to the next
// deferred one), and a deferred request finished before its turn keeps
// its response in resp.
type deferQueue struct {
	d      *Deferred // the oldest deferred request; nil: none
	dlast  *Deferred // the newest
	dn     int       // how many
	dbytes int       // bytes in their resp and after buffers
	dstop  bool      // dbytes reached the bound: not read nor parsed until they go
}

// hold takes the request the handler deferred (serve, when the handler
// returned with c.status 0 and pendingDefer set). The responses before
// it in out go out now; those after it wait for it (queueTail).
func (w *worker) hold(out []byte, cn *conn) []byte {
	d := w.pendingDefer
	w.pendingDefer = nil
	d.cn = cn
	d.c.c = cn
	if d.c.closeConn {
		cn.closeAfter = true // nothing after it is parsed
	}
	if cn.d == nil {
		cn.d = d
		w.mark = len(out)
	} else {
		out = w.queueTail(cn, out)
		cn.dlast.nextc = d
	}
	cn.dlast = d
	cn.dn++
	d.idx = len(w.held)
	w.held = append(w.held, d)
	if len(w.held) == 1 || d.deadline < w.nextDeadline {
		w.nextDeadline = d.deadline
	}
	return out
}

// queueTail moves the responses out holds after w.mark, which follow c's
// newest deferred request, into its after buffer, and returns out
// without them. Once c holds MaxOutputPerTurn bytes of such responses,
// it is neither read nor parsed until they can go.
func (w *worker) queueTail(c *conn, out []byte) []byte {
	if k := len(out) - w.mark; k > 0 {
		l := c.dlast
		if cap(l.after)-len(l.after) < k {
			nb := make([]byte, len(l.after), 2*cap(l.after)+k)
			copy(nb, l.after)
			w.bud.giveHeld(int64(cap(l.after)))
			w.bud.takeAlways(int64(cap(nb)))
			l.after = nb
		}
		l.after = append(l.after, out[w.mark:]...)
		c.dbytes += k
		out = out[:w.mark]
	}
	if c.dbytes >= w.srv.cfg.MaxOutputPerTurn && !c.dstop && c.fd >= 0 {
		c.dstop = true
		if c.state == stateOpen {
			ev := unix.EpollEvent{Events: unix.EPOLLRDHUP, Fd: c.slot, Pad: c.gen}
			unix.EpollCtl(w.epfd, unix.EPOLL_CTL_MOD, c.fd, &ev)
		}
	}
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

// deferredEvent handles an event of a connection with deferred requests:
// a hang-up, reset or error cancels them and closes the connection at
// once (its client is gone); otherwise as handleEvent.
func (w *worker) deferredEvent(c *conn, events uint32) {
	switch {
	case events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0:
		w.closeConn(c)
	case c.state == stateWriting:
		if events&unix.EPOLLOUT != 0 {
			w.flush(c)
		}
	case c.dstop:
		// Input waits (a failed epoll_ctl left EPOLLIN on).
	case len(c.in) == cap(c.in):
		// A request larger than the buffer: its 413 would go out
		// before the responses that wait; it waits with them.
		c.dstop = true
		w.setEvents(c, unix.EPOLLRDHUP)
	case events&unix.EPOLLIN != 0:
		w.read(c)
	}
}

// dropDeferred cancels d with cause and takes it off the worker's list;
// nothing is written for it.
func (w *worker) dropDeferred(d *Deferred, cause error) {
	d.state.CompareAndSwap(deferPending, deferGone)
	d.cancel(cause)
	d.stop()
	d.c.status = 0 // no response
	w.runDone(d, &d.c)
	w.unhold(d)
}

// unhold takes d off the worker's list of held requests and gives back
// what it held (not its queued responses: those are the connection's).
func (w *worker) unhold(d *Deferred) {
	if d.idx < 0 {
		return
	}
	last := w.held[len(w.held)-1]
	w.held[d.idx] = last
	last.idx = d.idx
	w.held[len(w.held)-1] = nil
	w.held = w.held[:len(w.held)-1]
	d.idx = -1
	w.bud.giveHeld(d.size)
	d.c.req = http1.Request{}
	d.raw = nil
	d.fn = nil
}

// dropQueue drops all of c's deferred requests (cause: why) and the
// responses queued behind them.
func (w *worker) dropQueue(c *conn, cause error) {
	for d := c.d; d != nil; {
		next := d.nextc
		if d.idx >= 0 {
			w.dropDeferred(d, cause)
		}
		w.bud.giveHeld(int64(cap(d.resp) + cap(d.after)))
		d.resp, d.after, d.nextc, d.cn, d.c.c = nil, nil, nil, nil, nil
		d = next
	}
	c.deferQueue = deferQueue{}
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
		if d.idx >= 0 { // else dropped since (client gone)
			w.complete(d, d.fn)
		}
		d = next
	}
}

// complete answers d with fn, or with the 504 when fn is nil. When d is
// its connection's oldest deferred request, its response goes out with
// the responses queued behind it, and those of the deferred requests
// after it already finished, up to the first one still pending; and the
// connection's waiting requests get their turn. Otherwise its response
// waits for its turn in d.resp.
func (w *worker) complete(d *Deferred, fn func(*Ctx)) {
	cn := d.cn
	c := &d.c
	head := string(c.req.Method) == "HEAD"
	w.body = w.body[:0]
	w.scratch = w.scratch[:0]
	c.status = 200
	// A drain closes the connection after everything queued.
	if w.draining {
		cn.closeAfter = true
		if d.nextc == nil && len(d.after) == 0 {
			c.closeConn = true // the last response of the connection
		}
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
	closing := c.closeConn // after the drain's, nothing is queued behind it
	d.cancel(context.Canceled)
	d.stop()
	out := w.appendResponse(w.out[:0], c, head)
	w.runDone(d, c)
	w.unhold(d)
	w.bodyHigh = max(w.bodyHigh, len(w.body))
	w.outHigh = max(w.outHigh, len(out))
	if cn.d != d {
		// Not its turn.
		d.resp = append(make([]byte, 0, len(out)), out...)
		w.bud.takeAlways(int64(cap(d.resp)))
		cn.dbytes += len(d.resp)
		d.ready = true
		if closing {
			w.truncateAfter(cn, d)
		}
		w.out = out[:0]
		return
	}
	if closing {
		w.truncateAfter(cn, d)
	}
	wasStopped := cn.dstop
	out = append(out, d.after...)
	w.pop(cn)
	for h := cn.d; h != nil && h.ready; h = cn.d {
		out = append(out, h.resp...)
		out = append(out, h.after...)
		w.pop(cn)
	}
	if cn.d == nil {
		cn.deferQueue = deferQueue{}
	}
	w.outHigh = max(w.outHigh, len(out))
	switch cn.state {
	case stateWriting:
		// Earlier responses are still pending: these go after them;
		// flush resumes reading once all is out.
		p := make([]byte, 0, len(cn.pending)+len(out))
		p = append(append(p, cn.pending...), out...)
		cn.pending = w.bud.replacePending(cn.pending, p)
	default:
		if cn.dstop && cn.dbytes < w.srv.cfg.MaxOutputPerTurn {
			cn.dstop = false
		}
		w.send(cn, out)
		if cn.fd >= 0 && cn.state == stateOpen && !cn.dstop && !cn.closeAfter {
			if wasStopped && !w.setEvents(cn, unix.EPOLLIN|unix.EPOLLRDHUP) {
				break
			}
			if len(cn.in) > 0 {
				// The requests that waited: their header timeout
				// runs from now, not from before the wait.
				cn.reqStart = w.now
				w.enqueue(cn)
			}
		}
	}
	w.out = out[:0]
}

// pop takes c's oldest deferred request off its queue.
func (w *worker) pop(c *conn) {
	d := c.d
	c.d = d.nextc
	if c.d == nil {
		c.dlast = nil
	}
	c.dn--
	n := cap(d.resp) + cap(d.after)
	c.dbytes -= len(d.resp) + len(d.after)
	w.bud.giveHeld(int64(n))
	d.resp, d.after, d.nextc, d.cn, d.c.c = nil, nil, nil, nil, nil
}

// truncateAfter ends c's queue at d, whose response closes the
// connection: what came after it is dropped (the client was told the
// connection closes; it cannot have expected more).
func (w *worker) truncateAfter(c *conn, d *Deferred) {
	c.closeAfter = true
	for o := d.nextc; o != nil; {
		next := o.nextc
		if o.idx >= 0 {
			w.dropDeferred(o, ErrClientGone)
		}
		w.bud.giveHeld(int64(cap(o.resp) + cap(o.after)))
		c.dbytes -= len(o.resp) + len(o.after)
		c.dn--
		o.resp, o.after, o.nextc, o.cn, o.c.c = nil, nil, nil, nil, nil
		o = next
	}
	d.nextc = nil
	c.dlast = d
	w.bud.giveHeld(int64(cap(d.after)))
	c.dbytes -= len(d.after)
	d.after = nil
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
		cn := w.held[len(w.held)-1].cn
		w.dropQueue(cn, ErrDrained)
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

// takeAlways accounts for n bytes that must be kept (responses already
// made), whatever the limit.
func (b *budget) takeAlways(n int64) {
	b.held += n
	b.extra += n
}

// giveHeld gives back what takeHeld or takeAlways took.
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
