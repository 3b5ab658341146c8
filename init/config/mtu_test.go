package config

import (
	"strings"
	"testing"
)

// TestMTUKey: net.mtu below 576 would make init/netconf refuse every
// lease (the key overrides the lease's MTU): it fails at parse time.
func TestMTUKey(t *testing.T) {
	for in, want := range map[string]string{
		"net.mtu=0": "", "net.mtu=576": "", "net.mtu=9001": "", "net.mtu=65535": "",
		"net.mtu=68": "out of range", "net.mtu=575": "out of range", "net.mtu=65536": "out of range", "net.mtu=-1": "out of range",
		"net.mtu=x": "not an integer",
	} {
		c, err := Parse(strings.NewReader(in))
		if want == "" {
			if err != nil || "net.mtu="+c.Map()["net.mtu"] != in {
				t.Errorf("%s: %v, %v", in, c.Map()["net.mtu"], err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", in, err, want)
		}
	}
}
