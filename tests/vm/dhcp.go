package vm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
)

// DHCPConfig is the one lease a DHCPServer hands out: the guest is the only
// client on its tap, so a pool would add nothing but code.
type DHCPConfig struct {
	Iface    string     // interface to serve on, inside the namespace
	ServerIP net.IP     // the server identifier (the interface's address)
	ClientIP net.IP     // the address offered
	Mask     net.IPMask // subnet mask
	Router   net.IP     // default gateway; nil: none
	Lease    time.Duration
	MTU      uint16 // interface MTU option; 0: not sent
	// Extra options go into offers and acknowledgements after the
	// above (replacing one of the same code): a test's hostile lease.
	Extra []dhcpv4.Option
}

// Message records one request the server received: the lease log a test
// asserts (one DISCOVER, one REQUEST, no renewal).
type Message struct {
	Type      dhcpv4.MessageType
	MAC       net.HardwareAddr
	ClientIP  net.IP // ciaddr: set when the client renews an address it holds
	Requested net.IP // option 50, if any
	At        time.Time
}

// String is the message as a log line.
func (m Message) String() string {
	return fmt.Sprintf("%s from %s ciaddr %s requested %v", m.Type, m.MAC, m.ClientIP, m.Requested)
}

// Lease records one acknowledged lease.
type Lease struct {
	MAC net.HardwareAddr
	IP  net.IP
	At  time.Time
}

// DHCPServer is a DHCPv4 server (insomniacslk/dhcp server4) whose socket
// lives in a test's namespace.
type DHCPServer struct {
	cfg  DHCPConfig
	srv  *server4.Server
	done chan error

	mu     sync.Mutex
	leases []Lease
	log    []Message
	errs   []error
}

// StartDHCP starts a DHCPv4 server on cfg.Iface inside n. Its UDP socket is
// created on a thread inside the namespace and bound to the interface.
func (n *Netns) StartDHCP(cfg DHCPConfig) (*DHCPServer, error) {
	if cfg.Lease == 0 {
		cfg.Lease = time.Hour
	}
	s := &DHCPServer{cfg: cfg, done: make(chan error, 1)}
	err := n.Do(func() error {
		var err error
		s.srv, err = server4.NewServer(cfg.Iface, &net.UDPAddr{Port: dhcpv4.ServerPort}, s.handle)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dhcp server on %s in %s: %w", cfg.Iface, n.Name, err)
	}
	go func() { s.done <- s.srv.Serve() }()
	return s, nil
}

// Close stops the server.
func (s *DHCPServer) Close() error {
	s.srv.Close()
	<-s.done
	return nil
}

// Leases returns the leases acknowledged so far.
func (s *DHCPServer) Leases() []Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Lease(nil), s.leases...)
}

// Config is what the server hands out.
func (s *DHCPServer) Config() DHCPConfig { return s.cfg }

// Log returns every request received so far, in order.
func (s *DHCPServer) Log() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.log...)
}

// Errors returns the errors met while answering (bad requests, send
// failures), for a test to report when the guest got no address.
func (s *DHCPServer) Errors() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

func (s *DHCPServer) fail(err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
}

func (s *DHCPServer) handle(conn net.PacketConn, peer net.Addr, m *dhcpv4.DHCPv4) {
	if m.OpCode != dhcpv4.OpcodeBootRequest {
		return
	}
	s.mu.Lock()
	s.log = append(s.log, Message{Type: m.MessageType(), MAC: m.ClientHWAddr, ClientIP: m.ClientIPAddr, Requested: m.RequestedIPAddress(), At: time.Now()})
	s.mu.Unlock()
	var typ dhcpv4.MessageType
	switch m.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		typ = dhcpv4.MessageTypeOffer
	case dhcpv4.MessageTypeRequest:
		typ = dhcpv4.MessageTypeAck
		if id := m.ServerIdentifier(); id != nil && !id.Equal(s.cfg.ServerIP) {
			return // the client chose another server
		}
		want := m.RequestedIPAddress()
		if want == nil || want.IsUnspecified() {
			want = m.ClientIPAddr
		}
		if !want.Equal(s.cfg.ClientIP) {
			typ = dhcpv4.MessageTypeNak
		}
	case dhcpv4.MessageTypeRelease, dhcpv4.MessageTypeDecline, dhcpv4.MessageTypeInform:
		return
	default:
		s.fail(fmt.Errorf("dhcp: unexpected %s from %s", m.MessageType(), m.ClientHWAddr))
		return
	}
	mods := []dhcpv4.Modifier{
		dhcpv4.WithMessageType(typ),
		dhcpv4.WithServerIP(s.cfg.ServerIP),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(s.cfg.ServerIP)),
	}
	if typ != dhcpv4.MessageTypeNak {
		mods = append(mods,
			dhcpv4.WithYourIP(s.cfg.ClientIP),
			dhcpv4.WithNetmask(s.cfg.Mask),
			dhcpv4.WithLeaseTime(uint32(s.cfg.Lease/time.Second)),
		)
		if s.cfg.Router != nil {
			mods = append(mods, dhcpv4.WithRouter(s.cfg.Router))
		}
		if s.cfg.MTU != 0 {
			mods = append(mods, dhcpv4.WithGeneric(dhcpv4.OptionInterfaceMTU, binary.BigEndian.AppendUint16(nil, s.cfg.MTU)))
		}
		for _, o := range s.cfg.Extra {
			mods = append(mods, dhcpv4.WithOption(o))
		}
	}
	resp, err := dhcpv4.NewReplyFromRequest(m, mods...)
	if err != nil {
		s.fail(fmt.Errorf("dhcp: build %s: %w", typ, err))
		return
	}
	// The client has no address yet (or is renewing one it owns): answer
	// by broadcast unless it can take unicast at its current address.
	dst := &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort}
	if !m.GatewayIPAddr.IsUnspecified() {
		dst = &net.UDPAddr{IP: m.GatewayIPAddr, Port: dhcpv4.ServerPort}
	} else if !m.ClientIPAddr.IsUnspecified() && m.ClientIPAddr != nil {
		dst = &net.UDPAddr{IP: m.ClientIPAddr, Port: dhcpv4.ClientPort}
	}
	// Recorded before sending, so that a client holding the ACK finds it.
	if typ == dhcpv4.MessageTypeAck {
		s.mu.Lock()
		s.leases = append(s.leases, Lease{MAC: m.ClientHWAddr, IP: s.cfg.ClientIP, At: time.Now()})
		s.mu.Unlock()
	}
	if _, err := conn.WriteTo(resp.ToBytes(), dst); err != nil && !errors.Is(err, net.ErrClosed) {
		s.fail(fmt.Errorf("dhcp: send %s to %s: %w", typ, dst, err))
	}
}
