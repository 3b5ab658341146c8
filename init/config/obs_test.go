package config

import (
	"strings"
	"testing"
)

// The management endpoint and log shipping keys.
func TestObservabilityKeys(t *testing.T) {
	d := Default()
	if d.MgmtPort != 9100 || d.MgmtAddr != "" || d.LogRemote != "" {
		t.Errorf("defaults: port %d addr %q remote %q", d.MgmtPort, d.MgmtAddr, d.LogRemote)
	}
	for _, tc := range []struct {
		key, value string
		ok         bool
	}{
		{"mgmt.port", "0", true},
		{"mgmt.port", "9200", true},
		{"mgmt.port", "65536", false},
		{"mgmt.addr", "10.0.0.5", true},
		{"mgmt.addr", "::1", true},
		{"mgmt.addr", "eth0", false},
		{"log.remote", "udp://10.77.0.1:514", true},
		{"log.remote", "tcp://logs.internal:6514", true},
		{"log.remote", "", true},
		{"log.remote", "syslog://x:514", false},
		{"log.remote", "tcp://x", false},
		{"log.remote", "tcp://x:514/path", false},
	} {
		c := Default()
		err := c.Set(tc.key, tc.value)
		if (err == nil) != tc.ok {
			t.Errorf("%s=%q: %v", tc.key, tc.value, err)
		}
		if err != nil && !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s=%q: error does not name the key: %v", tc.key, tc.value, err)
		}
		if err == nil && c.Map()[tc.key] != tc.value {
			t.Errorf("%s=%q: Map has %q", tc.key, tc.value, c.Map()[tc.key])
		}
	}
	c := Default()
	c.MgmtPort = c.WorkloadPort
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "mgmt.port") {
		t.Errorf("mgmt.port = workload.port: %v", err)
	}
	c.MgmtPort = 0
	if err := c.Validate(); err != nil {
		t.Errorf("mgmt off: %v", err)
	}
}
