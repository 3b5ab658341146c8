package netconf6

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Interface flags the kernel keeps per IPv6 device (include/net/if_inet6.h,
// IFLA_INET6_FLAGS): what the last router advertisement said. Reading them
// over rtnetlink lets the init learn the advertisement the kernel already
// processed without a socket of its own on the wire: an ICMPv6 raw socket
// left open would be copied every ICMPv6 packet, as the DHCPv4 client's
// AF_PACKET socket was copied every packet (case study step 7).
const (
	ifRSSent    = 0x10 // IF_RS_SENT: a router solicitation went out
	ifRARcvd    = 0x20 // IF_RA_RCVD: a router advertisement came in
	ifRAManaged = 0x40 // IF_RA_MANAGED: its M flag (addresses by DHCPv6)
	ifRAOther   = 0x80 // IF_RA_OTHERCONF: its O flag (other configuration by DHCPv6)

	iflaProtinfo   = 12 // IFLA_PROTINFO, nested in an AF_INET6 RTM_NEWLINK
	iflaInet6Flags = 1  // IFLA_INET6_FLAGS, a u32 inside it
)

// RA is what the kernel recorded of the router advertisements on a link.
type RA struct {
	Received bool // an advertisement arrived
	Managed  bool // M: take addresses by DHCPv6 (EC2 sets it)
	Other    bool // O: other configuration by DHCPv6
}

// String is the RA as a report value.
func (r RA) String() string {
	switch {
	case !r.Received:
		return "none"
	case r.Managed && r.Other:
		return "managed,other"
	case r.Managed:
		return "managed"
	case r.Other:
		return "other"
	}
	return "unmanaged"
}

// raFromFlags is what the interface flags f (IFLA_INET6_FLAGS) say of the
// last router advertisement. The kernel keeps M and O from the last one
// received (ndisc_router_discovery); without IF_RA_RCVD none came and
// neither means anything.
func raFromFlags(f uint32) RA {
	if f&ifRARcvd == 0 {
		return RA{}
	}
	return RA{Received: true, Managed: f&ifRAManaged != 0, Other: f&ifRAOther != 0}
}

// raFlags reads IFLA_INET6_FLAGS of the interface with index ifindex.
func raFlags(ifindex int) (uint32, error) {
	b, err := syscall.NetlinkRIB(syscall.RTM_GETLINK, syscall.AF_INET6)
	if err != nil {
		return 0, fmt.Errorf("rtnetlink dump inet6 links: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return 0, fmt.Errorf("parse inet6 links: %w", err)
	}
	for i := range msgs {
		m := &msgs[i]
		if m.Header.Type != syscall.RTM_NEWLINK || len(m.Data) < syscall.SizeofIfInfomsg {
			continue
		}
		if idx := int32(binary.NativeEndian.Uint32(m.Data[4:8])); int(idx) != ifindex {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(m)
		if err != nil {
			return 0, fmt.Errorf("parse inet6 link attributes: %w", err)
		}
		for _, a := range attrs {
			if a.Attr.Type == iflaProtinfo {
				if f, ok := inet6Flags(a.Value); ok {
					return f, nil
				}
			}
		}
		return 0, fmt.Errorf("interface %d: no IFLA_INET6_FLAGS (IPv6 disabled on it?)", ifindex)
	}
	return 0, fmt.Errorf("interface %d: not in the inet6 link dump (kernel without IPv6?)", ifindex)
}

// inet6Flags finds IFLA_INET6_FLAGS in the nested attributes of
// IFLA_PROTINFO.
func inet6Flags(b []byte) (uint32, bool) {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		typ := binary.NativeEndian.Uint16(b[2:4]) &^ unix.NLA_F_NESTED
		if l < 4 || l > len(b) {
			return 0, false
		}
		if typ == iflaInet6Flags && l >= 8 {
			return binary.NativeEndian.Uint32(b[4:8]), true
		}
		b = b[min((l+3)&^3, len(b)):]
	}
	return 0, false
}

// pollEvery is how often the waits below read the kernel's state: a
// netlink dump of one link and its addresses is tens of microseconds.
const pollEvery = 20 * time.Millisecond

// rsGrace is how long after the kernel's router solicitation went out an
// advertisement is still waited for: RFC 4861 lets a router delay its
// answer by up to MAX_RA_DELAY_TIME (0.5 s); twice that covers a busy
// link. On a subnet without a router this ends the wait before wait
// itself when the kernel solicited early enough: it does so once its
// link-local address has passed duplicate address detection, which
// starts up to rtr_solicit_delay (1 s) after link-up and takes
// dad_transmits × retrans_time (1 s), so 1-2 s after link-up. Measured
// (TestAutoCostOnIPv4Subnet, the step 600 ms after link-up as in the
// QEMU boot): the solicitation comes 1.8 s into the step, so the default
// 2 s bound ends it, not this.
const rsGrace = time.Second

// WaitRA waits for the kernel to record a router advertisement on
// ifname and returns what it said: up to wait, and no longer than grace
// after the kernel's router solicitation (rsGrace in the step, unless
// FullRAWait). No advertisement is not an
// error: RA.Received is false.
func WaitRA(ctx context.Context, ifname string, wait, grace time.Duration) (RA, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return RA{}, fmt.Errorf("interface %s: %w", ifname, err)
	}
	deadline := time.Now().Add(wait)
	solicited := false
	for {
		f, err := raFlags(ifi.Index)
		if err != nil {
			return RA{}, err
		}
		if ra := raFromFlags(f); ra.Received {
			return ra, nil
		}
		if f&ifRSSent != 0 && !solicited {
			solicited = true
			deadline = minTime(deadline, time.Now().Add(grace))
		}
		if time.Now().After(deadline) {
			return RA{}, nil
		}
		select {
		case <-ctx.Done():
			return RA{}, fmt.Errorf("%s: waiting for a router advertisement: %w", ifname, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

// WaitLinkLocal waits up to wait for ifname's link-local address to pass
// duplicate address detection: the DHCPv6 client binds it, and a tentative
// address cannot be bound.
func WaitLinkLocal(ctx context.Context, ifname string, wait time.Duration) (net.IP, error) {
	link, err := netlink.LinkByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("link %s: %w", ifname, err)
	}
	deadline := time.Now().Add(wait)
	for {
		addrs, err := netlink.AddrList(link, netlink.FAMILY_V6)
		if err != nil {
			return nil, fmt.Errorf("list IPv6 addresses of %s: %w", ifname, err)
		}
		state := "none"
		for _, a := range addrs {
			if !a.IP.IsLinkLocalUnicast() {
				continue
			}
			switch {
			case a.Flags&unix.IFA_F_DADFAILED != 0:
				return nil, fmt.Errorf("%s: link-local %s failed duplicate address detection", ifname, a.IP)
			case a.Flags&unix.IFA_F_TENTATIVE != 0:
				state = "tentative " + a.IP.String()
			default:
				return a.IP, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: no usable link-local address within %v (%s)", ifname, wait, state)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: waiting for a usable link-local address (%s): %w", ifname, state, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
