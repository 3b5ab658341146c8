package vm

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// The IPv6 side of a guest's network, inside each namespace: the subnet's
// /64 on the tap (announced on-link by a RouterAdvertiser), the host's
// address in it, the address the DHCPv6 server hands the guest, and EC2's
// IPv6 endpoints of the metadata service and Amazon Time Sync.
const (
	Prefix6       = "fd00:77::/64"
	HostAddr6     = "fd00:77::1"
	GuestAddr6    = "fd00:77::2"
	IMDSAddr6     = "fd00:ec2::254"
	TimeSyncAddr6 = "fd00:ec2::123"
)

// AddAddr6 puts cidr on dev inside the namespace without duplicate address
// detection: a tap has no carrier until QEMU opens it, and a tentative
// address would not answer the guest's first packets.
func (n *Netns) AddAddr6(dev, cidr string) error {
	return ip("-n", n.Name, "-6", "addr", "add", cidr, "dev", dev, "nodad")
}

// AddLocalAddr6 puts addr (a /128) on the namespace's loopback, as
// AddLocalAddr does for IPv4: the fake IMDS and NTP server answer there.
func (n *Netns) AddLocalAddr6(addr string) error {
	err := ip("-n", n.Name, "-6", "addr", "add", addr+"/128", "dev", "lo", "nodad")
	if err != nil && strings.Contains(err.Error(), "File exists") {
		return nil
	}
	return err
}

// StartDualStack is what a dual-stack (or, without the DHCPv4 server,
// IPv6-only) EC2 subnet is on a guest's tap: the host's address in
// Prefix6, router advertisements with the managed flag, and a DHCPv6
// server that hands out GuestAddr6. For a vm.Config's Prepare.
func (n *Netns) StartDualStack() (*RouterAdvertiser, *DHCP6Server, error) {
	return n.StartDualStackValid(0)
}

// StartDualStackValid is StartDualStack with the DHCPv6 lease's valid
// lifetime (0: an hour; T1 and T2 are half and four fifths of it): a test
// that checks nothing renews gives a short one and waits past it.
func (n *Netns) StartDualStackValid(valid time.Duration) (*RouterAdvertiser, *DHCP6Server, error) {
	if err := n.AddAddr6(TapName, HostAddr6+"/64"); err != nil {
		return nil, nil, err
	}
	ra, err := n.StartRA(RAConfig{Iface: TapName, Managed: true, Prefix: netip.MustParsePrefix(Prefix6)})
	if err != nil {
		return nil, nil, err
	}
	d6, err := n.StartDHCP6(DHCP6Config{Iface: TapName, ClientIP: netip.MustParseAddr(GuestAddr6), Valid: valid})
	if err != nil {
		ra.Close()
		return nil, nil, err
	}
	return ra, d6, nil
}

// ListenNTP6 is ListenNTP on an IPv6 address ([ip]:port).
func ListenNTP6(addr string) (*NTPServer, error) { return listenNTP("udp6", addr) }

// StartNTP6 serves NTP at [TimeSyncAddr6]:123 inside the namespace (the
// address goes on its loopback): Amazon Time Sync's IPv6 endpoint.
func (n *Netns) StartNTP6() (*NTPServer, error) {
	if err := n.AddLocalAddr6(TimeSyncAddr6); err != nil {
		return nil, err
	}
	var s *NTPServer
	err := n.Do(func() error {
		var err error
		s, err = ListenNTP6(net.JoinHostPort(TimeSyncAddr6, "123"))
		return err
	})
	return s, err
}

// StartIMDS6 serves f at http://[fd00:ec2::254]:80 inside the namespace:
// the metadata service's IPv6 endpoint, as an instance whose metadata
// options enable it (HttpProtocolIpv6) reaches it.
func (n *Netns) StartIMDS6(f *FakeIMDS) (*http.Server, error) {
	if err := n.AddLocalAddr6(IMDSAddr6); err != nil {
		return nil, err
	}
	var l net.Listener
	err := n.Do(func() error {
		var err error
		l, err = net.Listen("tcp6", net.JoinHostPort(IMDSAddr6, "80"))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("fake imds (IPv6) in %s: %w", n.Name, err)
	}
	srv := &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Printf("fake imds (IPv6): %v\n", err)
		}
	}()
	return srv, nil
}
