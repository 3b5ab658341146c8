// Package nic tunes the primary network interface for one pinned worker per
// CPU: channels = min(max, CPUs), interrupt moderation, GRO off, link up,
// mq root qdisc with pfifo_fast children, queue IRQ i -> CPU i, XPS tx-i ->
// CPU i, RPS off (case study steps 5, 6, 8 and 9).
//
// Every step takes its file-system roots (sysfs, procfs) and its
// system-call surface (the Ethtool and Netlink interfaces) as parameters, so
// tests run them against fake /proc and /sys trees. In the init the surface
// is github.com/safchain/ethtool and github.com/vishvananda/netlink.
package nic

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/safchain/ethtool"
)

// Link is the discovered primary interface.
type Link struct {
	Name   string
	Driver string // "virtio_net", "ena", ... (basename of device/driver)
	// Device is the basename of the device link: "virtio0" for virtio-net
	// (the prefix of its IRQ names), the PCI address for ENA.
	Device string
	// PCI is the address of the PCI function behind the interface
	// ("0000:3b:00.0"), "" without one: mlx5 names its vectors after it.
	PCI string
}

// Ethtool is the ethtool surface the steps use; *ethtool.Ethtool has it.
type Ethtool interface {
	GetChannels(intf string) (ethtool.Channels, error)
	SetChannels(intf string, c ethtool.Channels) (ethtool.Channels, error)
	GetCoalesce(intf string) (ethtool.Coalesce, error)
	SetCoalesce(intf string, c ethtool.Coalesce) (ethtool.Coalesce, error)
	Features(intf string) (map[string]bool, error)
	Change(intf string, config map[string]bool) error
}

// Netlink is the rtnetlink surface the steps use; see NewNetlink.
type Netlink interface {
	LinkSetUp(name string) error
	LinkIsUp(name string) (bool, error)
	// Qdiscs returns the root qdisc kind and the kinds of its direct children.
	Qdiscs(name string) (root string, children []string, err error)
	// ReplaceRoot replaces the root qdisc by one of kind (no options).
	ReplaceRoot(name, kind string) error
}

// arphrdEther is ARPHRD_ETHER, the /sys/class/net/*/type of Ethernet.
const arphrdEther = "1"

// Discover finds the primary interface under sysRoot/class/net: want if
// given, else the first (by ifindex) non-loopback Ethernet device backed by
// a real device (a device/ link: virtio, PCI), else the first non-loopback
// Ethernet device at all (veth, in tests).
func Discover(sysRoot, want string) (Link, error) {
	dir := filepath.Join(sysRoot, "class/net")
	if want != "" {
		if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
			return Link{}, fmt.Errorf("nic: interface %s: %w", want, err)
		}
		return describe(dir, want), nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return Link{}, fmt.Errorf("nic: %w", err)
	}
	type cand struct {
		name     string
		index    int
		physical bool
	}
	var cands []cand
	for _, e := range ents {
		n := e.Name()
		if n == "lo" || readTrim(filepath.Join(dir, n, "type")) != arphrdEther {
			continue
		}
		idx, _ := strconv.Atoi(readTrim(filepath.Join(dir, n, "ifindex")))
		_, err := os.Stat(filepath.Join(dir, n, "device"))
		cands = append(cands, cand{n, idx, err == nil})
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].physical != cands[j].physical {
			return cands[i].physical
		}
		return cands[i].index < cands[j].index
	})
	if len(cands) == 0 {
		return Link{}, errNoNIC
	}
	return describe(dir, cands[0].name), nil
}

var errNoNIC = errors.New("nic: no non-loopback Ethernet interface")

func describe(dir, name string) Link {
	l := Link{Name: name}
	if t, err := os.Readlink(filepath.Join(dir, name, "device/driver")); err == nil {
		l.Driver = filepath.Base(t)
	}
	if t, err := os.Readlink(filepath.Join(dir, name, "device")); err == nil {
		l.Device = filepath.Base(t)
	}
	if fn := pciFunction(filepath.Dir(filepath.Dir(dir)), name); fn != "" {
		l.PCI = filepath.Base(fn)
	}
	return l
}

func readTrim(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Queues lists the queue directories ("rx-0", "tx-3") of an interface in
// numeric order; kind is "rx" or "tx".
func Queues(sysRoot, ifname, kind string) ([]int, error) {
	ents, err := os.ReadDir(filepath.Join(sysRoot, "class/net", ifname, "queues"))
	if err != nil {
		return nil, fmt.Errorf("nic: queues of %s: %w", ifname, err)
	}
	var qs []int
	for _, e := range ents {
		if n, ok := strings.CutPrefix(e.Name(), kind+"-"); ok {
			if i, err := strconv.Atoi(n); err == nil {
				qs = append(qs, i)
			}
		}
	}
	sort.Ints(qs)
	return qs, nil
}

// QueueCPUs returns the CPUs that use queue q of n queues when the
// workload runs on cpus (sorted): worker k (on cpus[k]) uses queue k mod n,
// and a queue beyond the CPU count gets cpus[q mod len(cpus)] so that no
// queue is left without a CPU.
func QueueCPUs(q, n int, cpus []int) []int {
	if len(cpus) == 0 || n <= 0 {
		return nil
	}
	var out []int
	for k, c := range cpus {
		if k%n == q {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		out = []int{cpus[q%len(cpus)]}
	}
	return out
}
