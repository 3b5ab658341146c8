// Package server is a library for HTTP/1.1 JSON workloads that run one
// pinned worker per CPU.
//
// Each worker is an OS thread locked to its goroutine and pinned to one CPU
// with sched_setaffinity. It owns a listening socket in a SO_REUSEPORT group
// whose classic BPF program steers every new connection to the worker of
// the CPU that received it (package reuseport), and runs its own epoll loop
// on raw system calls: accept4, recv, send, epoll_wait. There is no Go
// netpoller, no goroutine per connection, no lock or shared cache line
// between workers, and no allocation per request: requests are parsed in
// place (package http1), responses are appended into the worker's output
// buffer (JSON through package jsonenc), and every response produced from
// one recv goes out in one send (one turn of the connection: see
// Config.MaxRequestsPerTurn).
//
// Routes are patterns with net/http's ServeMux path rules (see
// Server.Handle): "/v1/items/{id}" and Ctx.PathValue, without allocating.
// Query values come decoded (Ctx.QueryValue), the client's address with
// each request (Ctx.RemoteAddr). Every response the server makes on its
// own (404, 405, 413, 500 after a handler's panic, ...) goes through one
// hook, Config.ErrorHandler, so that an API answers in one format. A
// middleware is a Handler that wraps a Handler: it reads what the handler
// did with Ctx.Status and Ctx.ResponseLen, and passes values with
// Ctx.SetValue (see Example_api).
//
// A handler that panics is answered 500 (through the ErrorHandler), its
// connection is closed after the responses before it, and the panic is
// logged with the first frames of its stack; the worker goes on.
//
// What clients can make a worker hold is bounded by Config.MemoryBudget,
// whose documentation states the bound; MemoryInUse reports it.
//
// Handlers run on the worker's thread and must not block: a blocked handler
// stalls every connection of its CPU. A handler that must wait on a
// backend (a database, another service) defers its request instead
// (Ctx.Defer) and returns; the worker goes on with its other connections.
// The backend call runs on a goroutine, with a client whose timeout comes
// from the request's deadline (the Deferred's Context carries it, and is
// cancelled when the client leaves or the server stops), or on a bounded
// pool of goroutines; its result is handed back with Deferred.Finish,
// whose function runs on the worker and writes the response with the
// usual calls:
//
//	s.Handle("GET", "/v1/proxy/{id}", func(c *server.Ctx) {
//		id := string(c.PathValue("id")) // copied: the goroutine outlives the handler
//		d := c.Defer()
//		go func() {
//			req, _ := http.NewRequestWithContext(d.Context(), "GET", backend+"/items/"+id, nil)
//			resp, err := client.Do(req) // ends at the request's deadline
//			...
//			d.Finish(func(c *server.Ctx) { c.Write(body) })
//		}()
//	})
//
// Responses on a connection keep their request order: the responses to
// requests a client pipelined behind a deferred one wait for it (bounded:
// Config.MaxDeferredPerConn, Config.MaxOutputPerTurn).
// A deferred request not finished by its deadline
// (Config.DeferTimeout, RouteOptions.DeferTimeout, Ctx.DeferTimeout) is
// answered 504 through Config.ErrorHandler; beyond
// Config.MaxDeferredPerWorker, Defer answers 503 at once. See
// Example_deferred.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotpath-dev/hotpath/server/reuseport"
)

// Handler serves one request. It runs on the worker's pinned thread; the
// Ctx and every slice it returns are valid only until the handler returns.
type Handler func(*Ctx)

// Server is a set of pinned workers serving the registered handlers.
type Server struct {
	cfg          Config
	routes       router
	serverHeader string // "Server: name\r\n"

	cpus    []int
	port    int
	workers []*worker
	// busyPoll is what the kernel took of the epoll busy-poll parameters,
	// for the ready log (busypoll.go); "" when none were asked for.
	busyPoll   string
	sockPrefer string // preferSockets: what the listeners got
	wg         sync.WaitGroup
	done       chan struct{} // closed when every worker has returned
	ready      chan struct{} // closed when Start has succeeded

	wakeMu     sync.Mutex // orders wake-ups before the eventfds are closed
	wakeClosed bool

	started  atomic.Bool
	draining atomic.Bool
	forced   atomic.Bool
	errMu    sync.Mutex
	err      error // the first worker failure

	// collect asks releaseMemory for a collection now (see evict); it
	// holds at most one request, so that requests from every worker
	// coalesce and none waits.
	collect chan struct{}

	refused *Deferred // what Defer returns when it refuses a request

	// wallClock, when set (by tests), replaces time.Now for the Date
	// header only: timeouts run on the monotonic clock.
	wallClock func() time.Time
}

// New returns a Server for cfg; register handlers, then Start.
func New(cfg Config) *Server {
	cfg.normalize()
	s := &Server{cfg: cfg, done: make(chan struct{}), ready: make(chan struct{}),
		collect: make(chan struct{}, 1), refused: newRefused()}
	s.serverHeader = "Server: " + cfg.ServerName + "\r\n"
	return s
}

// Handle registers h for requests with the given method whose path
// matches pattern. method "" matches every method; a GET handler also
// answers HEAD (the body is dropped, its length kept) unless a HEAD
// pattern matches first.
//
// A pattern is a path, with net/http's ServeMux (Go 1.22) rules for
// wildcards: "/v1/items/{id}" matches one segment, whose value
// Ctx.PathValue("id") returns; a final "{path...}" matches the rest of the
// path (also an empty rest); "{$}" at the end is the trailing slash. Where
// several patterns match, the most specific wins: a literal segment over
// {id}, {id} over {path...}, a method over "". One exception to ServeMux:
// a pattern ending in "/" matches only that path, not the subtree below it
// (write "/static/{file...}" for that). Paths are matched as sent, without
// cleaning; percent-encoded segments are decoded first.
//
// A path that patterns of other methods only match is answered 405 with an
// Allow header, and one that no pattern matches 404 (see
// Config.ErrorHandler). Handle panics on a malformed pattern, and on one
// that duplicates or conflicts with one registered before (matches some
// of the same requests, neither being more specific), naming both; and
// when called after Start.
func (s *Server) Handle(method, pattern string, h Handler) {
	s.HandleWith(method, pattern, RouteOptions{}, h)
}

// RouteOptions are a route's own settings (HandleWith).
type RouteOptions struct {
	// MaxBodyBytes lowers Config.MaxBodyBytes for this route; 0 (or a
	// value above the server's) is the server's. A request whose
	// Content-Length exceeds it is answered 413 and the connection closed
	// as soon as its head is in, before any of the body is buffered; a
	// chunked body, as soon as what arrived of it exceeds what the limit
	// allows (its decoded length is checked once it is complete).
	MaxBodyBytes int64
	// DeferTimeout is the deadline of this route's deferred requests (see
	// Ctx.Defer); 0 is Config.DeferTimeout.
	DeferTimeout time.Duration
}

// HandleWith is Handle with the route's own options.
func (s *Server) HandleWith(method, pattern string, o RouteOptions, h Handler) {
	if s.started.Load() {
		panic("server: Handle after Start")
	}
	if h == nil {
		panic("server: nil handler for " + pattern)
	}
	p, err := parsePattern(method, pattern)
	if err != nil {
		panic(fmt.Sprintf("server: pattern %q: %v", pattern, err))
	}
	l := &leaf{pat: p, h: h, deferTimeout: o.DeferTimeout}
	if o.MaxBodyBytes > 0 && o.MaxBodyBytes < s.cfg.MaxBodyBytes {
		l.maxBody = o.MaxBodyBytes
	}
	if err := s.routes.add(l); err != nil {
		panic("server: " + err.Error())
	}
}

// Port returns the port the workers listen on (useful with Config.Port 0).
func (s *Server) Port() int { return s.port }

// CPUs returns the worker CPUs in listener order.
func (s *Server) CPUs() []int { return s.cpus }

// Requests returns the number of requests answered so far. The counters
// are per worker and updated once per batch, so it may lag by one batch.
func (s *Server) Requests() uint64 {
	var n uint64
	for _, w := range s.workers {
		n += w.requests.Load()
	}
	return n
}

// WorkerAccepts is what one worker counted of the connections it accepted.
type WorkerAccepts struct {
	CPU      int    // the worker's CPU
	Accepted uint64 // connections accepted (refused ones beyond the cap too)
	// Foreign counts the accepted connections that the kernel received on
	// another CPU: their SO_INCOMING_CPU, the CPU whose softirq took the
	// handshake's last packet, is not the worker's. Steering sends each
	// new connection to the worker of the CPU that received it, so this
	// stays 0 while the NIC (RSS, RPS) delivers each flow to one CPU that
	// runs a worker; a connection received on a CPU without one (not in
	// Config.CPUs) counts here, and so does every connection of a server
	// whose steering is broken.
	Foreign uint64
}

// Accepts returns each worker's counts, in listener order (CPUs), for a
// workload's metrics: a test outside the machine reads locality from them
// without asking every connection. Each count is exact when read.
func (s *Server) Accepts() []WorkerAccepts {
	out := make([]WorkerAccepts, len(s.workers))
	for i, w := range s.workers {
		out[i] = WorkerAccepts{CPU: w.cpu, Accepted: w.accepted.Load(), Foreign: w.foreign.Load()}
	}
	return out
}

// MemoryInUse returns the bytes of buffers the workers hold: connection
// input buffers (grown ones included), pending output, and each worker's
// own output, body and discard buffers. See Config.MemoryBudget for the
// bound. Each worker updates its figure once per loop iteration.
func (s *Server) MemoryInUse() int64 {
	var n int64
	for _, w := range s.workers {
		n += w.mem.Load()
	}
	return n
}

// Start creates the listeners in CPU order, starts one pinned worker per
// CPU and returns once every worker is in its loop. It writes the ready
// line to Config.Log.
func (s *Server) Start() (err error) {
	if s.started.Swap(true) {
		return errors.New("server: already started")
	}
	running := false
	defer func() {
		if err != nil && !running {
			close(s.done) // nothing to wait for
		}
	}()
	cpus := s.cfg.CPUs
	if len(cpus) == 0 {
		var err error
		if cpus, err = affinityCPUs(); err != nil {
			return err
		}
	}
	s.cpus = cpus
	var addr netip.Addr
	if s.cfg.Addr != "" {
		a, err := netip.ParseAddr(s.cfg.Addr)
		if err != nil {
			return fmt.Errorf("server: listen address: %w", err)
		}
		addr = a
	}
	fds, port, err := reuseport.Listen(cpus, reuseport.Options{
		Addr: addr, Port: s.cfg.Port, Backlog: s.cfg.Backlog,
		RecvBuf: s.cfg.RecvBuf, SendBuf: max(s.cfg.SendBuf, 0), BusyPoll: s.cfg.BusyPoll, NoDelay: s.cfg.NoDelay,
	})
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	s.port = port
	s.preferSockets(fds)
	fdNote := s.sizeFDTable(len(cpus)) // before the accepts need it (fdtable.go)

	ready := make(chan error, len(cpus))
	for i, cpu := range cpus {
		w, err := newWorker(s, i, cpu, fds[i]) // closes fds[i] on error
		if err != nil {
			for _, fd := range fds[i+1:] {
				unix.Close(fd)
			}
			for _, w := range s.workers {
				w.closeFDs()
				unix.Close(w.evfd)
			}
			s.workers = nil
			return err
		}
		s.workers = append(s.workers, w)
	}
	running = true
	reserveIdleP(len(s.workers))
	s.wg.Add(len(s.workers))
	for _, w := range s.workers {
		go w.run(ready)
	}
	go s.releaseMemory()
	go func() {
		s.wg.Wait()
		s.wakeMu.Lock()
		for _, w := range s.workers {
			unix.Close(w.evfd)
		}
		s.wakeClosed = true
		s.wakeMu.Unlock()
		close(s.done)
	}()
	for range s.workers {
		if err := <-ready; err != nil {
			s.abort()
			<-s.done
			return err
		}
	}
	s.logReady(addr)
	if fdNote != "" {
		io.WriteString(s.cfg.Log, fdNote)
	}
	close(s.ready)
	return nil
}

// logReady writes the ready line, after what the kernel took of the
// busy-poll parameters when any were asked for.
func (s *Server) logReady(addr netip.Addr) {
	if s.busyPoll != "" {
		fmt.Fprintf(s.cfg.Log, "hotpath: epoll busy polling: %s%s\n", s.busyPoll, s.sockPrefer)
	}
	fmt.Fprintf(s.cfg.Log, "hotpath: ready: %d workers on cpus %s listening on %s\n",
		len(s.cpus), cpuString(s.cpus), netip.AddrPortFrom(reuseport.Resolve(addr), uint16(s.port)))
}

// releaseThreshold is how far MemoryInUse must fall from its peak before
// releaseMemory gives the memory back to the system.
const releaseThreshold = 4 << 20

// collectEvery is the shortest time between two collections asked for by
// evictions (Server.collect).
const collectEvery = 100 * time.Millisecond

// releaseMemory returns buffer memory to the system after a spike. The
// workers drop grown buffers as soon as their request is done, but the Go
// heap keeps freed memory until the next collection, and a server that
// allocates nothing per request may not collect for minutes (the runtime
// forces one every two); the scavenger then returns pages slowly. So once
// a second, when MemoryInUse has fallen by releaseThreshold from its peak
// since the last release, it runs debug.FreeOSMemory: a collection, then
// every free page back to the system. The peak is the one since the last
// release, not that of the last second: a decline slower than
// releaseThreshold per second (4,000 connections' buffers closed at 200
// a second) otherwise never triggered one, and RSS stayed at its peak.
// The pause is that of one collection of a small heap, and it happens only
// after a fall, never per request.
func (s *Server) releaseMemory() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var peak int64 // the highest sum since the last release
	for {
		select {
		case <-s.done:
			return
		case <-s.collect:
			// Evicted buffers are garbage a body's size each: collect
			// them now rather than let the heap grow on them, at most
			// every collectEvery.
			debug.FreeOSMemory()
			peak = 0
			time.Sleep(collectEvery)
			continue
		case <-t.C:
		}
		var top, now int64
		for _, w := range s.workers {
			m := w.mem.Load()
			top += w.memPeak.Swap(m)
			now += m
		}
		peak = max(peak, top)
		if peak-now >= releaseThreshold {
			debug.FreeOSMemory()
			peak = now
		}
	}
}

// Ready is closed once Start has succeeded.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// abort stops every worker at once.
func (s *Server) abort() {
	s.forced.Store(true)
	s.draining.Store(true)
	s.wakeAll()
}

func (s *Server) wakeAll() {
	s.wakeMu.Lock()
	defer s.wakeMu.Unlock()
	if s.wakeClosed {
		return
	}
	for _, w := range s.workers {
		w.wake()
	}
}

func (s *Server) fail(err error) {
	s.errMu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.errMu.Unlock()
	s.abort()
}

// Done is closed when every worker has stopped.
func (s *Server) Done() <-chan struct{} { return s.done }

// Err returns the first worker failure, if any.
func (s *Server) Err() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

// Shutdown stops accepting, lets every worker finish the requests it has
// begun (responses carry "Connection: close"), closes idle connections, and
// returns when all workers are done. When ctx ends first, the remaining
// connections are closed at once and ctx's error is returned.
func (s *Server) Shutdown(ctx context.Context) error {
	if !s.started.Load() {
		return nil
	}
	s.draining.Store(true)
	s.wakeAll()
	select {
	case <-s.done:
		return s.Err()
	case <-ctx.Done():
		s.abort()
		<-s.done
		return ctx.Err()
	}
}

// ListenAndServe starts the server, serves until ctx is done (for example
// by signal.NotifyContext on SIGTERM) and then drains within
// Config.GracePeriod. A drain cut short by the grace period is reported in
// the log but is not an error: the process should still exit 0.
func (s *Server) ListenAndServe(ctx context.Context) error {
	if err := s.Start(); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-s.done:
		return s.Err()
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.GracePeriod)
	defer cancel()
	start := time.Now()
	if err := s.Shutdown(sctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			fmt.Fprintf(s.cfg.Log, "hotpath: grace period %v over, closed remaining connections\n", s.cfg.GracePeriod)
			return nil
		}
		return err
	}
	fmt.Fprintf(s.cfg.Log, "hotpath: drained in %v, %d requests served\n", time.Since(start).Round(time.Millisecond), s.Requests())
	return nil
}

// affinityCPUs lists the CPUs in the process's affinity mask.
func affinityCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("server: sched_getaffinity: %w", err)
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		return nil, errors.New("server: empty affinity mask")
	}
	return cpus, nil
}

// reserveIdleP makes sure the runtime has a processor (P) beyond one per
// worker. A worker holds its P while it runs, which under load is all the
// time; when every P is held, a worker that blocks in epoll_wait has its P
// taken away by sysmon after 20 µs (handed to another thread, woken with a
// futex, only to find nothing to do), and because that counts as work done,
// sysmon keeps polling every 20 µs instead of backing off to 10 ms. On the
// worker's CPU that was measured at ~1,700 sysmon wake-ups and ~1,400
// involuntary context switches of the worker per second, and a fifth of the
// process's CPU time. With one P idle, sysmon leaves a P in a short system
// call alone and backs off. GOMAXPROCS is only ever raised, never lowered:
// the process belongs to the server (it runs as the appliance's workload).
func reserveIdleP(workers int) {
	if runtime.GOMAXPROCS(0) < workers+1 {
		runtime.GOMAXPROCS(workers + 1)
	}
}

// pinThread locks the calling goroutine to its thread and the thread to cpu.
// The goroutine never unlocks: when it returns, the runtime ends the
// thread instead of reusing one whose affinity was narrowed.
func pinThread(cpu int) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("server: pin thread to cpu %d: %w", cpu, err)
	}
	return nil
}
