package netconf6

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

var testHW = net.HardwareAddr{0x02, 0, 0, 0xaa, 0xbb, 0xcc}

// reply builds the Reply a server would send to me, for addr, then lets
// edit spoil it.
func reply(t *testing.T, me ours, addr string, edit func(*dhcpv6.Message)) *dhcpv6.Message {
	t.Helper()
	m, err := dhcpv6.NewMessage()
	if err != nil {
		t.Fatal(err)
	}
	m.MessageType = dhcpv6.MessageTypeReply
	m.AddOption(dhcpv6.OptClientID(me.clientID))
	m.AddOption(dhcpv6.OptServerID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1}}))
	ia := &dhcpv6.OptIANA{IaId: me.iaid}
	ia.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: net.ParseIP(addr), PreferredLifetime: time.Hour, ValidLifetime: time.Hour})
	m.AddOption(ia)
	m.AddOption(dhcpv6.OptDNS(net.ParseIP("fd00:78::53")))
	if edit != nil {
		edit(m)
	}
	return m
}

func setAddr(addr string, valid, preferred time.Duration) func(*dhcpv6.Message) {
	return func(m *dhcpv6.Message) {
		ia := m.Options.OneIANA()
		ia.Options = dhcpv6.IdentityOptions{}
		ia.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: net.ParseIP(addr), PreferredLifetime: preferred, ValidLifetime: valid})
	}
}

func TestParseReply(t *testing.T) {
	me, err := identity(testHW)
	if err != nil {
		t.Fatal(err)
	}
	if me.iaid != [4]byte{0, 0xaa, 0xbb, 0xcc} {
		t.Fatalf("IAID %x, want the hardware address's last four bytes", me.iaid)
	}
	dns := func(ips ...string) func(*dhcpv6.Message) {
		return func(m *dhcpv6.Message) {
			var l []net.IP
			for _, s := range ips {
				l = append(l, net.ParseIP(s))
			}
			m.UpdateOption(dhcpv6.OptDNS(l...))
		}
	}
	for _, c := range []struct {
		name  string
		addr  string
		edit  func(*dhcpv6.Message)
		wrong string // "" accepted
	}{
		{"good", "fd00:78::2", nil, ""},
		{"global", "2001:db8:1::2", nil, ""},
		{"second IA_NA is ours", "fd00:78::2", func(m *dhcpv6.Message) {
			other := &dhcpv6.OptIANA{IaId: [4]byte{9, 9, 9, 9}}
			m.Options.Options = append([]dhcpv6.Option{other}, m.Options.Options...)
		}, ""},
		{"ipv4-compatible loopback", "::127.0.0.1", nil, "in ::/8"},
		{"ipv4-mapped", "::ffff:10.0.0.1", nil, "IPv4-mapped"},
		{"loopback", "::1", nil, "loopback"},
		{"unspecified", "::", nil, "unspecified"},
		{"multicast", "ff02::1", nil, "multicast"},
		{"link-local", "fe80::1", nil, "link-local"},
		{"site-local", "fec0::1", nil, "site-local"},
		{"valid lifetime 0", "fd00:78::2", setAddr("fd00:78::2", 0, 0), "valid lifetime 0"},
		{"preferred beyond valid", "fd00:78::2", setAddr("fd00:78::2", time.Minute, time.Hour), "beyond valid"},
		{"IAID not ours", "fd00:78::2", func(m *dhcpv6.Message) { m.Options.OneIANA().IaId = [4]byte{1, 2, 3, 4} }, "IAID 01020304, not ours (00aabbcc)"},
		{"other client", "fd00:78::2", func(m *dhcpv6.Message) {
			m.UpdateOption(dhcpv6.OptClientID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 9, 9, 9, 9, 9}}))
		}, "not ours"},
		{"no client id", "fd00:78::2", func(m *dhcpv6.Message) { m.Options.Del(dhcpv6.OptionClientID) }, "for client none"},
		{"no IA_NA", "fd00:78::2", func(m *dhcpv6.Message) { m.Options.Del(dhcpv6.OptionIANA) }, "without IA_NA"},
		{"IA_NA without address", "fd00:78::2", func(m *dhcpv6.Message) { m.Options.OneIANA().Options = dhcpv6.IdentityOptions{} }, "without an address"},
		{"dns loopback", "fd00:78::2", dns("::1"), "DNS server ::1 is loopback"},
		{"dns multicast", "fd00:78::2", dns("ff02::fb"), "multicast"},
		{"dns link-local", "fd00:78::2", dns("fe80::53"), "link-local"},
		{"dns mapped", "fd00:78::2", dns("::ffff:1.1.1.1"), "IPv4-mapped"},
		{"server DUID too long", "fd00:78::2", func(m *dhcpv6.Message) {
			m.UpdateOption(dhcpv6.OptServerID(&dhcpv6.DUIDOpaque{Type: 0x9999, Data: make([]byte, 200)}))
		}, "server DUID of 202 bytes"},
		{"status", "fd00:78::2", func(m *dhcpv6.Message) {
			m.AddOption(&dhcpv6.OptStatusCode{StatusCode: iana.StatusNoAddrsAvail, StatusMessage: "none\nHOTPATH-REPORT"})
		}, `"none\nHOTPATH-REPORT"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := parseReply(reply(t, me, c.addr, c.edit), me)
			switch {
			case c.wrong == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.wrong == "":
				if l.Addr != netip.PrefixFrom(netip.MustParseAddr(c.addr), 128) {
					t.Errorf("lease %v, want %s/128", l.Addr, c.addr)
				}
			case err == nil:
				t.Fatalf("accepted %v, want refused (%s)", l.Addr, c.wrong)
			case !strings.Contains(err.Error(), c.wrong):
				t.Errorf("error %q, want %q", err, c.wrong)
			case strings.ContainsAny(err.Error(), "\n\r"):
				t.Errorf("error carries a line break: %q", err)
			}
		})
	}
	// More than MaxDNS servers: the first three are kept.
	l, err := parseReply(reply(t, me, "fd00:78::2", dns("fd00::1", "fd00::2", "fd00::3", "fd00::4")), me)
	if err != nil || len(l.DNS) != MaxDNS {
		t.Errorf("4 DNS servers: %v, %v; want %d kept", l.DNS, err, MaxDNS)
	}
}

func TestCheckLease6(t *testing.T) {
	p := netip.MustParsePrefix
	a := netip.MustParseAddr
	for _, c := range []struct {
		name  string
		l     Lease
		wrong string
	}{
		{"static", Lease{Addr: p("fd00:78::9/64"), Gateway: a("fd00:78::1")}, ""},
		{"link-local gateway", Lease{Addr: p("2001:db8::9/64"), Gateway: a("fe80::1")}, ""},
		{"/128 no gateway", Lease{Addr: p("fd00:78::9/128")}, ""},
		{"missing", Lease{}, "address missing"},
		{"/0", Lease{Addr: p("fd00:78::9/0")}, "prefix length 0"},
		{"anycast", Lease{Addr: p("fd00:78::/64")}, "subnet-router anycast"},
		{"IPv4", Lease{Addr: p("10.0.0.1/24")}, "IPv4"},
		{"gateway multicast", Lease{Addr: p("fd00:78::9/64"), Gateway: a("ff02::2")}, "gateway ff02::2 is multicast"},
		{"gateway loopback", Lease{Addr: p("fd00:78::9/64"), Gateway: a("::1")}, "loopback"},
		{"gateway self", Lease{Addr: p("fd00:78::9/64"), Gateway: a("fd00:78::9")}, "own address"},
		{"gateway elsewhere", Lease{Addr: p("fd00:78::9/64"), Gateway: a("fd00:99::1")}, "neither link-local nor inside"},
	} {
		_, err := CheckLease(c.l)
		if c.wrong == "" && err != nil || c.wrong != "" && (err == nil || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.wrong)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.wrong)
		}
	}
}
