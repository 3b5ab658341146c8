package config

import (
	"fmt"
	"strconv"
)

// minMTU is the least MTU net.mtu may set: every IPv4 host must take
// 576-byte datagrams (RFC 791), and init/netconf refuses a lease with a
// smaller one, so a smaller net.mtu (which overrides the lease's) would
// leave the instance without an address. Refused here, at image build.
const minMTU = 576

// setMTU parses net.mtu: 0 (the lease's, or unchanged) or [576, 65535].
func setMTU(c *Config, v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("not an integer")
	}
	if n != 0 && (n < minMTU || n > 65535) {
		return fmt.Errorf("out of range: 0, or [%d, 65535]", minMTU)
	}
	c.Net.MTU = n
	return nil
}
