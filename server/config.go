package server

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/hotpath-dev/hotpath/server/cpulist"
)

// Config is everything a Server needs. DefaultConfig gives the production
// defaults; ConfigFromEnv applies the workload contract (HOTPATH_CPUS,
// HOTPATH_PORT); RegisterFlags lets a command line override both.
type Config struct {
	// CPUs lists the CPUs to run one worker on each, in the order their
	// listeners join the SO_REUSEPORT group. Empty means every CPU in the
	// process's affinity mask.
	CPUs []int
	// Addr is the IP address to listen on, IPv4 or IPv6 ("::1",
	// "fe80::1%eth0"). "" and "::" are both families on one dual-stack
	// socket per CPU (see reuseport.DualStack); "0.0.0.0" is IPv4 only.
	Addr string
	Port int // TCP port; 0 picks a free one (see Server.Port)

	Backlog  int  // listen backlog per worker (the kernel caps it at net.core.somaxconn)
	NoDelay  bool // TCP_NODELAY: a response goes out at once, never held by Nagle
	BusyPoll int  // SO_BUSY_POLL in microseconds; 0 leaves the net.core.busy_read default
	// PreferBusyPoll asks each worker's epoll instance to prefer busy
	// polling over the NIC's interrupts (EPIOCSPARAMS, Linux 6.9+:
	// busy_poll_usecs = BusyPoll, or net.core.busy_poll when 0;
	// prefer_busy_poll = 1) and sets SO_PREFER_BUSY_POLL on the sockets.
	// It pays only with the queue's napi_defer_hard_irqs and
	// gro_flush_timeout set (the init's nic.defer_hard_irqs and
	// nic.gro_flush_timeout). On an older kernel the server logs that and
	// runs with plain epoll. See server/busypoll.
	PreferBusyPoll bool
	// BusyPollBudget is the packets per epoll busy poll (EPIOCSPARAMS
	// busy_poll_budget); 0 is the kernel's default (8). Above 64 the
	// kernel asks for CAP_NET_ADMIN.
	BusyPollBudget int
	RecvBuf        int // SO_RCVBUF bytes; 0 keeps kernel autotuning
	// SendBuf is SO_SNDBUF in bytes (the kernel doubles it for its own
	// overhead); 0 is the default of DefaultSendBuf, negative keeps the
	// kernel's autotuning. It bounds the kernel memory a connection whose
	// peer does not read can hold: with autotuning (tcp_wmem's maximum, 4
	// MiB by default) each such connection held ~410 KB, and 3,000 of them
	// 1.2 GiB of the host's TCP memory. See MemoryBudget for the bound.
	SendBuf int

	// ReadBufferSize is each connection's input buffer. It bounds how many
	// pipelined requests one recv can take in; it is raised to
	// MaxHeaderBytes+1 if smaller. A body larger than what fits grows the
	// buffer of that connection, up to MaxHeaderBytes+MaxBodyBytes.
	ReadBufferSize    int
	MaxHeaderBytes    int   // request line + header fields; more is 431
	MaxBodyBytes      int64 // Content-Length limit; more is 413
	MaxConnsPerWorker int   // connections beyond it get 503 and are closed

	// MemoryBudget bounds, per worker, the buffer memory that clients can
	// make it hold beyond each connection's input buffer: input buffers
	// grown for large bodies, and response bytes a client has not read
	// yet. A body that would take the worker past it gets 503 and a close;
	// while it is spent, each connection gets one request per turn, so a
	// client that does not read makes the worker hold one response at
	// most.
	//
	// The budget is charged for what connections actually hold: an input
	// buffer grows as its body arrives (four times when full, never beyond
	// the request), so a connection holds at most four times what it sent.
	// When it is spent, the connection holding the largest grown buffer
	// yields to one that would hold less than a quarter of it (its request
	// gets 503): a fair share, so that no group of connections filling
	// bodies can lock the others out of it.
	//
	// What a worker holds (Server.MemoryInUse) stays under
	//
	//	conns × (ReadBufferSize + R) + MemoryBudget + MaxOutputPerTurn + R
	//	  + 256 × ReadBufferSize (spare input buffers) + 150 KiB (the worker's own)
	//
	// where R is the largest response a handler writes. With the defaults
	// (16,384 connections, 16 KiB, 64 MiB, 32 KiB; /json's R is 170 bytes)
	// that is 327 MiB per worker at the connection cap, and 72 MiB with
	// 200 connections whatever they send. Free memory goes back to the
	// system (see MemoryInUse): the process's RSS stays under its idle
	// size plus (1 + GOGC/100) times the sum over the workers, the factor
	// being the garbage that waits for the next collection.
	//
	// The kernel holds, besides, each connection's socket buffers: at most
	// 2 × SendBuf of responses the peer has not read (32 KiB at the
	// default 16 KiB: 512 MiB per worker at the 16,384 cap, against ~6.5
	// GB with autotuning), and what the peer sent that the worker has not
	// read yet, which the receive window bounds (tcp_rmem's default, 128
	// KiB, or 2 × RecvBuf; more for a connection whose earlier uploads let
	// autotuning grow it). Measured on loopback: 3,000 connections that
	// pipelined without end and never read took the host's TCP memory up
	// by 188-215 KiB each, both ends and the server's full receive queues
	// included; 3,000 that send 400 requests and never read the answers
	// (TestNonReadingKernelMemory) by 18-31 KiB each. A
	// connection closed by a timeout with output unsent is reset, not
	// closed with a FIN: its memory is freed at once instead of waiting in
	// an orphaned socket.
	MemoryBudget int64
	// MaxRequestsPerTurn and MaxOutputPerTurn end a connection's turn:
	// after that many requests, or once its responses of this turn reach
	// that many bytes, the worker moves on to other connections and comes
	// back to this one's remaining requests after them. They keep one
	// deep pipeline from starving the other connections of its CPU, and
	// bound what a client that does not read can make us hold.
	MaxRequestsPerTurn int
	MaxOutputPerTurn   int

	// IdleTimeout closes a keep-alive connection that sends nothing, and one
	// whose pending response the peer does not read.
	IdleTimeout time.Duration
	// HeaderTimeout bounds how long a started request (and a new
	// connection's first request) may take to arrive in full; 408 after it.
	HeaderTimeout time.Duration
	// GracePeriod bounds the drain on Shutdown: after it, open connections
	// are closed.
	GracePeriod time.Duration

	ServerName string    // the Server header; "" is "hotpath"
	Log        io.Writer // the ready line and errors; nil is os.Stderr

	// ErrorHandler renders every response the server makes on its own,
	// so that an API answers in one format: 404 and 405 (no route; the
	// 405 already carries its Allow header), 500 (a handler panicked),
	// and the refusals made before or without a route: 400, 413, 414,
	// 431, 501, 505 (the request cannot be taken), 408 (not received in
	// time), 503 (memory budget or connection cap; beyond the cap plus
	// the 1,024 connections allowed to linger after their 503, a fixed
	// 503 is written straight to the socket). 504 is reserved for
	// deferred responses. msg is the default response's text (without
	// its newline), e.g. "not found" or "header fields too large".
	//
	// It runs on the worker, like a handler, with c.Status() == code;
	// it writes the body and headers with c's methods (WriteJSON, Write,
	// SetContentType, AddHeader). It cannot change the status, nor keep
	// open a connection the server closes (everything but 404 and 405).
	// Before or without a parsed request (408, 503, 431 and the other
	// refusals, which carry what was parsed, if anything), c's request
	// methods may return nil; RemoteAddr always works. When it panics,
	// or writes more than MaxErrorResponse bytes, the default response is
	// sent and the reason logged. nil: text/plain, msg and a newline.
	ErrorHandler ErrorHandler

	// DeferTimeout is the deadline of a deferred request (Ctx.Defer),
	// from the moment it is deferred, unless its route
	// (RouteOptions.DeferTimeout) or the call (Ctx.DeferTimeout) sets
	// another: the request is then answered 504 (through ErrorHandler)
	// and its context cancelled.
	DeferTimeout time.Duration
	// MaxDeferredPerWorker bounds the requests a worker holds deferred;
	// beyond it (or beyond MemoryBudget) Defer answers 503 at once. Each
	// holds about 5 KiB (its own Ctx and request, two contexts, a timer)
	// plus its request bytes, counted in MemoryBudget.
	MaxDeferredPerWorker int
	// MaxDeferredPerConn bounds the deferred requests of one connection
	// (a client pipelining); beyond it Defer answers 503 at once, in the
	// connection's order. The responses to requests behind a deferred one
	// wait for it, up to MaxOutputPerTurn bytes; beyond that the
	// connection is not read until they can go.
	MaxDeferredPerConn int
}

// DefaultSendBuf is the default SO_SNDBUF: what a connection whose peer
// does not read can make the kernel hold is 2 × 16 KiB. A /json pipeline
// 16 deep is 2.7 KB of responses per send, and a response larger than the
// buffer goes out in pieces as the peer acknowledges them (at 32 KiB per
// round trip: 320 MB/s per connection at a 100 µs RTT). On /json it
// costs nothing measurable: make bench with BASELINE=HEAD
// BASELINE_ARGS="-sndbuf -1" (the same build with autotuning), 3 rounds
// on a loaded 2-core machine, gave server CPU per request 1.25x the C
// floor plain and 1.34x pipelined at 16 KiB, 1.36x and 1.51x with
// autotuning (noise, not a gain).
const DefaultSendBuf = 16 << 10

// DefaultConfig returns the production defaults.
func DefaultConfig() Config {
	return Config{
		Port:               8080,
		Backlog:            4096,
		NoDelay:            true,
		SendBuf:            DefaultSendBuf,
		ReadBufferSize:     16 << 10,
		MaxHeaderBytes:     8 << 10,
		MaxBodyBytes:       1 << 20,
		MaxConnsPerWorker:  16384,
		MemoryBudget:       64 << 20,
		MaxRequestsPerTurn: 64,
		MaxOutputPerTurn:   32 << 10,
		IdleTimeout:        60 * time.Second,
		HeaderTimeout:      10 * time.Second,
		GracePeriod:        5 * time.Second,
		ServerName:         "hotpath",

		DeferTimeout:         10 * time.Second,
		MaxDeferredPerWorker: 4096,
		MaxDeferredPerConn:   16,
	}
}

// ConfigFromEnv returns DefaultConfig with the workload contract applied:
// HOTPATH_CPUS (a CPU list such as "0-3" or "0,2") and HOTPATH_PORT. getenv
// is os.Getenv in production and a map lookup in tests.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := DefaultConfig()
	if v := getenv("HOTPATH_CPUS"); v != "" {
		cpus, err := ParseCPUList(v)
		if err != nil {
			return c, fmt.Errorf("HOTPATH_CPUS: %w", err)
		}
		c.CPUs = cpus
	}
	if v := getenv("HOTPATH_PORT"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 0 || p > 65535 {
			return c, fmt.Errorf("HOTPATH_PORT %q: not a port", v)
		}
		c.Port = p
	}
	// HOTPATH_PREFER_BUSY_POLL=1: the image asks for step 10's workload
	// half (nic.prefer_busy_poll=on), and the init set the NIC's NAPI
	// interrupt deferral that the epoll instances' preference completes
	// (init/napi.WorkloadEnv); -prefer-busy-poll overrides it.
	if v := getenv("HOTPATH_PREFER_BUSY_POLL"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("HOTPATH_PREFER_BUSY_POLL %q: not a boolean", v)
		}
		c.PreferBusyPoll = b
	}
	return c, nil
}

// RegisterFlags defines flags on fs that override c's fields; call it
// before fs.Parse with c already holding the defaults to show.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.Func("cpus", "CPU list to run one worker on each, e.g. 0-3 or 0,2 (default: the affinity mask, or $HOTPATH_CPUS)"+cpuDefault(c.CPUs), func(s string) error {
		cpus, err := ParseCPUList(s)
		if err != nil {
			return err
		}
		c.CPUs = cpus
		return nil
	})
	fs.StringVar(&c.Addr, "addr", c.Addr, "IP address to listen on, IPv4 or IPv6 (default both families: [::] with IPv4 mapped)")
	fs.IntVar(&c.Port, "port", c.Port, "TCP port (default $HOTPATH_PORT or 8080; 0 picks one)")
	fs.IntVar(&c.Backlog, "backlog", c.Backlog, "listen backlog per worker")
	fs.BoolVar(&c.NoDelay, "nodelay", c.NoDelay, "set TCP_NODELAY")
	fs.IntVar(&c.BusyPoll, "busy-poll", c.BusyPoll, "SO_BUSY_POLL microseconds per socket (0: off / sysctl default)")
	fs.BoolVar(&c.PreferBusyPoll, "prefer-busy-poll", c.PreferBusyPoll, "epoll prefers busy polling over NIC interrupts (EPIOCSPARAMS, Linux 6.9+; pair with the NIC's napi_defer_hard_irqs)")
	fs.IntVar(&c.BusyPollBudget, "busy-poll-budget", c.BusyPollBudget, "packets per busy poll (0: kernel default 8; above 64 needs CAP_NET_ADMIN)")
	fs.IntVar(&c.RecvBuf, "rcvbuf", c.RecvBuf, "SO_RCVBUF bytes (0: kernel autotuning)")
	fs.IntVar(&c.SendBuf, "sndbuf", c.SendBuf, "SO_SNDBUF bytes (-1: kernel autotuning; it bounds the kernel memory of a peer that does not read)")
	fs.IntVar(&c.ReadBufferSize, "read-buffer", c.ReadBufferSize, "per-connection input buffer bytes")
	fs.IntVar(&c.MaxHeaderBytes, "max-header-bytes", c.MaxHeaderBytes, "request line + headers limit (431 beyond)")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", c.MaxBodyBytes, "request body limit (413 beyond)")
	fs.IntVar(&c.MaxConnsPerWorker, "max-conns", c.MaxConnsPerWorker, "connections per worker (503 beyond)")
	fs.Int64Var(&c.MemoryBudget, "memory-budget", c.MemoryBudget, "bytes per worker for large bodies and unread responses (503 for bodies beyond)")
	fs.IntVar(&c.MaxRequestsPerTurn, "max-requests-per-turn", c.MaxRequestsPerTurn, "requests of one connection served before the others get a turn")
	fs.IntVar(&c.MaxOutputPerTurn, "max-output-per-turn", c.MaxOutputPerTurn, "response bytes of one connection per turn before the others get one")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", c.IdleTimeout, "close connections idle this long")
	fs.DurationVar(&c.HeaderTimeout, "header-timeout", c.HeaderTimeout, "time allowed for a request to arrive in full (408 after)")
	fs.DurationVar(&c.GracePeriod, "grace", c.GracePeriod, "drain time on SIGTERM/SIGINT")
	fs.StringVar(&c.ServerName, "server-name", c.ServerName, "Server header value")
}

func cpuDefault(cpus []int) string {
	if len(cpus) == 0 {
		return ""
	}
	return " (now " + cpuString(cpus) + ")"
}

func cpuString(cpus []int) string { return cpulist.Format(cpus) }

// ParseCPUList parses the workload contract's CPU list ("0-3,6,8-9";
// package cpulist): the order is kept (it is the listener order, and the
// init routes NIC queue i to the i-th CPU), a CPU listed twice is an
// error, and so is an empty list.
func ParseCPUList(s string) ([]int, error) {
	cpus, err := cpulist.Parse(s)
	if err == nil && len(cpus) == 0 {
		err = fmt.Errorf("cpu list %q: no cpu", s)
	}
	return cpus, err
}

func (c *Config) normalize() {
	d := DefaultConfig()
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = d.MaxHeaderBytes
	}
	if c.MaxBodyBytes < 0 {
		c.MaxBodyBytes = 0
	}
	if c.ReadBufferSize <= c.MaxHeaderBytes {
		c.ReadBufferSize = c.MaxHeaderBytes + 1
	}
	if c.MaxConnsPerWorker <= 0 {
		c.MaxConnsPerWorker = d.MaxConnsPerWorker
	}
	if c.SendBuf == 0 {
		c.SendBuf = d.SendBuf
	}
	if c.MemoryBudget <= 0 {
		c.MemoryBudget = d.MemoryBudget
	}
	if c.MaxRequestsPerTurn <= 0 {
		c.MaxRequestsPerTurn = d.MaxRequestsPerTurn
	}
	if c.MaxOutputPerTurn <= 0 {
		c.MaxOutputPerTurn = d.MaxOutputPerTurn
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = d.IdleTimeout
	}
	if c.HeaderTimeout <= 0 {
		c.HeaderTimeout = d.HeaderTimeout
	}
	if c.GracePeriod <= 0 {
		c.GracePeriod = d.GracePeriod
	}
	if c.DeferTimeout <= 0 {
		c.DeferTimeout = d.DeferTimeout
	}
	if c.MaxDeferredPerWorker <= 0 {
		c.MaxDeferredPerWorker = d.MaxDeferredPerWorker
	}
	if c.MaxDeferredPerConn <= 0 {
		c.MaxDeferredPerConn = d.MaxDeferredPerConn
	}
	if c.ServerName == "" {
		c.ServerName = d.ServerName
	}
	if c.Log == nil {
		c.Log = os.Stderr
	}
}
