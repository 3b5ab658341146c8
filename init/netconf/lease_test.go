package netconf

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/rfc1035label"
)

func route(dst, via string) dhcpv4.Route {
	_, n, err := net.ParseCIDR(dst)
	if err != nil {
		panic(err)
	}
	return dhcpv4.Route{Dest: n, Router: net.ParseIP(via).To4()}
}

// good is a lease every case below spoils in one field.
func good() Lease {
	return Lease{Addr: netip.MustParsePrefix("10.77.0.42/24"), Gateway: netip.MustParseAddr("10.77.0.1"), MTU: 1500,
		DNS: []net.IP{net.IPv4(10, 77, 0, 1)}, Domain: "example.internal", Search: []string{"a.example", "b.example"}}
}

func TestCheckLease(t *testing.T) {
	many := func(n int) []dhcpv4.Route {
		r := make([]dhcpv4.Route, n)
		for i := range r {
			r[i] = route("10."+itoa(i/256)+"."+itoa(i%256)+".0/24", "10.77.0.1")
		}
		return r
	}
	for _, c := range []struct {
		name  string
		edit  func(*Lease)
		wrong string // "" accepted; else a substring of the reason
	}{
		{"good", func(*Lease) {}, ""},
		{"no gateway", func(l *Lease) { l.Gateway = netip.Addr{} }, ""},
		{"slash 31", func(l *Lease) {
			l.Addr, l.Gateway = netip.MustParsePrefix("10.77.0.0/31"), netip.MustParseAddr("10.77.0.1")
		}, ""},
		{"slash 32 off-subnet gateway (routed address)", func(l *Lease) {
			l.Addr, l.Gateway = netip.MustParsePrefix("203.0.113.10/32"), netip.MustParseAddr("203.0.113.1")
		}, ""},
		{"mtu 576", func(l *Lease) { l.MTU = 576 }, ""},
		{"mtu 9001", func(l *Lease) { l.MTU = 9001 }, ""},
		{"mtu unset", func(l *Lease) { l.MTU = 0 }, ""},
		{"google cloud routes", func(l *Lease) {
			l.Addr, l.Gateway = netip.MustParsePrefix("10.128.0.5/32"), netip.MustParseAddr("10.128.0.1")
			l.Routes = []dhcpv4.Route{route("10.128.0.1/32", "0.0.0.0"), route("0.0.0.0/0", "10.128.0.1")}
		}, ""},
		{"trailing dot and underscore", func(l *Lease) { l.Domain = "_srv.example.internal." }, ""},
		{"64 routes", func(l *Lease) { l.Routes = many(MaxRoutes) }, ""},

		{"missing address", func(l *Lease) { l.Addr = netip.Prefix{} }, "address missing"},
		{"subnet broadcast", func(l *Lease) { l.Addr = netip.MustParsePrefix("10.77.0.255/24") }, "broadcast address of 10.77.0.0/24"},
		{"network address", func(l *Lease) { l.Addr = netip.MustParsePrefix("10.77.0.0/24") }, "network address"},
		{"limited broadcast", func(l *Lease) { l.Addr = netip.MustParsePrefix("255.255.255.255/32") }, "limited broadcast"},
		{"loopback", func(l *Lease) { l.Addr = netip.MustParsePrefix("127.0.0.1/8") }, "loopback"},
		{"multicast", func(l *Lease) { l.Addr = netip.MustParsePrefix("224.0.0.251/24") }, "multicast"},
		{"link-local", func(l *Lease) { l.Addr = netip.MustParsePrefix("169.254.1.2/16") }, "link-local"},
		{"unspecified", func(l *Lease) { l.Addr = netip.MustParsePrefix("0.0.0.0/24") }, "unspecified"},
		{"this network", func(l *Lease) { l.Addr = netip.MustParsePrefix("0.1.2.3/24") }, "0.0.0.0/8"},
		{"class E", func(l *Lease) { l.Addr = netip.MustParsePrefix("240.1.2.3/24") }, "reserved"},
		{"slash 0", func(l *Lease) { l.Addr = netip.MustParsePrefix("10.77.0.42/0") }, "prefix length 0"},
		{"IPv6 address", func(l *Lease) { l.Addr = netip.MustParsePrefix("fd00::2/64") }, "not IPv4"},
		{"router limited broadcast", func(l *Lease) { l.Gateway = netip.MustParseAddr("255.255.255.255") }, "router 255.255.255.255 is the limited broadcast"},
		{"router subnet broadcast", func(l *Lease) { l.Gateway = netip.MustParseAddr("10.77.0.255") }, "router 10.77.0.255 is the broadcast"},
		{"router multicast", func(l *Lease) { l.Gateway = netip.MustParseAddr("224.0.0.1") }, "multicast"},
		{"router loopback", func(l *Lease) { l.Gateway = netip.MustParseAddr("127.0.0.1") }, "loopback"},
		{"router unspecified", func(l *Lease) { l.Gateway = netip.MustParseAddr("0.0.0.0") }, "unspecified"},
		{"router is us", func(l *Lease) { l.Gateway = netip.MustParseAddr("10.77.0.42") }, "own address"},
		{"router off-subnet", func(l *Lease) { l.Gateway = netip.MustParseAddr("192.0.2.1") }, "outside the leased subnet"},
		{"mtu 68", func(l *Lease) { l.MTU = 68 }, "mtu 68 outside"},
		{"mtu 575", func(l *Lease) { l.MTU = 575 }, "mtu 575"},
		{"mtu 65536", func(l *Lease) { l.MTU = 65536 }, "mtu 65536"},
		{"65 routes", func(l *Lease) { l.Routes = many(MaxRoutes + 1) }, "65, more than 64"},
		{"route via broadcast", func(l *Lease) { l.Routes = []dhcpv4.Route{route("10.9.0.0/16", "255.255.255.255")} }, "router is the limited broadcast"},
		{"route via multicast", func(l *Lease) { l.Routes = []dhcpv4.Route{route("10.9.0.0/16", "239.1.1.1")} }, "multicast"},
		{"route via us", func(l *Lease) { l.Routes = []dhcpv4.Route{route("10.9.0.0/16", "10.77.0.42")} }, "own address"},
		{"route to multicast", func(l *Lease) { l.Routes = []dhcpv4.Route{route("224.0.0.0/4", "10.77.0.1")} }, "not unicast"},
		{"route host bits", func(l *Lease) {
			l.Routes = []dhcpv4.Route{{Dest: &net.IPNet{IP: net.IPv4(10, 9, 1, 1).To4(), Mask: net.CIDRMask(16, 32)}, Router: net.IPv4(10, 77, 0, 1)}}
		}, "host bits"},
		{"route non-contiguous", func(l *Lease) {
			l.Routes = []dhcpv4.Route{{Dest: &net.IPNet{IP: net.IPv4(10, 0, 0, 0).To4(), Mask: net.IPv4Mask(255, 0, 255, 0)}, Router: net.IPv4(10, 77, 0, 1)}}
		}, "not an IPv4 prefix"},
		{"dns broadcast", func(l *Lease) { l.DNS = []net.IP{net.IPv4bcast} }, "nameserver 255.255.255.255"},
		{"dns loopback", func(l *Lease) { l.DNS = []net.IP{net.IPv4(127, 0, 0, 53)} }, "loopback"},
		{"dns unspecified", func(l *Lease) { l.DNS = []net.IP{net.IPv4zero} }, "unspecified"},
		{"dns garbage", func(l *Lease) { l.DNS = []net.IP{{1, 2, 3}} }, "not an IPv4"},
		{"domain newline", func(l *Lease) { l.Domain = "evil.example\nnameserver 6.6.6.6" }, `option 15`},
		{"domain space", func(l *Lease) { l.Domain = "a b" }, "not allowed"},
		{"domain NUL", func(l *Lease) { l.Domain = "a\x00b" }, "not allowed"},
		{"domain empty label", func(l *Lease) { l.Domain = "a..b" }, "label of length 0"},
		{"domain hyphen", func(l *Lease) { l.Domain = "-a.b" }, "hyphen"},
		{"domain long label", func(l *Lease) { l.Domain = strings.Repeat("a", 64) + ".b" }, "label of length 64"},
		{"domain too long", func(l *Lease) { l.Domain = strings.Repeat("abcdefg.", 32) + "x" }, "length 257"},
		{"search newline", func(l *Lease) { l.Search = []string{"ok.example", "x\noptions ndots:15"} }, "option 119"},
		{"search CR", func(l *Lease) { l.Search = []string{"x\r"} }, "option 119"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := good()
			c.edit(&l)
			got, err := CheckLease(l)
			switch {
			case c.wrong == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.wrong == "":
				if got.Lease().Addr != l.Addr {
					t.Errorf("accepted lease %v, want %v", got.Lease().Addr, l.Addr)
				}
			case err == nil:
				t.Fatalf("accepted, want refused (%s)", c.wrong)
			case !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.wrong):
				t.Errorf("error %q, want ErrRefused with %q", err, c.wrong)
			case strings.ContainsAny(err.Error(), "\n\r\x00"):
				t.Errorf("the reason carries a control byte: %q", err)
			}
		})
	}
}

// TestCheckLeaseLimits: nameservers past MaxDNS and search domains past
// MaxSearch are dropped, not installed.
func TestCheckLeaseLimits(t *testing.T) {
	l := good()
	for i := range MaxDNS + 2 {
		l.DNS = append(l.DNS, net.IPv4(10, 77, 1, byte(i+1)))
	}
	for range MaxSearch + 3 {
		l.Search = append(l.Search, "s.example")
	}
	c, err := CheckLease(l)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.Lease().DNS); n != MaxDNS {
		t.Errorf("%d nameservers kept, want %d", n, MaxDNS)
	}
	if n := len(c.Lease().Search); n != MaxSearch {
		t.Errorf("%d search domains kept, want %d", n, MaxSearch)
	}
}

// TestParseAck: the mask is taken as sent; a non-contiguous one is
// refused (net.IPMask.Size says 0, which would have been a /0).
func TestParseAck(t *testing.T) {
	for _, c := range []struct {
		mask  net.IPMask
		want  string
		wrong string
	}{
		{net.CIDRMask(24, 32), "10.77.0.42/24", ""},
		{nil, "10.77.0.42/32", ""},
		{net.IPv4Mask(255, 0, 255, 0), "", "not a contiguous"},
		{net.IPv4Mask(0, 0, 0, 0), "10.77.0.42/0", ""}, // CheckLease refuses it
	} {
		m, _ := dhcpv4.New(dhcpv4.WithYourIP(net.IPv4(10, 77, 0, 42)))
		if c.mask != nil {
			m.UpdateOption(dhcpv4.OptSubnetMask(c.mask))
		}
		l, err := parseAck(m)
		if c.wrong != "" {
			if err == nil || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.wrong) {
				t.Errorf("mask %v: %v, %v; want refused %q", c.mask, l.Addr, err, c.wrong)
			}
			continue
		}
		if err != nil || l.Addr.String() != c.want {
			t.Errorf("mask %v: %v, %v; want %s", c.mask, l.Addr, err, c.want)
		}
	}
	m, _ := dhcpv4.New(dhcpv4.WithYourIP(net.IPv4(10, 77, 0, 42)),
		dhcpv4.WithOption(dhcpv4.OptDomainSearch(&rfc1035label.Labels{Labels: []string{"a.example"}})))
	if l, err := parseAck(m); err != nil || len(l.Search) != 1 || l.Search[0] != "a.example" {
		t.Errorf("search list %v, %v", l.Search, err)
	}
}

// TestWriteResolvConf: the file holds one line per setting and nothing
// else, and replaces the old file whole.
func TestWriteResolvConf(t *testing.T) {
	p := filepath.Join(t.TempDir(), "etc", "resolv.conf")
	c, err := CheckLease(good())
	if err != nil {
		t.Fatal(err)
	}
	if err := writeResolvConf(p, c.Lease()); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	want := "domain example.internal\nnameserver 10.77.0.1\nsearch a.example b.example\n"
	if string(b) != want {
		t.Errorf("resolv.conf %q, want %q", b, want)
	}
	if _, err := os.Stat(p + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary file left: %v", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
