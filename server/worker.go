package server

import (
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotpath-dev/hotpath/server/http1"
)

// A worker's code is split by job: this file holds the worker itself
// (creation, run, published figures); loop.go the event loop, timeouts and
// drain; conn.go the connection slots and accept; exchange.go the request
// path of a connection; budget.go the accounting of connection buffers;
// syscall.go the raw system calls.

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
	// scratch starts at the size of the longest request target (the
	// default MaxHeaderBytes) and is cut back to it.
	initialScratchSize = 8 << 10
	// lingerOverflow is how many connections beyond MaxConnsPerWorker may
	// linger after their 503; beyond it, a refused connection is closed
	// at once.
	lingerOverflow = 1024
)

// worker is one CPU's event loop. Every field is touched only by its own
// thread, except requests (read by Server.Requests), mem and memPeak (read
// by Server.MemoryInUse and releaseMemory) and evfd (written by
// Server.wake).
type worker struct {
	srv    *Server
	idx    int
	cpu    int
	lfd    int // the listener; -1 once a drain closed it
	epfd   int
	evfd   int
	limits http1.Limits

	// The event loop (loop.go).
	events   []unix.EpollEvent
	ready    []readyConn // connections with requests left after their turn
	epoch    time.Time   // w.now is monotonic nanoseconds since epoch
	now      int64
	lastScan int64 // when the last timeout pass began
	scanNext int   // the next slot the timeout pass examines; -1 between passes
	busyAt   int64 // w.now when epoll_wait last returned events
	draining bool

	// Connections and accept (conn.go).
	slots
	acceptPaused  bool  // listener out of the epoll set after EMFILE and the like
	pausedAt      int64 // when; accepts resume acceptRetry later
	acceptFailing bool  // the pause has been logged

	// Connection buffers (budget.go), and what the worker publishes of them.
	bud     budget
	mem     atomic.Int64 // bud.held plus the worker's own buffers, for Server.MemoryInUse
	memPeak atomic.Int64 // the highest mem since Server.releaseMemory last looked

	// The request path (exchange.go, ctx.go).
	out  []byte // responses of the batch being processed
	body []byte // response body of the request being handled
	// The largest out and body used since the last scan: a buffer a large
	// response grew is cut back once a second passed without such a
	// response (shrinkBuffers), not after every one, which would allocate
	// per request for a handler whose responses are all large.
	outHigh, bodyHigh int
	discard           []byte // where lingering connections' input goes
	ctx               Ctx
	inHandler         bool // a handler is running (serve): its panic is recovered by the loop (recoverTurn)
	// The turn a handler's panic interrupts, for recoverTurn: what
	// respond had served (the panicking request included) and the length
	// of its output before that request's response, in w.out (serve keeps
	// w.out on respond's output buffer when an append grew it).
	turnServed, turnOut int
	// A runReady pass: in one, and how many of w.ready it has taken.
	readyPass   bool
	readyDone   int
	dateSec     int64
	date        []byte      // "Date: ...\r\n", re-rendered when the second changes
	head200     []byte      // status line, Server and Date of a 200, with date
	head200JSON []byte      // head200, the JSON Content-Type and "Content-Length: "
	route       *exactRoute // the exact route of the last request: pipelines repeat one path
	// scratch holds what requests decode (Ctx.QueryValue, escaped path
	// segments); emptied per request, cut back like body (shrinkBuffers).
	scratch []byte
	allow   []byte // the Allow value of the last 405
	// The peer's address from accept4 (conn.remote).
	sa    unix.RawSockaddrAny
	salen uint32
	// headJSON is the whole head of the commonest response: a 200 from
	// WriteJSON with no added header, to an HTTP/1.1 request that keeps
	// the connection, for a body of headJSONLen bytes (-1: none rendered
	// since the date changed). A handler's bodies usually have one length
	// or a few, so the head is rendered once per length and second.
	headJSON    []byte
	headJSONLen int

	// Deferred requests (deferred.go).
	deferrals

	requests atomic.Uint64
	// accepted counts the connections accept4 returned, foreign those of
	// them the kernel received on another CPU than the worker's (their
	// SO_INCOMING_CPU): what Server.Accepts reports.
	accepted, foreign atomic.Uint64
	_                 [64]byte // keep other workers' data off this cache line
}

func newWorker(s *Server, idx, cpu, lfd int) (*worker, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		unix.Close(lfd)
		return nil, fmt.Errorf("server: worker %d: epoll_create1: %w", cpu, err)
	}
	if err := s.setEpollBusyPoll(epfd); err != nil {
		unix.Close(lfd)
		unix.Close(epfd)
		return nil, fmt.Errorf("server: worker %d: %w", cpu, err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(lfd)
		unix.Close(epfd)
		return nil, fmt.Errorf("server: worker %d: eventfd: %w", cpu, err)
	}
	w := &worker{
		srv: s, idx: idx, cpu: cpu, lfd: lfd, epfd: epfd, evfd: evfd,
		limits:   http1.Limits{MaxHeaderBytes: s.cfg.MaxHeaderBytes, MaxBodyBytes: s.cfg.MaxBodyBytes},
		events:   make([]unix.EpollEvent, maxEvents),
		bud:      newBudget(&s.cfg),
		out:      make([]byte, 0, initialOutSize),
		body:     make([]byte, 0, initialBodySize),
		scratch:  make([]byte, 0, initialScratchSize),
		discard:  make([]byte, s.cfg.ReadBufferSize),
		date:     make([]byte, 0, 64),
		scanNext: -1,
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

// wake interrupts epoll_wait; the Server calls it with wakeMu held,
// Deferred.Finish within finInflight (see stopDeferred).
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
	if err := w.loopRecovering(); err != nil {
		w.srv.fail(err)
	}
	w.stopDeferred()
	for _, c := range w.conns {
		if c != nil {
			w.closeConn(c)
		}
	}
	w.publishMem()
}

// publishMem makes the worker's memory figure visible to MemoryInUse.
func (w *worker) publishMem() {
	m := w.bud.held + int64(cap(w.out)+cap(w.body)+cap(w.discard)+cap(w.scratch))
	if w.mem.Load() != m {
		w.mem.Store(m)
		if m > w.memPeak.Load() {
			w.memPeak.Store(m)
		}
	}
}
