// Package netconf6 configures the primary interface's IPv6 address: by
// DHCPv6 (IA_NA, as EC2 assigns an instance's IPv6 addresses when its
// router advertisements carry the managed flag), by the kernel's SLAAC, or
// statically.
//
// The kernel processes router advertisements itself (accept_ra): it
// installs the default route and the on-link prefix, and sets the
// interface flags that say whether the advertisement was managed. The
// step reads those flags over rtnetlink instead of listening for
// advertisements, so no socket of the init ever sits on the wire. The
// DHCPv6 exchange uses insomniacslk/dhcp's client (the library netconf's
// DHCPv4 client is built on), a UDP socket on the link-local address,
// closed when the exchange ends. As with IPv4 (package netconf) the lease
// is taken once and the address is installed with valid_lft and
// preferred_lft forever: an EC2 instance keeps its IPv6 addresses for
// its lifetime, and renewing would need a client kept alive. The verify
// step checks that no AF_PACKET socket is open afterwards (case study
// step 7 holds for IPv6 as well).
//
// The wait for an advertisement is bounded (net.ipv6_ra_wait): in auto
// mode an IPv4-only subnet has no IPv6 router, and that wait is all the
// step costs there.
package netconf6

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/netconf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Mode is how the address is taken (the values of net.ipv6).
type Mode string

// The modes; see init/config's IPv6Mode for what each means.
const (
	Auto   Mode = "auto"
	DHCP   Mode = "dhcp"
	SLAAC  Mode = "slaac"
	Static Mode = "static"
	Off    Mode = "off"
)

// StepName is the name of the step in the boot report.
const StepName = "net-ipv6"

// Options configure the step.
type Options struct {
	Interface string
	Mode      Mode
	// RAWait bounds the wait for a router advertisement.
	RAWait time.Duration
	// FullRAWait keeps the wait from ending rsGrace after the kernel's
	// router solicitation: the background step, which nothing waits for,
	// waits its whole RAWait. A router's answer can come later than that
	// under load: make test's TestBootModes/httpboot once gave up 2.03 s
	// into a 4 s wait, 1 s after the solicitation, with no advertisement.
	FullRAWait bool
	// DHCPTimeout is the first DHCPv6 exchange's timeout, doubling on
	// each next one up to BackoffMax; DHCPRetries the exchanges, 0 until
	// ctx ends (the DHCPv4 keys' values: netconf.Schedule).
	DHCPTimeout time.Duration
	DHCPRetries int
	BackoffMax  time.Duration
	// PacketSocketsElsewhere, when it reports true, tells the verify
	// step that another part of the init has an AF_PACKET socket open
	// on purpose (a DHCPv4 retry in the background): the IPv6 client
	// opens none (UDP), so the check that none is open is skipped
	// rather than failing an installed address. nil: always checked.
	PacketSocketsElsewhere func() bool
	// Static is the address and gateway of static mode.
	Static Lease
	// ProcRoot is where /proc is mounted: the interface's sysctls and
	// net/packet are read and written there.
	ProcRoot string
	Log      *log.Logger // nil discards
}

// linkLocalWait bounds the wait for the link-local address to pass
// duplicate address detection (one probe, a second, with the kernel's
// defaults).
const linkLocalWait = 3 * time.Second

// Step returns the boot step that configures IPv6 on o.Interface.
func Step(o Options) boot.Step {
	var want Lease
	var frozen bool
	return boot.Step{
		Name: StepName,
		Apply: func(ctx context.Context, d boot.Detail) error {
			if err := limitRA(o); err != nil {
				return err
			}
			l, err := apply(ctx, o, d)
			want = l
			if err == nil && (o.Mode == Auto || o.Mode == DHCP || o.Mode == SLAAC) {
				frozen, err = TakeRA(o.Interface, raConf(o), d)
			}
			return err
		},
		Verify: func(ctx context.Context, d boot.Detail) error {
			if frozen {
				if err := VerifyRA(o.Interface, raConf(o)); err != nil {
					return err
				}
			}
			procRoot := o.ProcRoot
			if o.PacketSocketsElsewhere != nil && o.PacketSocketsElsewhere() {
				procRoot, d["packet_sockets"] = "", "not checked: a DHCPv4 retry holds one"
			}
			return Verify(ctx, o.Interface, want, procRoot)
		},
	}
}

func apply(ctx context.Context, o Options, d boot.Detail) (Lease, error) {
	d["mode"] = string(o.Mode)
	conf := filepath.Join(o.ProcRoot, "sys/net/ipv6/conf", o.Interface)
	if _, err := os.Stat(conf); err != nil {
		if o.Mode == Off {
			return Lease{}, boot.Skip("net.ipv6=off (and the kernel has no IPv6 on %s)", o.Interface)
		}
		return Lease{}, boot.Skip("no IPv6 on %s (kernel without IPv6, or ipv6.disable=1): %v", o.Interface, err)
	}
	if o.Mode == Off {
		// No IPv6 on the interface at all: no link-local address, no
		// router solicitation, no neighbour discovery.
		if err := setConf(conf, "disable_ipv6", "1"); err != nil {
			return Lease{}, err
		}
		d["disable_ipv6"] = "1"
		return Lease{}, nil
	}
	// The kernel adds SLAAC addresses only where they are wanted: with
	// DHCPv6 or a static address, one address is the configuration.
	autoconf := "0"
	if o.Mode == Auto || o.Mode == SLAAC {
		autoconf = "1"
	}
	if err := setConf(conf, "autoconf", autoconf); err != nil {
		return Lease{}, err
	}
	if o.Mode == Static {
		if err := Install(o.Interface, o.Static); err != nil {
			return Lease{}, err
		}
		describe(d, o.Static)
		return o.Static, nil
	}
	start := time.Now()
	grace := rsGrace
	if o.FullRAWait {
		grace = o.RAWait
	}
	ra, err := WaitRA(ctx, o.Interface, o.RAWait, grace)
	if err != nil {
		return Lease{}, err
	}
	d["ra"] = ra.String()
	d["ra_wait"] = time.Since(start).Round(time.Millisecond).String()
	w, err := choose(o.Mode, ra, o.RAWait)
	if err != nil {
		return Lease{}, err
	}
	if w == byDHCP {
		return dhcp(ctx, o, d)
	}
	return slaac(ctx, o, d)
}

// way is how apply takes the address once the advertisement is known.
type way int

const (
	byDHCP  way = iota + 1 // a DHCPv6 IA_NA lease
	bySLAAC                // the kernel's autoconfigured address
)

// choose decides, from the mode (auto, dhcp or slaac) and what the kernel
// recorded of the router advertisement, how the address is taken:
//   - dhcp: DHCPv6, whatever the advertisement said (or if none came);
//   - auto: DHCPv6 when the advertisement has the M flag; otherwise SLAAC
//     (the O flag alone asks for other configuration by DHCPv6 with
//     addresses by SLAAC: the address is SLAAC's and no DHCPv6 exchange is
//     made; whether the prefix allows SLAAC, its A flag, is the kernel's
//     business, and slaac fails if no address comes); no advertisement:
//     skipped (an IPv4-only subnet);
//   - slaac: SLAAC even with the M flag; no advertisement is an error.
//
// (Written with ifs, not a switch: Go's coverage profile puts a switch
// case's expression in no block, and the mutation runner, which decides
// from that profile which lines the tests run, would never mutate the
// conditions; tests/mutation/README.md.)
func choose(mode Mode, ra RA, wait time.Duration) (way, error) {
	if mode == DHCP || mode == Auto && ra.Managed {
		return byDHCP, nil
	}
	if !ra.Received && mode == Auto {
		return 0, boot.Skip("net.ipv6=auto: no router advertisement within %v (an IPv4-only subnet)", wait)
	}
	if !ra.Received {
		return 0, fmt.Errorf("net.ipv6=slaac: no router advertisement within %v", wait)
	}
	return bySLAAC, nil
}

// dhcp takes a DHCPv6 lease once the link-local address is usable, and
// installs it.
func dhcp(ctx context.Context, o Options, d boot.Detail) (Lease, error) {
	if _, err := WaitLinkLocal(ctx, o.Interface, linkLocalWait); err != nil {
		return Lease{}, err
	}
	l, err := requestOnSchedule(ctx, o)
	if err != nil {
		return Lease{}, err
	}
	if err := Install(o.Interface, l); err != nil {
		return Lease{}, err
	}
	describe(d, l)
	if o.Log != nil {
		o.Log.Printf("%s: %s by DHCPv6 from %s (offered valid %v, kept forever)", o.Interface, l.Addr, l.Server, l.Offered)
	}
	return l, nil
}

// slaac waits for the kernel's autoconfigured global address: the
// advertisement had no managed flag. Such addresses keep the lifetimes
// the advertisement gives them (the kernel refreshes them from the
// router's periodic advertisements); the report says so.
func slaac(ctx context.Context, o Options, d boot.Detail) (Lease, error) {
	link, err := netlink.LinkByName(o.Interface)
	if err != nil {
		return Lease{}, fmt.Errorf("link %s: %w", o.Interface, err)
	}
	deadline := time.Now().Add(linkLocalWait)
	for {
		addrs, err := netlink.AddrList(link, netlink.FAMILY_V6)
		if err != nil {
			return Lease{}, fmt.Errorf("list IPv6 addresses of %s: %w", o.Interface, err)
		}
		var got []string
		for _, a := range addrs {
			if a.IP.IsGlobalUnicast() && a.Flags&unix.IFA_F_TENTATIVE == 0 {
				got = append(got, a.IPNet.String())
			}
		}
		if len(got) > 0 {
			d["slaac"] = strings.Join(got, ",")
			d["valid_lft"] = "from the router advertisement"
			return Lease{}, nil
		}
		if time.Now().After(deadline) {
			return Lease{}, fmt.Errorf("%s: router advertisement (%s) but no autoconfigured address within %v", o.Interface, d["ra"], linkLocalWait)
		}
		select {
		case <-ctx.Done():
			return Lease{}, fmt.Errorf("%s: waiting for an autoconfigured address: %w", o.Interface, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

func setConf(dir, key, value string) error {
	if err := os.WriteFile(filepath.Join(dir, key), []byte(value), 0o644); err != nil {
		return fmt.Errorf("set %s=%s: %w", filepath.Join(dir, key), value, err)
	}
	return nil
}

func describe(d boot.Detail, l Lease) {
	d["address"] = l.Addr.String()
	d["valid_lft"] = "forever"
	if l.Gateway.IsValid() {
		d["gateway"] = l.Gateway.String()
	}
	if l.Server != "" {
		d["server"] = l.Server
		d["offered_valid"] = l.Offered.String()
	}
	if len(l.Exchange) > 0 {
		d["exchange"] = strings.Join(l.Exchange, ",")
	}
	if len(l.DNS) > 0 {
		s := make([]string, len(l.DNS))
		for i, a := range l.DNS {
			s[i] = a.String()
		}
		d["dns"] = strings.Join(s, ",")
	}
}

// Verify checks that l is installed on ifname (the address with both
// lifetimes forever, the static gateway's default route) and, when
// procRoot is not "", that no AF_PACKET socket is open. A zero l (SLAAC,
// off) checks the sockets only.
func Verify(ctx context.Context, ifname string, l Lease, procRoot string) error {
	if l.Addr.IsValid() {
		link, err := netlink.LinkByName(ifname)
		if err != nil {
			return fmt.Errorf("link %s: %w", ifname, err)
		}
		if err := verifyAddr(link, l.Addr); err != nil {
			return err
		}
		if l.Gateway.IsValid() {
			gw, err := DefaultGateway(link)
			if err != nil {
				return err
			}
			if gw != l.Gateway {
				return fmt.Errorf("IPv6 default route via %v, want %s", gw, l.Gateway)
			}
		}
	}
	if procRoot == "" {
		return nil
	}
	n, err := netconf.PacketSockets(procRoot)
	if err != nil {
		return err
	}
	if n != 0 {
		return fmt.Errorf("%d AF_PACKET sockets open after the IPv6 configuration (%s/net/packet)", n, procRoot)
	}
	return nil
}

func verifyAddr(link netlink.Link, p netip.Prefix) error {
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V6)
	if err != nil {
		return fmt.Errorf("list IPv6 addresses of %s: %w", link.Attrs().Name, err)
	}
	for _, a := range addrs {
		ones, _ := a.Mask.Size()
		if !a.IP.Equal(net.IP(p.Addr().AsSlice())) || ones != p.Bits() {
			continue
		}
		if uint32(a.ValidLft) != netconf.Forever || uint32(a.PreferedLft) != netconf.Forever {
			return fmt.Errorf("%s on %s has valid_lft %d preferred_lft %d, want forever", p, link.Attrs().Name, a.ValidLft, a.PreferedLft)
		}
		return nil
	}
	return fmt.Errorf("%s not on %s", p, link.Attrs().Name)
}

// DefaultGateway returns the gateway of link's IPv6 default route (the
// router advertisement's, or a static one), or an invalid Addr if there is
// none.
func DefaultGateway(link netlink.Link) (netip.Addr, error) {
	routes, err := netlink.RouteList(link, netlink.FAMILY_V6)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("list IPv6 routes: %w", err)
	}
	for _, r := range routes {
		if (r.Dst == nil || r.Dst.IP.IsUnspecified() && maskZero(r.Dst.Mask)) && r.Gw != nil {
			gw, _ := netip.AddrFromSlice(r.Gw)
			return gw, nil
		}
	}
	return netip.Addr{}, nil
}

func maskZero(m net.IPMask) bool {
	ones, _ := m.Size()
	return ones == 0
}

// Describe is the step detail of a lease, for an event line.
func Describe(l Lease) string {
	d := boot.Detail{}
	describe(d, l)
	return fmt.Sprint(map[string]string(d))
}
