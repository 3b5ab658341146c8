package config

import (
	"strings"
	"testing"
	"time"
)

// TestIPv6Keys checks what the net.ipv6* keys accept, what they refuse,
// and the relation static mode needs.
func TestIPv6Keys(t *testing.T) {
	d := Default()
	if d.Net.IPv6.Mode != IPv6Auto || d.Net.IPv6.RAWait != 2*time.Second || d.Net.IPv6.Address.IsValid() {
		t.Errorf("default IPv6 = %+v", d.Net.IPv6)
	}
	for _, tc := range []struct {
		in      string
		wantErr string // "" = accepted
		check   func(c Config) bool
	}{
		{in: "net.ipv6=dhcp", check: func(c Config) bool { return c.Net.IPv6.Mode == IPv6DHCP }},
		{in: "net.ipv6=off\nnet.mode=off", check: func(c Config) bool { return c.Net.IPv6.Mode == IPv6Off && c.Net.Mode == NetOff }},
		{in: "net.ipv6=slaac", check: func(c Config) bool { return c.Net.IPv6.Mode == IPv6SLAAC }},
		{in: "net.ipv6=static\nnet.ipv6_address=2001:db8::10/64\nnet.ipv6_gateway=fe80::1", check: func(c Config) bool {
			return c.Net.IPv6.Address.String() == "2001:db8::10/64" && c.Net.IPv6.Gateway.String() == "fe80::1"
		}},
		{in: "net.ipv6_ra_wait=250ms", check: func(c Config) bool { return c.Net.IPv6.RAWait == 250*time.Millisecond }},
		{in: "net.ipv6=v6only", wantErr: "want one of auto, dhcp, slaac, static, off"},
		{in: "net.ipv6_address=10.0.0.2/24", wantErr: "not an IPv6 CIDR address"},
		{in: "net.ipv6_address=::ffff:10.0.0.2/120", wantErr: "not an IPv6 CIDR address"},
		{in: "net.ipv6_address=2001:db8::10", wantErr: "not an IPv6 CIDR address"},
		{in: "net.ipv6_gateway=10.0.0.1", wantErr: "not an IPv6 address"},
		{in: "net.ipv6_gateway=fe80::1%eth0", wantErr: "not an IPv6 address"},
		{in: "net.ipv6_ra_wait=-1s", wantErr: "negative duration"},
		{in: "net.ipv6=static", wantErr: "net.ipv6=static needs net.ipv6_address"},
	} {
		c, err := Parse(strings.NewReader(tc.in + "\n"))
		if err == nil {
			err = c.Validate()
		}
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.wantErr)
		case tc.check != nil && err == nil && !tc.check(c):
			t.Errorf("%q: got %+v", tc.in, c.Net)
		}
	}
	// Like every net.* key, net.ipv6 cannot come from user-data: it acted
	// before the network that brought the user-data in.
	if refusedKey("net.ipv6") == "" {
		t.Error("net.ipv6 accepted from user-data")
	}
}
