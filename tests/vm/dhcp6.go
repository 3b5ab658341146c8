package vm

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/dhcpv6/server6"
	"github.com/insomniacslk/dhcp/iana"
)

// DHCP6Config is the one IA_NA address a DHCP6Server hands out, as EC2's
// DHCPv6 service does: a /128 per address, the on-link prefix coming from
// the router advertisement.
type DHCP6Config struct {
	Iface    string     // interface to serve on, inside the namespace
	ClientIP netip.Addr // the address offered
	Valid    time.Duration
	DNS      []netip.Addr
	// Edit, when set, changes each advertisement and reply before it is
	// sent: a test's hostile server.
	Edit func(*dhcpv6.Message)
}

// Message6 records one DHCPv6 message the server received: the lease log
// a test asserts (one solicit, one request, no renew or rebind).
type Message6 struct {
	Type dhcpv6.MessageType
	Peer string // the client's link-local address
	At   time.Time
}

// String is the message as a log line.
func (m Message6) String() string { return fmt.Sprintf("%s from %s", m.Type, m.Peer) }

// DHCP6Server is a DHCPv6 server (insomniacslk/dhcp server6, the library
// of the init's client) whose socket lives in a test's namespace.
type DHCP6Server struct {
	cfg  DHCP6Config
	duid dhcpv6.DUID
	srv  *server6.Server
	done chan error

	mu     sync.Mutex
	log    []Message6
	leases int
	errs   []error
}

// StartDHCP6 starts a DHCPv6 server on cfg.Iface inside n, on port 547 of
// All_DHCP_Relay_Agents_and_Servers (ff02::1:2). Its socket is created
// on a thread inside the namespace and bound to the interface.
func (n *Netns) StartDHCP6(cfg DHCP6Config) (*DHCP6Server, error) {
	if cfg.Valid == 0 {
		cfg.Valid = time.Hour
	}
	s := &DHCP6Server{cfg: cfg, done: make(chan error, 1)}
	err := n.Do(func() error {
		ifi, err := net.InterfaceByName(cfg.Iface)
		if err != nil {
			return err
		}
		s.duid = &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: ifi.HardwareAddr}
		s.srv, err = server6.NewServer(cfg.Iface, nil, s.handle)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dhcpv6 server on %s in %s: %w", cfg.Iface, n.Name, err)
	}
	go func() { s.done <- s.srv.Serve() }()
	return s, nil
}

// Close stops the server.
func (s *DHCP6Server) Close() error {
	s.srv.Close()
	<-s.done
	return nil
}

// Log returns every message received so far, in order.
func (s *DHCP6Server) Log() []Message6 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message6(nil), s.log...)
}

// Leases is the number of replies that assigned the address.
func (s *DHCP6Server) Leases() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leases
}

// Errors returns the errors met while answering.
func (s *DHCP6Server) Errors() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

func (s *DHCP6Server) fail(err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
}

func (s *DHCP6Server) handle(conn net.PacketConn, peer net.Addr, d dhcpv6.DHCPv6) {
	m, err := d.GetInnerMessage()
	if err != nil {
		s.fail(fmt.Errorf("dhcpv6: %w", err))
		return
	}
	s.mu.Lock()
	s.log = append(s.log, Message6{Type: m.MessageType, Peer: peer.String(), At: time.Now()})
	s.mu.Unlock()
	var resp *dhcpv6.Message
	switch m.MessageType {
	case dhcpv6.MessageTypeSolicit:
		resp, err = dhcpv6.NewAdvertiseFromSolicit(m, s.answer(m)...)
	case dhcpv6.MessageTypeRequest:
		if id := m.Options.ServerID(); id == nil || !id.Equal(s.duid) {
			return // meant for another server
		}
		resp, err = dhcpv6.NewReplyFromMessage(m, s.answer(m)...)
		if err == nil {
			s.mu.Lock()
			s.leases++
			s.mu.Unlock()
		}
	default:
		s.fail(fmt.Errorf("dhcpv6: unexpected %s from %s", m.MessageType, peer))
		return
	}
	if err != nil {
		s.fail(fmt.Errorf("dhcpv6: answer %s: %w", m.MessageType, err))
		return
	}
	if s.cfg.Edit != nil {
		s.cfg.Edit(resp)
	}
	if _, err := conn.WriteTo(resp.ToBytes(), peer); err != nil && !errors.Is(err, net.ErrClosed) {
		s.fail(fmt.Errorf("dhcpv6: send to %s: %w", peer, err))
	}
}

// answer is the server id, the client's IA_NA (its IAID kept) with the
// address, and the DNS servers.
func (s *DHCP6Server) answer(m *dhcpv6.Message) []dhcpv6.Modifier {
	ia := &dhcpv6.OptIANA{T1: s.cfg.Valid / 2, T2: s.cfg.Valid * 4 / 5}
	if req := m.Options.OneIANA(); req != nil {
		ia.IaId = req.IaId
	}
	ia.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: net.IP(s.cfg.ClientIP.AsSlice()),
		PreferredLifetime: s.cfg.Valid, ValidLifetime: s.cfg.Valid})
	mods := []dhcpv6.Modifier{dhcpv6.WithServerID(s.duid), dhcpv6.WithOption(ia)}
	if len(s.cfg.DNS) > 0 {
		ips := make([]net.IP, len(s.cfg.DNS))
		for i, a := range s.cfg.DNS {
			ips[i] = net.IP(a.AsSlice())
		}
		mods = append(mods, dhcpv6.WithDNS(ips...))
	}
	return mods
}
