package nic

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/hotpath-dev/hotpath/init/config"
)

// Select returns the NICs that the nic.match selectors ms choose, in the
// order of ms (a driver selector that matches several adds them by
// ifindex; a NIC is chosen once), and the physical Ethernet NICs left
// over, which the init leaves down; no selector at all chooses every
// NIC (a bond over all ports). Only NICs backed by a device are
// candidates: a dedicated server's ports, not veth or bond devices. No
// selector matching is an error naming the NICs there are, so that a
// wrong MAC in the configuration is plain in the report.
func Select(sysRoot string, ms []config.Match) (sel, others []Link, err error) {
	dir := filepath.Join(sysRoot, "class/net")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("nic: %w", err)
	}
	type cand struct {
		Link
		index int
		mac   string
	}
	var cands []cand
	for _, e := range ents {
		n := e.Name()
		if readTrim(filepath.Join(dir, n, "type")) != arphrdEther {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, n, "device")); err != nil {
			continue
		}
		idx, _ := strconv.Atoi(readTrim(filepath.Join(dir, n, "ifindex")))
		cands = append(cands, cand{describe(dir, n), idx, readTrim(filepath.Join(dir, n, "address"))})
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].index < cands[j].index })
	chosen := map[string]bool{}
	if len(ms) == 0 {
		for _, c := range cands {
			sel = append(sel, c.Link)
		}
		if len(sel) == 0 {
			return nil, nil, errNoNIC
		}
		return sel, nil, nil
	}
	for _, m := range ms {
		for _, c := range cands {
			if !chosen[c.Name] && matches(m, c.Link, c.mac) {
				chosen[c.Name] = true
				sel = append(sel, c.Link)
			}
		}
	}
	var all []string
	for _, c := range cands {
		if !chosen[c.Name] {
			others = append(others, c.Link)
		}
		all = append(all, fmt.Sprintf("%s (%s %s %s)", c.Name, c.mac, c.PCI, c.Driver))
	}
	if len(sel) == 0 {
		return nil, others, fmt.Errorf("nic: nic.match %v selects none of the NICs %v", ms, all)
	}
	return sel, others, nil
}

func matches(m config.Match, l Link, mac string) bool {
	switch {
	case m.MAC != nil:
		hw, err := parseMAC(mac)
		return err == nil && bytes.Equal(hw, m.MAC)
	case m.PCI != "":
		return l.PCI == m.PCI
	}
	return l.Driver == m.Driver
}
