package vm

import "net"

var netMask24 = net.CIDRMask(24, 32)

func netIP(s string) net.IP { return net.ParseIP(s).To4() }
