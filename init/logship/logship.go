// Package logship sends the appliance's log lines (the workload's stdout
// and stderr, the init's log lines and events) to a remote syslog collector
// as RFC 5424 messages: over UDP one message per datagram (RFC 5426), over
// TCP with octet-counting framing (RFC 6587 section 3.4.1).
//
// The console stays the primary log; shipping is a copy. It must never slow
// the workload or the init down, so Send only appends to a bounded buffer
// (a byte budget) under a short lock and returns; a single goroutine (Run)
// empties it. When the buffer is full the new message is dropped and
// counted: the buffer then holds the oldest undelivered messages, which is
// what an operator needs most after an outage of the collector (the boot,
// the first failure). A message whose write failed is sent again on the
// next connection, so delivery is at least once over TCP. Connection
// failures are retried with exponential back-off.
package logship

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Facilities and severities (RFC 5424 section 6.2.1).
const (
	FacilityUser   = 1
	FacilityDaemon = 3

	SeverityCrit    = 2
	SeverityErr     = 3
	SeverityWarning = 4
	SeverityNotice  = 5
	SeverityInfo    = 6
)

// Message is one log message.
type Message struct {
	Time     time.Time
	Facility int
	Severity int
	App      string // APP-NAME, e.g. "hotpath-init"
	ProcID   string // PROCID, "" for none
	MsgID    string // MSGID, e.g. "event"; "" for none
	Text     string
}

// Remote is a parsed log.remote value.
type Remote struct {
	Network string // "udp" or "tcp"
	Addr    string // host:port
}

// ParseRemote parses "udp://host:port" or "tcp://host:port".
func ParseRemote(s string) (Remote, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Remote{}, fmt.Errorf("logship: %q: %w", s, err)
	}
	if u.Scheme != "udp" && u.Scheme != "tcp" {
		return Remote{}, fmt.Errorf("logship: %q: want udp://host:port or tcp://host:port", s)
	}
	if u.Path != "" || u.RawQuery != "" || u.User != nil || u.Fragment != "" {
		return Remote{}, fmt.Errorf("logship: %q: only scheme, host and port", s)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || host == "" {
		return Remote{}, fmt.Errorf("logship: %q: want host:port", s)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return Remote{}, fmt.Errorf("logship: %q: bad port", s)
	}
	return Remote{Network: u.Scheme, Addr: u.Host}, nil
}

// Limits of one message. Over UDP a message is one datagram, cut to 8 KiB
// (rsyslog's default maximum message size; a larger datagram would be cut
// by the collector anyway); over TCP it may be as long as 64 KiB, which
// holds the boot report.
const (
	MaxUDPMessage = 8 << 10
	MaxTCPMessage = 64 << 10
)

// Config configures a Shipper.
type Config struct {
	Remote Remote
	// Buffer is the byte budget of messages waiting to be sent; default
	// 1 MiB.
	Buffer int
	// Hostname returns HOSTNAME at send time (the address is usually
	// known only after DHCP); nil or "" means NILVALUE.
	Hostname func() string
	// BackoffMin and BackoffMax bound the wait between connection
	// attempts; defaults 100ms and 30s.
	BackoffMin, BackoffMax time.Duration
	// Timeout bounds one dial and one write; default 5s.
	Timeout time.Duration
	// Dial opens the connection; nil means net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Logf reports connection changes (lost, re-established), not every
	// attempt: these lines are shipped too.
	Logf func(format string, args ...any)
}

// Stats are the shipper's counters.
type Stats struct {
	Sent, Dropped, Truncated uint64
	QueuedBytes              int
	Connected                bool
}

// Shipper ships messages; see the package comment.
type Shipper struct {
	cfg Config
	max int // message size limit of the transport

	mu     sync.Mutex
	queue  []Message
	head   int
	bytes  int
	notify chan struct{}

	sent, dropped, truncated atomic.Uint64
	connected                atomic.Bool
}

// New returns a Shipper; start Run to send.
func New(cfg Config) *Shipper {
	if cfg.Buffer <= 0 {
		cfg.Buffer = 1 << 20
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = 100 * time.Millisecond
	}
	if cfg.BackoffMax < cfg.BackoffMin {
		cfg.BackoffMax = max(30*time.Second, cfg.BackoffMin)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Dial == nil {
		cfg.Dial = (&net.Dialer{}).DialContext
	}
	s := &Shipper{cfg: cfg, max: MaxTCPMessage, notify: make(chan struct{}, 1)}
	if cfg.Remote.Network == "udp" {
		s.max = MaxUDPMessage
	}
	return s
}

// cost is what a queued message counts against the buffer.
func cost(m *Message) int { return len(m.Text) + len(m.App) + len(m.ProcID) + len(m.MsgID) + 64 }

// Send queues m and returns at once. If the buffer has no room, m is
// dropped and counted.
func (s *Shipper) Send(m Message) {
	if m.Time.IsZero() {
		m.Time = time.Now()
	}
	c := cost(&m)
	s.mu.Lock()
	if s.bytes+c > s.cfg.Buffer {
		s.mu.Unlock()
		s.dropped.Add(1)
		return
	}
	s.queue = append(s.queue, m)
	s.bytes += c
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Stats returns the counters.
func (s *Shipper) Stats() Stats {
	s.mu.Lock()
	q := s.bytes
	s.mu.Unlock()
	return Stats{Sent: s.sent.Load(), Dropped: s.dropped.Load(), Truncated: s.truncated.Load(),
		QueuedBytes: q, Connected: s.connected.Load()}
}

// peek returns up to n queued messages without removing them.
func (s *Shipper) peek(n int) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	end := min(s.head+n, len(s.queue))
	return append([]Message(nil), s.queue[s.head:end]...)
}

// done removes the n oldest messages, which were sent.
func (s *Shipper) done(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := s.head; i < s.head+n; i++ {
		s.bytes -= cost(&s.queue[i])
		s.queue[i] = Message{}
	}
	s.head += n
	if s.head == len(s.queue) {
		s.queue, s.head = s.queue[:0], 0
	} else if s.head > len(s.queue)/2 {
		n := copy(s.queue, s.queue[s.head:])
		clear(s.queue[n:]) // no stale texts kept alive behind the slice's end
		s.queue, s.head = s.queue[:n], 0
	}
}

// Run sends queued messages until ctx ends.
func (s *Shipper) Run(ctx context.Context) {
	var conn net.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
		s.connected.Store(false)
	}()
	backoff := s.cfg.BackoffMin
	failed := false // a failure was logged and no success since
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	// retry notes a failure (logged once until the next success) and
	// waits out the back-off; false when ctx ended.
	retry := func(what string, err error) bool {
		if !failed {
			s.logf("log shipping to %s://%s: %v; %s with back-off", s.cfg.Remote.Network, s.cfg.Remote.Addr, err, what)
			failed = true
		}
		ok := wait(backoff)
		backoff = min(2*backoff, s.cfg.BackoffMax)
		return ok
	}
	var buf []byte
	for ctx.Err() == nil {
		batch := s.peek(64)
		if len(batch) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-s.notify:
			}
			continue
		}
		if conn == nil {
			dctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
			c, err := s.cfg.Dial(dctx, s.cfg.Remote.Network, s.cfg.Remote.Addr)
			cancel()
			if err != nil {
				if !retry("retrying", err) {
					return
				}
				continue
			}
			conn = c
			s.connected.Store(true)
		}
		host := "-"
		if s.cfg.Hostname != nil {
			host = s.cfg.Hostname()
		}
		n, err := s.write(conn, batch, host, &buf)
		if n > 0 {
			s.done(n)
			s.sent.Add(uint64(n))
		}
		if err != nil {
			conn.Close()
			conn = nil
			s.connected.Store(false)
			if !retry("reconnecting", err) {
				return
			}
			continue
		}
		if failed {
			s.logf("log shipping to %s://%s works (again)", s.cfg.Remote.Network, s.cfg.Remote.Addr)
			failed = false
		}
		backoff = s.cfg.BackoffMin
	}
}

func (s *Shipper) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

// write sends a batch and returns how many messages were written whole.
// Over UDP each message is one datagram; over TCP the batch is one write
// of octet-counted frames.
func (s *Shipper) write(conn net.Conn, batch []Message, host string, buf *[]byte) (int, error) {
	conn.SetWriteDeadline(time.Now().Add(s.cfg.Timeout))
	if s.cfg.Remote.Network == "udp" {
		for i := range batch {
			*buf = s.format((*buf)[:0], &batch[i], host)
			if _, err := conn.Write(*buf); err != nil {
				return i, err
			}
		}
		return len(batch), nil
	}
	b := (*buf)[:0]
	var msg []byte
	for i := range batch {
		msg = s.format(msg[:0], &batch[i], host)
		b = strconv.AppendInt(b, int64(len(msg)), 10)
		b = append(b, ' ')
		b = append(b, msg...)
	}
	*buf = b
	if _, err := conn.Write(b); err != nil {
		// How much of the batch arrived is unknown: send it all again
		// (at least once).
		return 0, err
	}
	return len(batch), nil
}

// format appends m as an RFC 5424 message, cut to the transport's limit.
func (s *Shipper) format(dst []byte, m *Message, host string) []byte {
	start := len(dst)
	dst = AppendRFC5424(dst, m, host)
	if len(dst)-start > s.max {
		dst = dst[:start+s.max]
		s.truncated.Add(1)
	}
	return dst
}
