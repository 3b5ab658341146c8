package vm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	syslog "github.com/leodido/go-syslog/v4"
	"github.com/leodido/go-syslog/v4/octetcounting"
	"github.com/leodido/go-syslog/v4/rfc5424"
)

// SyslogMessage is one message a Syslog receiver parsed, with how it came.
type SyslogMessage struct {
	Network string // "udp" or "tcp"
	*rfc5424.SyslogMessage
}

// Text is the message's MSG, "" if none.
func (m SyslogMessage) Text() string { return deref(m.Message) }

// App is the message's APP-NAME.
func (m SyslogMessage) App() string { return deref(m.Appname) }

// ID is the message's MSGID.
func (m SyslogMessage) ID() string { return deref(m.MsgID) }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Syslog is a syslog collector for tests: it listens on UDP (one RFC 5424
// message per datagram, RFC 5426) and TCP (octet-counting framing, RFC
// 6587) on the same address and parses what arrives with an independent
// RFC 5424 parser (leodido/go-syslog, strict: no best-effort mode), so a
// message that is not well formed is an error, not a message.
type Syslog struct {
	Addr string // host:port of both listeners

	udp *net.UDPConn
	tcp *net.TCPListener

	mu     sync.Mutex
	msgs   []SyslogMessage
	errs   []error
	conns  map[net.Conn]bool
	accept int // TCP connections accepted
	change chan struct{}
	wg     sync.WaitGroup
}

// ListenSyslog starts a receiver on addr ("127.0.0.1:0" picks a port;
// UDP takes the TCP listener's port) in the current network namespace.
func ListenSyslog(addr string) (*Syslog, error) {
	tl, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("syslog: %w", err)
	}
	ul, err := net.ListenPacket("udp", tl.Addr().String())
	if err != nil {
		tl.Close()
		return nil, fmt.Errorf("syslog: %w", err)
	}
	s := &Syslog{Addr: tl.Addr().String(), udp: ul.(*net.UDPConn), tcp: tl.(*net.TCPListener),
		conns: map[net.Conn]bool{}, change: make(chan struct{})}
	s.wg.Add(2)
	go s.serveUDP()
	go s.serveTCP()
	return s, nil
}

// ListenSyslog starts a receiver inside the namespace; see ListenSyslog.
func (n *Netns) ListenSyslog(addr string) (*Syslog, error) {
	var s *Syslog
	err := n.Do(func() error {
		var err error
		s, err = ListenSyslog(addr)
		return err
	})
	return s, err
}

func (s *Syslog) add(m SyslogMessage, err error) {
	s.mu.Lock()
	if err != nil {
		s.errs = append(s.errs, err)
	} else {
		s.msgs = append(s.msgs, m)
	}
	close(s.change)
	s.change = make(chan struct{})
	s.mu.Unlock()
}

func (s *Syslog) serveUDP() {
	defer s.wg.Done()
	buf := make([]byte, 64<<10)
	p := rfc5424.NewParser(rfc5424.WithCompliantMsg())
	for {
		n, _, err := s.udp.ReadFrom(buf)
		if err != nil {
			return
		}
		m, err := p.Parse(append([]byte(nil), buf[:n]...))
		if err != nil {
			s.add(SyslogMessage{}, fmt.Errorf("udp datagram %q: %w", shortQ(buf[:n]), err))
			continue
		}
		s.add(SyslogMessage{Network: "udp", SyslogMessage: m.(*rfc5424.SyslogMessage)}, nil)
	}
}

func (s *Syslog) serveTCP() {
	defer s.wg.Done()
	for {
		c, err := s.tcp.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = true
		s.accept++
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			p := octetcounting.NewParser(
				syslog.WithMaxMessageLength(1<<20),
				syslog.WithMachineOptions(rfc5424.WithCompliantMsg()),
				syslog.WithListener(func(r *syslog.Result) {
					if r.Error != nil {
						s.add(SyslogMessage{}, fmt.Errorf("tcp stream: %w", r.Error))
						return
					}
					s.add(SyslogMessage{Network: "tcp", SyslogMessage: r.Message.(*rfc5424.SyslogMessage)}, nil)
				}))
			p.Parse(c)
		}()
	}
}

func shortQ(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// Messages returns what arrived so far, in order of arrival.
func (s *Syslog) Messages() []SyslogMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SyslogMessage(nil), s.msgs...)
}

// Errors returns what arrived and did not parse.
func (s *Syslog) Errors() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

// Accepted is the number of TCP connections accepted so far.
func (s *Syslog) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accept
}

// DropConnections closes every open TCP connection (the collector
// restarting, as a shipper sees it).
func (s *Syslog) DropConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

// Wait waits until a message satisfies match and returns it.
func (s *Syslog) Wait(ctx context.Context, match func(SyslogMessage) bool) (SyslogMessage, error) {
	seen := 0
	for {
		s.mu.Lock()
		msgs, ch := s.msgs, s.change
		s.mu.Unlock()
		for ; seen < len(msgs); seen++ {
			if match(msgs[seen]) {
				return msgs[seen], nil
			}
		}
		select {
		case <-ctx.Done():
			return SyslogMessage{}, fmt.Errorf("syslog: no matching message among %d (errors: %v): %w", len(msgs), s.Errors(), ctx.Err())
		case <-ch:
		case <-time.After(time.Second):
		}
	}
}

// WaitText waits for a message whose MSG contains sub.
func (s *Syslog) WaitText(ctx context.Context, sub string) (SyslogMessage, error) {
	return s.Wait(ctx, func(m SyslogMessage) bool { return strings.Contains(m.Text(), sub) })
}

// Close stops the receiver.
func (s *Syslog) Close() error {
	err := errors.Join(s.tcp.Close(), s.udp.Close())
	s.DropConnections()
	s.wg.Wait()
	return err
}
