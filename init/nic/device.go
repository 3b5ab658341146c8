package nic

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
)

// pciAddr is a PCI function's name in sysfs: domain:bus:device.function
// (the domain has more than 4 digits behind Intel VMD: 10000:01:00.0).
var pciAddr = regexp.MustCompile(`^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// pciFunction returns the sysfs directory of the PCI function behind
// ifname, resolving sysRoot/class/net/IF/device: the device itself for a
// PCI NIC, its parent for virtio-net (device is virtio0, a child of the
// PCI function). "" when the interface has no PCI device (veth, a fake
// tree without one).
func pciFunction(sysRoot, ifname string) string {
	dev, err := filepath.EvalSymlinks(filepath.Join(sysRoot, "class/net", ifname, "device"))
	if err != nil {
		return ""
	}
	for _, d := range []string{dev, filepath.Dir(dev)} {
		if pciAddr.MatchString(filepath.Base(d)) {
			return d
		}
	}
	return ""
}

// MSIVectors returns the Linux IRQ numbers of the MSI/MSI-X vectors of
// ifname's PCI function (its msi_irqs/ directory: one entry per
// allocated vector), or nil if it has no such directory (no PCI device,
// legacy INTx): then nothing narrows the search.
func MSIVectors(sysRoot, ifname string) (map[int]bool, error) {
	fn := pciFunction(sysRoot, ifname)
	if fn == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(filepath.Join(fn, "msi_irqs"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("nic: msi vectors of %s: %w", ifname, err)
	}
	out := map[int]bool{}
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out[n] = true
		}
	}
	return out, nil
}

// parseMAC parses a sysfs address attribute ("52:54:00:12:34:56").
func parseMAC(s string) (net.HardwareAddr, error) { return net.ParseMAC(s) }
