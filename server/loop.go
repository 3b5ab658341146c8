package server

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// The event loop of one worker: wait for events, read the clock, dispatch,
// give queued connections their turn, enforce the timeouts, drain.

// loopRecovering runs the loop, and again after each panic of a handler,
// which recoverTurn answers. Recovering here rather than in respond
// spares every turn a deferred call (~35 of ~1,300 user-space
// instructions per plain request, cachegrind). What a handler's panic
// cuts short: the rest of the turn (recoverTurn finishes it), the rest
// of a runReady pass (recoverTurn keeps its untaken connections queued)
// and the rest of the batch of events, which the next epoll_wait
// reports again (every descriptor is level-triggered). startDrain
// recovers on its own (readRecovering): its work must not be cut short.
// Any other panic is a bug of the server's and goes on.
func (w *worker) loopRecovering() error {
	for {
		if again, err := w.loopOnce(); !again {
			return err
		}
	}
}

// loopOnce runs the loop until it ends (again false) or a handler panics
// (again true, the turn ended by recoverTurn).
func (w *worker) loopOnce() (again bool, err error) {
	defer func() {
		if !w.inHandler {
			return
		}
		if v := recover(); v != nil {
			w.recoverTurn(v)
			again = true
		}
	}()
	return false, w.loop()
}

// readRecovering is read for startDrain, whose own work a handler's panic
// must not cut short.
func (w *worker) readRecovering(c *conn) {
	defer func() {
		if !w.inHandler {
			return
		}
		if v := recover(); v != nil {
			w.recoverTurn(v)
		}
	}()
	w.read(c)
}

// recoverTurn ends the turn a handler's panic (v) interrupted, as
// respond and process would have: the responses before the panicking
// request, its 500, the connection closed after them (handlerPanicked),
// and the turn's requests counted.
func (w *worker) recoverTurn(v any) {
	c := w.ctx.c
	out := w.panickedTurn(v)
	if w.readyPass {
		w.endReadyPass()
	}
	w.send(c, out)
	w.outHigh = max(w.outHigh, len(out))
	w.out = out[:0]
}

// panickedTurn is what respond would have returned for the turn a
// handler's panic (v) interrupted: the responses before the panicking
// request and its 500 (handlerPanicked).
func (w *worker) panickedTurn(v any) []byte {
	c := w.ctx.c
	out := w.handlerPanicked(w.out[:w.turnOut], c, v)
	if c.d != nil {
		out = w.queueTail(c, out) // what follows a deferred request waits for it
	}
	w.requests.Add(uint64(w.turnServed))
	return out
}

func (w *worker) loop() error {
	for {
		n, err := w.wait(w.deferWait(w.waitTimeout()))
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
				w.runFinished()
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
		w.expireDeferred()
		if w.acceptPaused && w.now-w.pausedAt >= int64(acceptRetry) {
			w.resumeAccept()
		}
		if w.now-w.lastScan >= int64(scanInterval) && w.scanNext < 0 {
			w.lastScan = w.now
			w.scanNext = 0 // a timeout pass begins
			w.shrinkBuffers()
		}
		if w.scanNext >= 0 {
			w.scan()
		}
		w.publishMem()
		if w.draining && w.nconns == 0 {
			return nil
		}
	}
}

// waitTimeout is how long the next epoll_wait may sleep, in milliseconds.
func (w *worker) waitTimeout() int {
	switch {
	case len(w.ready) > 0:
		return 0 // connections wait for their next turn
	case w.scanNext >= 0:
		return 0 // the timeout pass goes on after the events that are there
	case w.acceptPaused:
		// Nothing else may ever wake a worker with no connections.
		return int(acceptRetry / time.Millisecond)
	case w.nconns == 0 && !w.draining && len(w.bud.free) == 0 &&
		cap(w.out) <= initialOutSize && cap(w.body) <= maxKeptBodySize && cap(w.scratch) <= maxKeptBodySize:
		return -1 // nothing can time out or shrink; sleep until an event
	}
	return int(scanInterval / time.Millisecond)
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
	if timeout == 0 || w.now-w.busyAt < int64(busyWindow) {
		return epollWaitRaw(w.epfd, w.events, timeout)
	}
	return epollWait(w.epfd, w.events, timeout)
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
		// The head of every 200 response changes only with the date; that of a
		// WriteJSON response (head200JSON) up to its Content-Length value too.
		w.head200 = append(w.head200[:0], statusLines[200]...)
		w.head200 = append(w.head200, w.srv.serverHeader...)
		w.head200 = append(w.head200, w.date...)
		w.head200JSON = append(w.head200JSON[:0], w.head200...)
		w.head200JSON = append(w.head200JSON, "Content-Type: "+jsonType+"\r\nContent-Length: "...)
		w.headJSONLen = -1
	}
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
	// readyDone, not a local: a handler's panic leaves this pass in the
	// middle, and recoverTurn keeps the connections it had not taken.
	w.readyPass = true
	for w.readyDone = 0; w.readyDone < n; {
		r := w.ready[w.readyDone]
		w.readyDone++
		c := w.conns[r.slot]
		if c == nil || c.gen != r.gen {
			continue
		}
		c.queued = false
		if c.state == stateOpen {
			w.process(c)
		}
	}
	w.endReadyPass()
}

// endReadyPass drops the connections a runReady pass took from w.ready.
func (w *worker) endReadyPass() {
	w.ready = w.ready[:copy(w.ready, w.ready[w.readyDone:])]
	w.readyPass = false
}

func (w *worker) enqueue(c *conn) {
	if !c.queued {
		c.queued = true
		w.ready = append(w.ready, readyConn{c.slot, c.gen})
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
	if cap(w.scratch) > maxKeptBodySize {
		w.scratch = make([]byte, 0, initialScratchSize)
	}
	w.outHigh, w.bodyHigh = 0, 0
}

// A timeout pass runs once per scanInterval: a deadline scan over the
// worker's connections costs less than a timer per connection and needs
// no allocation. It is spread over loop turns: each turn examines at most
// scanPerTurn slots and expires at most expirePerTurn connections, then
// waits for events without sleeping (waitTimeout) and goes on. An expiry
// storm (10,000 slowloris connections reaching the header timeout in the
// same second, or 16,000 idle ones) used to be handled in one pass that
// kept the worker from its other connections for 120-220 ms; now no turn
// spends more than expirePerTurn (16) expiries on it, and the storm is spread
// over the turns that follow, with events served between them.
const (
	scanPerTurn   = 4096
	expirePerTurn = 16
)

// scan goes on with the timeout pass from w.scanNext.
func (w *worker) scan() {
	end := min(w.scanNext+scanPerTurn, len(w.conns))
	expired := 0
	for ; w.scanNext < end && expired < expirePerTurn; w.scanNext++ {
		if c := w.conns[w.scanNext]; c != nil && w.expire(c) {
			expired++
		}
	}
	if w.scanNext < len(w.conns) {
		return
	}
	w.scanNext = -1 // the pass is over
	if w.nconns == 0 {
		w.bud.dropFree() // idle: give the spare input buffers back too
	} else {
		w.bud.dropUnused()
	}
}

// expire ends c if one of its timeouts has passed, and reports whether
// it did.
func (w *worker) expire(c *conn) bool {
	cfg := &w.srv.cfg
	switch {
	case c.d != nil:
		return false // its deadline is expireDeferred's
	case c.state == stateLinger:
		if w.now <= c.lingerEnd {
			return false
		}
		w.closeDead(c)
	case c.state == stateWriting:
		if w.now-c.lastActive <= int64(cfg.IdleTimeout) {
			return false
		}
		// The peer has not read its responses for IdleTimeout: what the
		// kernel holds for it would only wait in an orphaned socket.
		setAbortOnClose(c.fd)
		w.closeConn(c)
	case c.reqStart != 0:
		if w.now-c.reqStart <= int64(cfg.HeaderTimeout) {
			return false
		}
		out := w.appendError(w.out[:0], c, 408, "request not received in time", false, false)
		c.closeAfter = true
		w.out = out
		w.send(c, out)
	default:
		if w.now-c.lastActive <= int64(cfg.IdleTimeout) && !w.draining {
			return false
		}
		w.closeDead(c)
	}
	return true
}

// closeDead closes a connection ended by a timeout. When the peer has not
// acknowledged all we sent (a client that stopped reading), a plain close
// would leave the socket orphaned in the kernel with that data until the
// peer reads it or the kernel gives up, which for a peer that keeps its
// window shut can be a long time: 3,000 such sockets held 1.2 GiB of the
// host's TCP memory after their connections were closed. So it resets the
// connection instead (SO_LINGER 0); with nothing unsent, a FIN as usual.
func (w *worker) closeDead(c *conn) {
	if unsent(c.fd) > 0 {
		setAbortOnClose(c.fd)
	}
	w.closeConn(c)
}

// startDrain stops accepting and closes idle connections; connections in
// the middle of a request finish it and are then closed. Every connection
// still in the listen queue is accepted and answered (served with
// "Connection: close" when its request arrives within the grace period, a
// 503 beyond the connection cap) rather than reset by the listener's close.
func (w *worker) startDrain() {
	w.draining = true
	for _, c := range w.conns {
		if c != nil && c.state == stateOpen && len(c.in) == 0 && c.d == nil {
			// Accepted but not read yet (its event may be in the next
			// batch): a request waiting in the socket is served; closing
			// over it would reset the connection.
			w.readRecovering(c)
			if c.fd >= 0 && c.state == stateOpen && len(c.in) == 0 {
				w.closeConn(c)
			}
		}
	}
	w.resumeAccept()
	// At most what the listen queue held (the backlog), so that clients
	// connecting faster than this loop accepts cannot keep it going, and
	// never past a forced stop (Shutdown's context ended).
	for i := range max(w.srv.cfg.Backlog, acceptBatch) {
		if i%acceptBatch == 0 && w.srv.forced.Load() {
			break
		}
		c, more := w.acceptOne()
		if !more {
			break
		}
		if c != nil {
			w.readRecovering(c) // its request is often already there
		}
	}
	w.pauseAccept()
	unix.Close(w.lfd)
	w.lfd = -1
}
