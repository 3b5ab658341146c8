// Package facts reads what the boot report states about the running
// system, so that a test outside the guest (which has no shell) can check
// that the kernel policy and every tuning held: CPU vulnerability status,
// netfilter/audit/modules/seccomp absence, the sysctls, open AF_PACKET
// sockets, and the primary NIC's queues, IRQ affinity, XPS/RPS masks,
// qdiscs, GRO, interrupt moderation and addresses.
//
// Roots and the ethtool/netlink surface are parameters, as for the steps.
package facts

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/hotpath-dev/hotpath/init/netconf"
	"github.com/hotpath-dev/hotpath/init/nic"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/init/sysctl"
	"github.com/vishvananda/netlink"
)

// AddrInfo is the IPv4 configuration of an interface.
type AddrInfo struct {
	Addrs    []string // CIDR
	Lifetime string   // of the first address: "forever" or seconds
	Gateway  string
}

// Options say where and how to read.
type Options struct {
	SysRoot, ProcRoot string
	Sysctls           []string  // dotted names to read back
	Link              *nic.Link // nil: no NIC
	Ethtool           nic.Ethtool
	Qdiscs            func(ifname string) (string, []string, error)
	QdiscStats        func(ifname string) ([]nic.QdiscStat, error) // nil: qdisc drops not read
	Addrs             func(ifname string) (AddrInfo, error)
}

// Read gathers the facts. It never fails: what cannot be read is left
// empty (and the reason logged through logf).
func Read(o Options, logf func(string, ...any)) report.Facts {
	f := report.Facts{
		Vulnerabilities: map[string]string{},
		Sysctls:         map[string]string{},
	}
	vdir := filepath.Join(o.SysRoot, "devices/system/cpu/vulnerabilities")
	if ents, err := os.ReadDir(vdir); err == nil {
		for _, e := range ents {
			if b, err := os.ReadFile(filepath.Join(vdir, e.Name())); err == nil {
				f.Vulnerabilities[e.Name()] = strings.TrimSpace(string(b))
			}
		}
	} else {
		logf("facts: %v", err)
	}
	f.Netfilter = exists(filepath.Join(o.ProcRoot, "net/netfilter"))
	f.Audit = exists(filepath.Join(o.ProcRoot, "self/loginuid"))
	f.Modules = exists(filepath.Join(o.ProcRoot, "modules"))
	if b, err := os.ReadFile(filepath.Join(o.ProcRoot, "self/status")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "Seccomp:") {
				f.Seccomp = true
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(o.ProcRoot, "cmdline")); err == nil {
		f.Cmdline = strings.TrimSpace(string(b))
	}
	for _, n := range o.Sysctls {
		v, err := sysctl.Read(o.ProcRoot, n)
		if err != nil {
			v = "unreadable: " + err.Error()
		}
		f.Sysctls[n] = v
	}
	if n, err := netconf.PacketSockets(o.ProcRoot); err == nil {
		f.PacketSockets = n
	} else {
		f.PacketSockets = -1
		logf("facts: %v", err)
	}
	if o.Link != nil {
		f.NIC = readNIC(o, *o.Link, logf)
	}
	return f
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func readNIC(o Options, l nic.Link, logf func(string, ...any)) *report.NIC {
	n := &report.NIC{Name: l.Name, Driver: l.Driver, XPS: map[string]string{}, RPS: map[string]string{}, GRO: "unknown"}
	dir := filepath.Join(o.SysRoot, "class/net", l.Name)
	if b, err := os.ReadFile(filepath.Join(dir, "mtu")); err == nil {
		n.MTU, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if o.Addrs != nil {
		if a, err := o.Addrs(l.Name); err == nil {
			n.Addrs, n.Lifetime, n.Gateway = a.Addrs, a.Lifetime, a.Gateway
		} else {
			logf("facts: addresses of %s: %v", l.Name, err)
		}
	}
	rx, _ := nic.Queues(o.SysRoot, l.Name, "rx")
	tx, _ := nic.Queues(o.SysRoot, l.Name, "tx")
	n.RxQueues, n.TxQueues = len(rx), len(tx)
	for _, q := range tx {
		if b, err := os.ReadFile(filepath.Join(dir, "queues", fmt.Sprintf("tx-%d", q), "xps_cpus")); err == nil {
			n.XPS[fmt.Sprintf("tx-%d", q)] = strings.TrimSpace(string(b))
		}
	}
	for _, q := range rx {
		if b, err := os.ReadFile(filepath.Join(dir, "queues", fmt.Sprintf("rx-%d", q), "rps_cpus")); err == nil {
			n.RPS[fmt.Sprintf("rx-%d", q)] = strings.TrimSpace(string(b))
		}
	}
	n.IRQs = []report.IRQ{}
	if irqs, err := nic.QueueIRQs(o.ProcRoot, l); err == nil {
		for _, q := range irqs {
			aff := ""
			if b, err := os.ReadFile(filepath.Join(o.ProcRoot, "irq", strconv.Itoa(q.IRQ), "smp_affinity_list")); err == nil {
				aff = strings.TrimSpace(string(b))
			}
			n.IRQs = append(n.IRQs, report.IRQ{IRQ: q.IRQ, Name: q.Name, Queue: q.Queue, Affinity: aff})
		}
	} else {
		logf("facts: irqs of %s: %v", l.Name, err)
	}
	if o.Qdiscs != nil {
		if root, children, err := o.Qdiscs(l.Name); err == nil {
			n.Qdisc, n.Children = root, children
		} else {
			logf("facts: qdiscs of %s: %v", l.Name, err)
		}
	}
	if n.Children == nil {
		n.Children = []string{}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "statistics", "tx_dropped")); err == nil {
		n.TxDropped, _ = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	}
	if o.QdiscStats != nil {
		if qs, err := o.QdiscStats(l.Name); err == nil {
			for _, q := range qs {
				if q.Parent == "root" {
					n.QdiscDrops = q.Drops
				}
			}
		} else {
			logf("facts: qdisc stats of %s: %v", l.Name, err)
		}
	}
	if o.Ethtool != nil {
		if feats, err := o.Ethtool.Features(l.Name); err == nil {
			if v, ok := feats["rx-gro"]; ok {
				n.GRO = map[bool]string{true: "on", false: "off"}[v]
			}
		}
		if c, err := o.Ethtool.GetCoalesce(l.Name); err == nil {
			n.Coalesce = map[string]string{
				"adaptive_rx": strconv.Itoa(int(c.UseAdaptiveRxCoalesce)),
				"adaptive_tx": strconv.Itoa(int(c.UseAdaptiveTxCoalesce)),
				"rx_usecs":    strconv.Itoa(int(c.RxCoalesceUsecs)),
				"tx_usecs":    strconv.Itoa(int(c.TxCoalesceUsecs)),
				"rx_frames":   strconv.Itoa(int(c.RxMaxCoalescedFrames)),
				"tx_frames":   strconv.Itoa(int(c.TxMaxCoalescedFrames)),
			}
		} else {
			n.Coalesce = map[string]string{"error": err.Error()}
		}
	}
	return n
}

// NetlinkAddrs reads an interface's IPv4 addresses, the first one's valid
// lifetime and the default gateway through rtnetlink.
func NetlinkAddrs(ifname string) (AddrInfo, error) {
	var a AddrInfo
	link, err := netlink.LinkByName(ifname)
	if err != nil {
		return a, err
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return a, err
	}
	sort.SliceStable(addrs, func(i, j int) bool { return addrs[i].Flags&0x1 < addrs[j].Flags&0x1 }) // primaries (not IFA_F_SECONDARY) first
	for i, ad := range addrs {
		a.Addrs = append(a.Addrs, (&net.IPNet{IP: ad.IP, Mask: ad.Mask}).String())
		if i == 0 {
			if uint32(ad.ValidLft) == netconf.Forever {
				a.Lifetime = "forever"
			} else {
				a.Lifetime = strconv.Itoa(ad.ValidLft)
			}
		}
	}
	if gw, err := netconf.DefaultGateway(link); err == nil && gw.IsValid() {
		a.Gateway = gw.String()
	}
	return a, nil
}
