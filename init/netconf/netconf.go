// Package netconf configures the primary interface's IPv4 address: by
// DHCPv4 through u-root's dhclient, or statically from the configuration
// (which the kernel command line may override).
//
// The appliance takes one lease and keeps it: the address is installed
// with valid_lft and preferred_lft forever and the DHCP client is gone once
// bound. A DHCP client that stays alive keeps an AF_PACKET socket open, and
// the kernel then copies every received packet to it (case study step 7,
// "the nosy neighbour"); u-root's client closes its raw socket when the
// exchange ends, and the verify step proves no AF_PACKET socket remains by
// counting the entries in /proc/net/packet. The lease is never renewed: on
// EC2 (and in the tests) the address of an instance does not change for its
// lifetime, and a renewal would need the socket back.
package netconf

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/u-root/u-root/pkg/dhclient"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Forever is the kernel's infinite address lifetime (INFINITY_LIFE_TIME).
const Forever = 0xFFFFFFFF

// Lease is the network configuration to install.
type Lease struct {
	Addr    netip.Prefix
	Gateway netip.Addr // invalid: no default route
	MTU     int        // 0: leave the MTU alone
	DNS     []net.IP
	Search  []string
	Domain  string
	// Routes are classless static routes (option 121); when present they
	// replace the router option, as RFC 3442 says.
	Routes []dhcpv4.Route
	Server string // the DHCP server that answered
}

// DHCPOptions configure the DHCP step.
type DHCPOptions struct {
	Interface string
	// Timeout is the first exchange's timeout; each next one doubles it
	// up to BackoffMax (Schedule). Retries is the number of exchanges
	// (at boot; the background goes on until it has a lease).
	Timeout     time.Duration
	Retries     int
	BackoffMax  time.Duration // 0: no cap
	LinkTimeout time.Duration // how long to wait for the link to come up
	MTU         int           // overrides the lease's MTU when non-zero
	// ResolvConf is where to write the lease's DNS settings; "" skips it.
	ResolvConf string
	// ProcRoot is where /proc is mounted (its net/packet is checked).
	ProcRoot string
	// Log receives dhclient's log lines; nil discards them.
	Log *log.Logger
}

// DHCPStep returns the step that takes a DHCPv4 lease and installs it.
func DHCPStep(o DHCPOptions) boot.Step {
	var want Lease
	return boot.Step{
		Name: "net-dhcp",
		Apply: func(ctx context.Context, d boot.Detail) error {
			l, err := requestAndInstall(ctx, o)
			if err != nil {
				return err
			}
			want = l
			describe(d, l)
			return nil
		},
		Verify: func(ctx context.Context, d boot.Detail) error {
			return Verify(ctx, o.Interface, want, o.ProcRoot)
		},
	}
}

func requestAndInstall(ctx context.Context, o DHCPOptions) (Lease, error) {
	l, err := RequestLease(ctx, o)
	if err != nil {
		return Lease{}, err
	}
	if o.MTU != 0 {
		l.MTU = o.MTU
	}
	if err := Install(o.Interface, l, o.ResolvConf); err != nil {
		return Lease{}, err
	}
	return l, nil
}

// KeepTrying takes a lease in the background once the boot attempts have
// failed: an instance without an address is unreachable, and nobody can
// log in to retry. Each attempt is one exchange whose timeout follows the
// Schedule from o.Timeout up to max, as at boot; between attempts it waits
// min, doubling up to max. It calls bound once with the installed and
// verified lease and the number of attempts, and returns then or when ctx
// ends.
func KeepTrying(ctx context.Context, o DHCPOptions, min, max time.Duration, bound func(Lease, int)) {
	wait := min
	sched := Schedule{First: o.Timeout, Max: max}
	for attempt := 1; ; attempt++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = NextBackoff(wait, max)
		one := o
		one.Timeout, one.Retries, one.BackoffMax = sched.Timeout(attempt-1), 1, max
		l, err := requestAndInstall(ctx, one)
		if err == nil {
			err = Verify(ctx, o.Interface, l, o.ProcRoot)
		}
		if err != nil {
			if o.Log != nil {
				o.Log.Printf("background attempt %d failed: %v; next in %v", attempt, err, wait)
			}
			continue
		}
		bound(l, attempt)
		return
	}
}

// NextBackoff doubles d up to max.
func NextBackoff(d, max time.Duration) time.Duration {
	return min(2*d, max)
}

// Describe is the step detail of an installed lease, for an event line.
func Describe(l Lease) string {
	d := boot.Detail{}
	describe(d, l)
	return fmt.Sprint(map[string]string(d))
}

// StaticStep returns the step that installs a configured address.
func StaticStep(ifname string, l Lease, procRoot string) boot.Step {
	return boot.Step{
		Name: "net-static",
		Apply: func(_ context.Context, d boot.Detail) error {
			if !l.Addr.IsValid() {
				return fmt.Errorf("net.mode=static without net.address")
			}
			if _, err := LinkUp(ifname); err != nil {
				return err
			}
			if err := Install(ifname, l, ""); err != nil {
				return err
			}
			describe(d, l)
			return nil
		},
		Verify: func(ctx context.Context, _ boot.Detail) error {
			return Verify(ctx, ifname, l, procRoot)
		},
	}
}

func describe(d boot.Detail, l Lease) {
	d["address"] = l.Addr.String()
	d["valid_lft"] = "forever"
	if l.Gateway.IsValid() {
		d["gateway"] = l.Gateway.String()
	}
	if l.MTU != 0 {
		d["mtu"] = strconv.Itoa(l.MTU)
	}
	if l.Server != "" {
		d["server"] = l.Server
	}
}

// RequestLease takes a DHCPv4 lease on o.Interface: up to o.Retries
// exchanges on the back-off Schedule (backoff.go), each with u-root's
// dhclient (which brings the link up, and closes its AF_PACKET socket
// before returning), until one succeeds or ctx ends.
func RequestLease(ctx context.Context, o DHCPOptions) (Lease, error) {
	var l Lease
	_, err := Retry(ctx, Schedule{First: o.Timeout, Max: o.BackoffMax, Tries: o.Retries},
		func(ctx context.Context, timeout time.Duration) error {
			var err error
			l, err = exchange(ctx, o, timeout)
			return err
		})
	if err != nil {
		return Lease{}, fmt.Errorf("dhcp %s: no lease: %w", o.Interface, err)
	}
	return l, nil
}

// exchange runs one DHCPv4 exchange that waits up to timeout for each
// answer.
func exchange(ctx context.Context, o DHCPOptions, timeout time.Duration) (Lease, error) {
	// A send that fails at once with ENETDOWN or ENOBUFS is the link
	// settling, not the network: on Linux 6.12 virtio_net wakes its tx
	// queues from a work item after ndo_open (virtnet_config_changed_work),
	// and a packet that finds the queue stopped under the noqueue qdisc is
	// dropped with ENETDOWN ("Virtual device eth0 asks to queue packet!",
	// net/core/dev.c __dev_queue_xmit). Such an exchange is tried again
	// after a short pause, a few times, before it counts as failed.
	var err error
	for pause := 100 * time.Millisecond; ; pause *= 2 {
		var l Lease
		l, err = requestLease(ctx, o, timeout)
		if err == nil || !settling(err) || pause > 2*time.Second {
			return l, err
		}
		if o.Log != nil {
			o.Log.Printf("dhcp %s: %v: the link is settling, again in %v", o.Interface, err, pause)
		}
		select {
		case <-ctx.Done():
			return Lease{}, err
		case <-time.After(pause):
		}
	}
}

// settling reports whether a DHCP exchange failed on a send the kernel
// refused because the interface's queue was not ready yet.
func settling(err error) bool {
	return errors.Is(err, unix.ENETDOWN) || errors.Is(err, unix.ENOBUFS)
}

func requestLease(ctx context.Context, o DHCPOptions, timeout time.Duration) (Lease, error) {
	nonblockingXID()
	link, err := netlink.LinkByName(o.Interface)
	if err != nil {
		return Lease{}, fmt.Errorf("dhcp: link %s: %w", o.Interface, err)
	}
	// dhclient logs through the standard logger, a lease as a ~30-line
	// packet dump: keep the first line of each message, so that the
	// console (EC2 keeps its last 64 KiB) is not filled with them.
	log.SetFlags(0)
	log.SetPrefix("")
	log.SetOutput(firstLine{o.Log})
	cfg := dhclient.Config{
		// One try: the library doubles its timeout on each retry without
		// a bound; RequestLease retries on its own Schedule instead.
		Timeout: timeout,
		Retries: 1,
		Modifiers4: []dhcpv4.Modifier{
			dhcpv4.WithRequestedOptions(dhcpv4.OptionSubnetMask, dhcpv4.OptionRouter,
				dhcpv4.OptionInterfaceMTU, dhcpv4.OptionDomainNameServer, dhcpv4.OptionClasslessStaticRoute),
			// Our vendor class instead of u-root's "PXE UROOT".
			dhcpv4.WithOption(dhcpv4.OptClassIdentifier("hotpath")),
		},
	}
	lt := o.LinkTimeout
	if lt == 0 {
		lt = 10 * time.Second
	}
	var errs []error
	for r := range dhclient.SendRequests(ctx, []netlink.Link{link}, true, false, cfg, lt) {
		if r.Err != nil {
			errs = append(errs, r.Err)
			continue
		}
		p, ok := r.Lease.(*dhclient.Packet4)
		if !ok {
			continue
		}
		return fromPacket(p)
	}
	if len(errs) == 0 {
		return Lease{}, fmt.Errorf("dhcp %s: no lease (link did not come up within %v?)", o.Interface, lt)
	}
	return Lease{}, fmt.Errorf("dhcp %s: %w", o.Interface, errors.Join(errs...))
}

// firstLine writes the first line of each log message to l (nil: nowhere).
type firstLine struct{ l *log.Logger }

func (f firstLine) Write(p []byte) (int, error) {
	if f.l != nil {
		line, _, _ := strings.Cut(string(p), "\n")
		if len(line) > 160 {
			line = line[:160] + "..."
		}
		f.l.Print(line)
	}
	return len(p), nil
}

// LinkUp looks ifname up and sets it up, for an address installed without
// a DHCP exchange (which sets the link up itself): a static IPv4 or IPv6
// address.
func LinkUp(ifname string) (netlink.Link, error) {
	link, err := netlink.LinkByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("link %s: %w", ifname, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return nil, fmt.Errorf("link set %s up: %w", ifname, err)
	}
	return link, nil
}

// PrefixNet is p as the net.IPNet netlink takes, for either family.
func PrefixNet(p netip.Prefix) *net.IPNet {
	bits := 32
	if p.Addr().Is6() {
		bits = 128
	}
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), bits)}
}

// Verify checks that l is installed on ifname: the address with both
// lifetimes forever, the default route, the MTU, and (when procRoot is not
// "") that no AF_PACKET socket is open. Sockets closed by the DHCP client
// may take a moment to leave /proc/net/packet, so that check polls for up
// to a second before failing.
func Verify(ctx context.Context, ifname string, l Lease, procRoot string) error {
	link, err := netlink.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("link %s: %w", ifname, err)
	}
	if l.MTU != 0 && link.Attrs().MTU != l.MTU {
		return fmt.Errorf("%s mtu %d, want %d", ifname, link.Attrs().MTU, l.MTU)
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("list addresses of %s: %w", ifname, err)
	}
	found := false
	for _, a := range addrs {
		ones, _ := a.Mask.Size()
		if a.IP.Equal(net.IP(l.Addr.Addr().AsSlice())) && ones == l.Addr.Bits() {
			found = true
			if uint32(a.ValidLft) != Forever || uint32(a.PreferedLft) != Forever {
				return fmt.Errorf("%s on %s has valid_lft %d preferred_lft %d, want forever", l.Addr, ifname, a.ValidLft, a.PreferedLft)
			}
		}
	}
	if !found {
		return fmt.Errorf("%s not on %s", l.Addr, ifname)
	}
	if l.Gateway.IsValid() && len(l.Routes) == 0 {
		gw, err := DefaultGateway(link)
		if err != nil {
			return err
		}
		if gw != l.Gateway {
			return fmt.Errorf("default route via %v, want %s", gw, l.Gateway)
		}
	}
	if procRoot != "" {
		deadline := time.Now().Add(time.Second)
		for {
			n, err := PacketSockets(procRoot)
			if err != nil {
				return err
			}
			if n == 0 {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("%d AF_PACKET sockets still open after the lease (%s/net/packet)", n, procRoot)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// DefaultGateway returns the gateway of link's IPv4 default route, or an
// invalid Addr if there is none.
func DefaultGateway(link netlink.Link) (netip.Addr, error) {
	routes, err := netlink.RouteList(link, netlink.FAMILY_V4)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("list routes: %w", err)
	}
	for _, r := range routes {
		if (r.Dst == nil || r.Dst.IP.IsUnspecified() && isZeroMask(r.Dst.Mask)) && r.Gw != nil {
			gw, _ := netip.AddrFromSlice(r.Gw.To4())
			return gw, nil
		}
	}
	return netip.Addr{}, nil
}

func isZeroMask(m net.IPMask) bool {
	ones, _ := m.Size()
	return ones == 0
}

// PacketSockets counts the AF_PACKET sockets open in the network namespace
// of the reader, one per line of procRoot/net/packet after the header.
func PacketSockets(procRoot string) (int, error) {
	f, err := os.Open(filepath.Join(procRoot, "net/packet"))
	if err != nil {
		return 0, fmt.Errorf("count packet sockets: %w", err)
	}
	defer f.Close()
	n := -1 // the header line
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			n++
		}
	}
	if n < 0 {
		n = 0
	}
	return n, sc.Err()
}
