package vm

import (
	"net/netip"
	"strings"
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
	if err := n.AddAddr6(TapName, HostAddr6+"/64"); err != nil {
		return nil, nil, err
	}
	ra, err := n.StartRA(RAConfig{Iface: TapName, Managed: true, Prefix: netip.MustParsePrefix(Prefix6)})
	if err != nil {
		return nil, nil, err
	}
	d6, err := n.StartDHCP6(DHCP6Config{Iface: TapName, ClientIP: netip.MustParseAddr(GuestAddr6)})
	if err != nil {
		ra.Close()
		return nil, nil, err
	}
	return ra, d6, nil
}
