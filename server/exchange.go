package server

import (
	"golang.org/x/sys/unix"

	"github.com/hotpath-dev/hotpath/server/http1"
)

// The request path of one connection: read what arrived, answer every
// complete request in it, send the answers, and back-pressure a client
// that does not read them.

func (w *worker) handleEvent(c *conn, events uint32) {
	if c.d != nil {
		w.deferredEvent(c, events)
		return
	}
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
		out := w.appendError(w.out[:0], c, 413, "request too large", false, false)
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
	// Stores only when something changed: w.out's length is not kept
	// (respond starts from w.out[:0]), and an unchanged buffer spares the
	// slice store and its write-barrier check, as a lower outHigh spares
	// that store, on every turn.
	if len(out) > w.outHigh {
		w.outHigh = len(out)
	}
	if cap(out) != cap(w.out) {
		w.out = out[:0] // an append grew it
	}
}

// respond parses and serves the complete requests in c.in and returns
// their responses, appended to the worker's output buffer.
//
// One turn of a connection ends at MaxRequestsPerTurn requests or once its
// responses reach MaxOutputPerTurn bytes (one request per turn while the
// worker's memory budget is spent). What is left waits in c.in, and the
// connection in w.ready: other connections get their turn first, and the
// output a client that does not read can make us hold stays bounded.
func (w *worker) respond(c *conn) (out []byte) {
	cfg := &w.srv.cfg
	out = w.out[:0]
	w.mark = 0 // see hold
	p := 0
	served := 0
	// A handler's panic unwinds past this turn to the loop, which ends
	// it (recoverTurn): no deferred call here, paid by every turn.
	maxReqs, maxOut := cfg.MaxRequestsPerTurn, cfg.MaxOutputPerTurn
	if w.bud.spent() {
		maxReqs = 1
	}
	bigFront := false // the incomplete request at the front needs a grown buffer
	for p < len(c.in) && !c.closeAfter && !c.dstop {
		if served >= maxReqs || len(out) >= maxOut {
			w.enqueue(c)
			break
		}
		req := &w.ctx.req
		n, err := http1.ParseResume(c.in[p:], req, w.limits, &c.chunk)
		if err == http1.ErrIncomplete {
			if req.HeaderLen > 0 {
				out, p, bigFront = w.awaitBody(c, req, out, p)
			}
			break
		}
		c.chunk.Reset()
		if err != nil {
			perr, _ := err.(*http1.Error)
			out = w.appendError(out, c, perr.Status, perr.Reason, string(req.Method) == "HEAD", true)
			c.closeAfter = true
			p = len(c.in)
			break
		}
		p += n
		served++
		c.sent100 = false
		w.turnServed = served
		out = w.serve(out, c)
	}
	if c.d != nil {
		out = w.queueTail(c, out) // what follows a deferred request waits for it
	}
	if served > 0 {
		w.requests.Add(uint64(served))
	}
	// Keep the unparsed tail at the start of the buffer.
	switch {
	case p == len(c.in):
		c.in = c.in[:0] // all of it: no call to memmove for nothing
	case p > 0:
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

// awaitBody handles a request at c.in[p:] whose head has arrived and whose
// body has not, all of it. The buffer grows as the body arrives, not for
// what the head declares: only once it is full with this request at its
// front, to four times its size, never beyond this request (its
// Content-Length, or for a chunked one the largest request Parse accepts),
// and only within the worker's memory budget (see growIn; 503 and a close
// beyond it). So the budget is charged at most four times the bytes a
// connection has actually sent: headers that declare 1 MiB and send
// nothing (~65 of them used to reserve the whole 64 MiB) hold only their
// default buffers. Four rather than two: each step leaves the old buffer
// to the collector, and doubling (16 KiB to 1 MiB in 7 steps instead of
// 3) made enough garbage to take TestHostileMemory's RSS past its bound.
//
// A body over its route's lower limit (RouteOptions.MaxBodyBytes) is
// refused here, from its Content-Length, before any of it is buffered: 413
// and a close.
//
// It returns out with what to answer now (100 Continue, the 503 or 413), the
// position of the request in c.in, and whether that request needs a
// buffer larger than the default.
func (w *worker) awaitBody(c *conn, req *http1.Request, out []byte, p int) ([]byte, int, bool) {
	// growIn may drop another connection's grown buffer, and w.ctx.req
	// with it (putIn): read the request first.
	need, chunked, expect := req.HeaderLen+int(req.ContentLength), req.Chunked, req.Expect100
	head := string(req.Method) == "HEAD"
	maxBody := w.bodyLimit(req)
	if req.ContentLength > maxBody {
		// The route's lower limit, before any of the body is buffered.
		out = w.appendError(out, c, 413, http1.ErrBodyTooLarge.Reason, head, true)
		c.closeAfter = true
		return out, len(c.in), false
	}
	if chunked {
		need = http1.Limits{MaxHeaderBytes: w.limits.MaxHeaderBytes, MaxBodyBytes: maxBody}.MaxRequestBytes()
	}
	if p == 0 && len(c.in) == cap(c.in) && need > cap(c.in) {
		if !w.growIn(c, min(4*cap(c.in), need)) {
			out = w.appendError(out, c, 503, "server busy: memory budget exhausted", head, true)
			c.closeAfter = true
			return out, len(c.in), false
		}
	}
	if expect && !c.sent100 {
		c.sent100 = true
		out = append(out, "HTTP/1.1 100 Continue\r\n\r\n"...)
	}
	return out, p, chunked || need > w.srv.cfg.ReadBufferSize
}

// bodyLimit returns the body limit of the route req goes to: the server's,
// unless some route lowers it (RouteOptions.MaxBodyBytes) and req's does.
// Only then is a request routed before it is complete (and again when it
// is served): a server without such routes pays nothing.
func (w *worker) bodyLimit(req *http1.Request) int64 {
	rt := &w.srv.routes
	if !rt.lowLimits {
		return w.limits.MaxBodyBytes
	}
	if l := rt.find(req.Method, req.Path, &w.ctx.vals, &w.scratch); l != nil && l.maxBody > 0 {
		return l.maxBody
	}
	return w.limits.MaxBodyBytes
}

// putIn gives an input buffer back to the budget. The last parsed
// request's slices may point into a grown one and would keep a body-sized
// array alive after the connection is gone, so they are dropped with it.
func (w *worker) putIn(b []byte) {
	if w.bud.putIn(b) {
		w.ctx.req = http1.Request{}
	}
}

// growIn moves c.in into a new buffer of capacity size and reports whether
// it did. When the budget is spent, room goes to the connection that would
// hold less: the connection holding the largest grown input buffer, if
// that is more than four times size, has its request refused (evict) to
// make room, and so on while the budget is short. That is a fair share of
// the budget among the connections receiving large requests (max-min,
// within a factor of four, so that connections of similar size do not
// evict each other in turn: every eviction leaves a buffer to the
// collector, and with a factor of one or two TestHostileMemory's RSS
// went past its bound): however many connections an attacker fills with
// bodies, a body under a quarter of theirs still gets in.
func (w *worker) growIn(c *conn, size int) bool {
	grown, ok := w.bud.grow(c.in, size)
	for !ok {
		v := w.largestHolder(c)
		if v == nil || cap(v.in) <= 4*size {
			return false
		}
		w.evict(v)
		grown, ok = w.bud.grow(c.in, size)
	}
	w.putIn(c.in)
	c.in = grown
	return true
}

// largestHolder returns the connection other than c whose request holds
// the largest grown input buffer, or nil when none does. It looks at every
// connection, which only a spent budget makes it do.
func (w *worker) largestHolder(c *conn) *conn {
	var v *conn
	for _, o := range w.conns {
		if o != nil && o != c && o.state == stateOpen && o.d == nil && cap(o.in) > w.bud.base && (v == nil || cap(o.in) > cap(v.in)) {
			v = o
		}
	}
	return v
}

// evict refuses the request v is receiving, to give its buffer to a
// connection that needs less: 503, and the connection closes after it.
func (w *worker) evict(v *conn) {
	w.putIn(v.in)
	v.in = nil
	select {
	case w.srv.collect <- struct{}{}:
	default: // one is asked for already
	}
	v.closeAfter = true
	// Built in the discard buffer: w.out holds the responses being built.
	msg := w.appendError(w.discard[:0], v, 503, "server busy: memory budget shared", false, false)
	w.send(v, msg)
}

// shrinkIn moves c.in (which fits) back into a default-size buffer.
func (w *worker) shrinkIn(c *conn) {
	b := w.bud.getIn()
	b = b[:copy(b[:len(c.in)], c.in)]
	w.putIn(c.in)
	c.in = b
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
			c.pending = w.bud.setPending(c.pending, out[max(n, 0):])
			c.state = stateWriting
			events := uint32(unix.EPOLLOUT)
			if c.d != nil {
				events |= unix.EPOLLRDHUP // a FIN cancels the deferred request
			}
			w.setEvents(c, events)
			return
		}
		c.lastActive = w.now
	}
	if c.closeAfter && c.d == nil {
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
	c.pending = w.bud.replacePending(c.pending, nil)
	if c.closeAfter && c.d == nil {
		w.linger(c)
		return
	}
	c.state = stateOpen
	events := uint32(unix.EPOLLIN | unix.EPOLLRDHUP)
	if c.dstop {
		events = unix.EPOLLRDHUP // enough queued behind a deferred request
	}
	if !w.setEvents(c, events) {
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
	if c.d != nil {
		w.dropQueue(c, ErrClientGone)
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
