package vm

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdlayher/ndp"
)

// RAConfig is what a RouterAdvertiser announces on a test's tap: what
// EC2's VPC router says in a dual-stack or IPv6-only subnet (managed flag
// set, addresses by DHCPv6, the subnet's /64 on-link) unless a test asks
// for SLAAC.
type RAConfig struct {
	Iface string // the tap, inside the namespace
	// Managed and Other are the M and O flags.
	Managed, Other bool
	// Prefix is announced on-link; Autonomous lets the guest's kernel
	// build a SLAAC address in it.
	Prefix     netip.Prefix
	Autonomous bool
	// Lifetime is the router lifetime (default 30 minutes): the guest's
	// default route via our link-local address lasts that long unless
	// renewed by the next advertisement.
	Lifetime time.Duration
	// Every is the interval of unsolicited advertisements (default 1s);
	// router solicitations are answered at once.
	Every time.Duration
	// More are further on-link prefixes (autonomous as Prefix is),
	// announced 32 to an advertisement (with router lifetime 0) after
	// the first each round: a flood, for tests of what advertisements
	// may install.
	More []netip.Prefix
}

// RouterAdvertiser sends router advertisements (mdlayher/ndp) on a tap
// inside a namespace, answering the guest's router solicitations at once
// and repeating the advertisement every cfg.Every.
type RouterAdvertiser struct {
	cfg  RAConfig
	stop chan struct{}
	wg   sync.WaitGroup

	sent, solicits atomic.Int64
	mu             sync.Mutex
	errs           []error
}

// StartRA starts a router advertiser on cfg.Iface inside n. A tap has no
// link-local address until QEMU opens it (no carrier before), and an
// advertisement must come from one, so the advertiser keeps trying to
// open its ICMPv6 socket until the address is there.
func (n *Netns) StartRA(cfg RAConfig) (*RouterAdvertiser, error) {
	if cfg.Lifetime == 0 {
		cfg.Lifetime = 30 * time.Minute
	}
	if cfg.Every == 0 {
		cfg.Every = time.Second
	}
	if !cfg.Prefix.IsValid() || !cfg.Prefix.Addr().Is6() {
		return nil, fmt.Errorf("router advertiser: prefix %v is not IPv6", cfg.Prefix)
	}
	r := &RouterAdvertiser{cfg: cfg, stop: make(chan struct{})}
	r.wg.Add(1)
	go r.run(n)
	return r, nil
}

// Close stops the advertiser.
func (r *RouterAdvertiser) Close() error {
	close(r.stop)
	r.wg.Wait()
	return nil
}

// Sent is the number of advertisements sent; Solicitations the number of
// router solicitations received.
func (r *RouterAdvertiser) Sent() int          { return int(r.sent.Load()) }
func (r *RouterAdvertiser) Solicitations() int { return int(r.solicits.Load()) }

// Errors returns the errors met (other than waiting for the address).
func (r *RouterAdvertiser) Errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

func (r *RouterAdvertiser) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

func (r *RouterAdvertiser) run(n *Netns) {
	defer r.wg.Done()
	var c *ndp.Conn
	var mac net.HardwareAddr
	for c == nil {
		n.Do(func() error {
			ifi, err := net.InterfaceByName(r.cfg.Iface)
			if err != nil {
				return err
			}
			mac = ifi.HardwareAddr
			c, _, err = ndp.Listen(ifi, ndp.LinkLocal)
			return err
		})
		if c != nil {
			break
		}
		select {
		case <-r.stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	defer c.Close()
	// Router solicitations go to all-routers (ff02::2): join it, or the
	// guest's solicitation goes unheard and it waits for the next
	// unsolicited advertisement.
	if err := c.JoinGroup(netip.MustParseAddr("ff02::2")); err != nil {
		r.fail(fmt.Errorf("router advertiser: join ff02::2: %w", err))
	}
	ras := r.messages(mac)
	solicited := make(chan struct{}, 1)
	r.wg.Add(1)
	go r.listen(c, solicited)
	t := time.NewTicker(r.cfg.Every)
	defer t.Stop()
	for {
		for _, ra := range ras {
			if err := c.WriteTo(ra, nil, netip.IPv6LinkLocalAllNodes()); err != nil {
				r.fail(fmt.Errorf("router advertisement: %w", err))
			} else {
				r.sent.Add(1)
			}
		}
		select {
		case <-r.stop:
			c.SetReadDeadline(time.Now()) // ends listen
			return
		case <-t.C:
		case <-solicited:
		}
	}
}

// listen counts router solicitations and wakes the sender for each.
func (r *RouterAdvertiser) listen(c *ndp.Conn, solicited chan<- struct{}) {
	defer r.wg.Done()
	for {
		m, _, _, err := c.ReadFrom()
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				select {
				case <-r.stop:
				default:
					r.fail(fmt.Errorf("router advertiser read: %w", err))
				}
			}
			return
		}
		if _, ok := m.(*ndp.RouterSolicitation); ok {
			r.solicits.Add(1)
			select {
			case solicited <- struct{}{}:
			default:
			}
		}
	}
}

// messages are the advertisement and, for cfg.More, the further ones.
func (r *RouterAdvertiser) messages(mac net.HardwareAddr) []*ndp.RouterAdvertisement {
	ras := []*ndp.RouterAdvertisement{r.message(mac)}
	for more := r.cfg.More; len(more) > 0; {
		n := min(32, len(more))
		m := r.message(mac)
		m.Options = m.Options[1:] // the link-layer address and the MTU
		// Not a default router: the kernel processes the prefixes of
		// such an advertisement whatever it holds as default route.
		m.RouterLifetime = 0
		for _, p := range more[:n] {
			m.Options = append(m.Options, &ndp.PrefixInformation{PrefixLength: uint8(p.Bits()), OnLink: true,
				AutonomousAddressConfiguration: r.cfg.Autonomous, ValidLifetime: 24 * time.Hour,
				PreferredLifetime: 24 * time.Hour, Prefix: p.Masked().Addr()})
		}
		ras = append(ras, m)
		more = more[n:]
	}
	return ras
}

func (r *RouterAdvertiser) message(mac net.HardwareAddr) *ndp.RouterAdvertisement {
	return &ndp.RouterAdvertisement{
		CurrentHopLimit:      64,
		ManagedConfiguration: r.cfg.Managed,
		OtherConfiguration:   r.cfg.Other,
		RouterLifetime:       r.cfg.Lifetime,
		Options: []ndp.Option{
			&ndp.PrefixInformation{
				PrefixLength:                   uint8(r.cfg.Prefix.Bits()),
				OnLink:                         true,
				AutonomousAddressConfiguration: r.cfg.Autonomous,
				ValidLifetime:                  24 * time.Hour,
				PreferredLifetime:              24 * time.Hour,
				Prefix:                         r.cfg.Prefix.Masked().Addr(),
			},
			&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: mac},
			ndp.NewMTU(1500),
		},
	}
}
