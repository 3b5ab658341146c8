package config

import (
	"strings"
	"testing"
)

// TestSetEdges holds each key's validation at its edges: the last value
// it accepts and the first it refuses.
func TestSetEdges(t *testing.T) {
	tests := []struct {
		key, value string
		ok         bool
	}{
		{"workload.env", "A=1 B=", true},
		{"workload.env", "A=1 B", false},           // no '='
		{"workload.env", "A=1 =v", false},          // no name
		{"net.interface", "abcdefghijklmno", true}, // IFNAMSIZ-1 = 15 bytes
		{"net.interface", "abcdefghijklmnop", false},
		{"net.interface", "eth/0", false},
		{"net.interface", "", true},
		{"net.address", "10.0.0.2/24", true},
		{"net.address", "10.0.0.2", false},
		{"net.address", "2001:db8::2/64", false},
		{"net.gateway", "10.0.0.1", true},
		{"net.gateway", "10.0.0.1/24", false},
		{"net.gateway", "2001:db8::1", false},
		{"sysctl.kernel.panic", "10", true}, // two components: the fewest
		{"sysctl.net.core.somaxconn", "4096", true},
		{"sysctl.panic", "10", false},
		{"sysctl.net..core", "1", false},
		{"sysctl.net.core/../x", "1", false},
		{"sysctl.net.core.somaxconn", "", false},
	}
	for _, tt := range tests {
		c := Default()
		err := c.Set(tt.key, tt.value)
		if (err == nil) != tt.ok {
			t.Errorf("Set(%q, %q) = %v, want ok=%v", tt.key, tt.value, err, tt.ok)
		}
	}
}

// TestSetSysctlOnZeroConfig: a Config not made by Default (a caller's
// zero value) takes a sysctl key too, instead of writing to a nil map.
func TestSetSysctlOnZeroConfig(t *testing.T) {
	var c Config
	if err := c.Set("sysctl.net.core.somaxconn", "4096"); err != nil {
		t.Fatal(err)
	}
	if got := c.Sysctls["net.core.somaxconn"]; got != "4096" {
		t.Errorf("Sysctls = %v", c.Sysctls)
	}
	if err := c.Set("sysctl.x", "1"); err == nil || !strings.Contains(err.Error(), "sysctl.x") {
		t.Errorf("one-component sysctl: %v, want an unknown-key error naming it", err)
	}
}
