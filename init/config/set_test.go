package config

import (
	"strings"
	"testing"
	"time"
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

// TestSysctlNameCharacters: the characters /proc/sys names use, and at
// each end of each range the first that is not.
func TestSysctlNameCharacters(t *testing.T) {
	for _, c := range "azAZ09_-" {
		if !validSysctl("net.a" + string(c)) {
			t.Errorf("validSysctl refuses %q", c)
		}
	}
	for _, c := range "`{@[/:* =" {
		if validSysctl("net.a" + string(c) + "b") {
			t.Errorf("validSysctl accepts %q", c)
		}
	}
}

// TestParseGoesOn: a bad line is reported with its number and the lines
// after it still apply.
func TestParseGoesOn(t *testing.T) {
	c, err := Parse(strings.NewReader("workload.port=9000\n\n# comment\njunk\nworkload.port=9001\n"))
	if err == nil || !strings.Contains(err.Error(), "line 4") {
		t.Errorf("Parse error %v, want one naming line 4", err)
	}
	if c.WorkloadPort != 9001 {
		t.Errorf("workload.port = %d after the bad line, want 9001", c.WorkloadPort)
	}
	d := Default()
	if err := d.ApplyCmdline("quiet hotpath.workload.port=9002 panic=10"); err != nil || d.WorkloadPort != 9002 {
		t.Errorf("ApplyCmdline of a valid line: %v, port %d", err, d.WorkloadPort)
	}
}

// TestIntRange: an integer key takes both ends of its range.
func TestIntRange(t *testing.T) {
	for _, tt := range []struct {
		v  string
		ok bool
	}{{"1", true}, {"65535", true}, {"0", false}, {"65536", false}} {
		c := Default()
		if err := c.Set("workload.port", tt.v); (err == nil) != tt.ok {
			t.Errorf("workload.port=%s: %v, want ok=%v", tt.v, err, tt.ok)
		}
	}
}

// TestValidateEdges: each relation Validate checks, at its edge.
func TestValidateEdges(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"back-off max equal to min", func(c *Config) { c.Supervise.BackoffMax = c.Supervise.BackoffMin }, true},
		{"back-off max below min", func(c *Config) { c.Supervise.BackoffMax = c.Supervise.BackoffMin - 1 }, false},
		{"back-off min zero", func(c *Config) { c.Supervise.BackoffMin = 0 }, false},
		{"dhcp back-off max zero", func(c *Config) { c.Net.DHCPBackoffMax = 0 }, false},
		{"liveness off, interval zero", func(c *Config) { c.Liveness.Probe = "off"; c.Liveness.Interval = 0 }, true},
		{"liveness tcp, interval zero", func(c *Config) { c.Liveness.Probe = "tcp"; c.Liveness.Interval = 0 }, false},
		{"liveness tcp, timeout zero", func(c *Config) { c.Liveness.Probe = "tcp"; c.Liveness.Timeout = 0 }, false},
		{"liveness tcp, both set", func(c *Config) { c.Liveness.Probe = "tcp" }, true},
		{"deferral with a timer", func(c *Config) { c.NIC.DeferHardIRQs = 2; c.NIC.GROFlushTimeout = time.Microsecond }, true},
		{"deferral without a timer", func(c *Config) { c.NIC.DeferHardIRQs = 2; c.NIC.GROFlushTimeout = 0 }, false},
		{"preference with a deferral", func(c *Config) {
			c.NIC.DeferHardIRQs, c.NIC.GROFlushTimeout, c.NIC.PreferBusyPoll = 2, time.Microsecond, true
		}, true},
		{"preference without a deferral", func(c *Config) { c.NIC.PreferBusyPoll = true }, false},
	}
	for _, tt := range tests {
		c := Default()
		tt.mod(&c)
		if err := c.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: Validate = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

// TestCapsAtPort1024: only a port below 1024 needs net_bind_service.
func TestCapsAtPort1024(t *testing.T) {
	for _, tt := range []struct {
		port int
		caps int
	}{{1023, 1}, {1024, 0}} {
		c := Default()
		c.WorkloadPort = tt.port
		if got := c.WorkloadCapList(); len(got) != tt.caps {
			t.Errorf("port %d: caps %v, want %d", tt.port, got, tt.caps)
		}
	}
}
