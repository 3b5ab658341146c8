// Package inspector reads the ground truth of a running Linux system the way
// an outsider would: raw /proc and /sys files, rtnetlink (links, qdiscs,
// addresses with their lifetimes, routes) and the ethtool ioctls (driver,
// channels, features, coalescing). The end-to-end tests ship it inside the
// guest as the workload (tests/workloads/inspector), so that the init's own
// boot report is compared with what somebody else reads, not taken on its
// word.
//
// It shares no code with the init on purpose: a bug in the init's readers
// must not be repeated here. Files are kept raw (the test parses them); only
// netlink and ethtool answers are decoded, field by field.
package inspector

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unsafe"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Snapshot is everything read at one moment.
type Snapshot struct {
	Release string `json:"release"` // uname -r
	// Files maps each path read to its raw content.
	Files map[string]string `json:"files"`
	// Exists maps each path probed for existence (netfilter, audit,
	// modules) to the answer.
	Exists map[string]bool `json:"exists"`
	// Errors maps a path or a query to what failed reading it.
	Errors map[string]string `json:"errors,omitempty"`
	Links  []Link            `json:"links"`
	Qdiscs []Qdisc           `json:"qdiscs"`
	Addrs  []Addr            `json:"addrs"`
	Routes []Route           `json:"routes"`
	// Process is the inspector itself, as the init started it.
	Process Process `json:"process"`
}

// Link is one network interface, from rtnetlink and ethtool.
type Link struct {
	Index  int    `json:"index"`
	Name   string `json:"name"`
	MTU    int    `json:"mtu"`
	Up     bool   `json:"up"`
	Driver string `json:"driver,omitempty"`
	// NumRx/NumTx are IFLA_NUM_RX_QUEUES / IFLA_NUM_TX_QUEUES.
	NumRx    int              `json:"num_rx_queues"`
	NumTx    int              `json:"num_tx_queues"`
	Channels *Channels        `json:"channels,omitempty"`
	Features map[string]bool  `json:"features,omitempty"`
	Coalesce map[string]int64 `json:"coalesce,omitempty"`
}

// Channels is ETHTOOL_GCHANNELS.
type Channels struct {
	MaxCombined, Combined, MaxRx, Rx, MaxTx, Tx int
}

// Qdisc is one queueing discipline.
type Qdisc struct {
	Link   string `json:"link"`
	Kind   string `json:"kind"`
	Handle string `json:"handle"` // "major:minor", hex
	Parent string `json:"parent"` // "root" or "major:minor"
}

// Addr is one IPv4 address with its lifetimes in seconds (0xffffffff is
// forever, as the kernel says it).
type Addr struct {
	Link      string `json:"link"`
	CIDR      string `json:"cidr"`
	ValidLft  uint32 `json:"valid_lft"`
	PreferLft uint32 `json:"preferred_lft"`
}

// Route is one IPv4 route of the main table.
type Route struct {
	Link    string `json:"link"`
	Dst     string `json:"dst"` // "default" for the default route
	Gateway string `json:"gateway,omitempty"`
}

// Process describes the inspector's own process.
type Process struct {
	PID      int      `json:"pid"`
	UID      int      `json:"uid"`
	EUID     int      `json:"euid"`
	GID      int      `json:"gid"`
	Groups   []int    `json:"groups"`
	Affinity []int    `json:"affinity"` // sched_getaffinity
	Env      []string `json:"env"`      // HOTPATH_* variables only
	Args     []string `json:"args"`
}

// Conn is what the inspector saw of one accepted connection.
type Conn struct {
	Remote string `json:"remote"`
	// IncomingCPU is SO_INCOMING_CPU: the CPU whose softirq received the
	// connection's packets (RSS queue -> IRQ affinity).
	IncomingCPU int `json:"incoming_cpu"`
	// CPU is the CPU that ran the accepting code (sched_getcpu).
	CPU  int `json:"cpu"`
	UID  int `json:"uid"`
	EUID int `json:"euid"`
	GID  int `json:"gid"`
}

// Paths read raw, besides the per-interface and per-IRQ ones.
var (
	rawFiles = []string{
		"/proc/cmdline", "/proc/interrupts", "/proc/net/packet", "/proc/self/status",
		"/proc/sys/net/core/busy_poll", "/proc/sys/net/core/busy_read",
		"/proc/sys/net/core/default_qdisc", "/proc/sys/net/ipv4/tcp_congestion_control",
		"/proc/sys/net/core/somaxconn",
	}
	probed = []string{"/proc/net/netfilter", "/proc/self/loginuid", "/proc/modules", "/sys/kernel/security/lsm"}
)

// VulnerabilitiesDir holds one file per known CPU vulnerability.
const VulnerabilitiesDir = "/sys/devices/system/cpu/vulnerabilities"

// NodeDir holds one directory per NUMA node (nodeN/cpulist); a kernel
// without CONFIG_NUMA has none.
const NodeDir = "/sys/devices/system/node"

// PCIDir holds one entry per PCI function, named by its address
// (0000:81:00.0), behind bridges too.
const PCIDir = "/sys/bus/pci/devices"

// Collect reads a snapshot. It never stops at an error: what failed is
// recorded in Errors and the rest is read.
func Collect() *Snapshot {
	s := &Snapshot{Files: map[string]string{}, Exists: map[string]bool{}, Errors: map[string]string{}}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		s.Release = unix.ByteSliceToString(u.Release[:])
	} else {
		s.Errors["uname"] = err.Error()
	}
	for _, p := range rawFiles {
		s.read(p)
	}
	for _, p := range probed {
		_, err := os.Stat(p)
		s.Exists[p] = err == nil
	}
	s.readGlob(VulnerabilitiesDir + "/*")
	s.readGlob("/proc/irq/*/smp_affinity_list")
	s.readGlob("/sys/class/net/*/queues/tx-*/xps_cpus")
	s.readGlob("/sys/class/net/*/queues/rx-*/rps_cpus")
	s.readGlob("/sys/class/net/*/mtu")
	// The NAPI interrupt deferral of step 10, per netdev (what the kernel
	// holds, whoever wrote it).
	s.readGlob("/sys/class/net/*/napi_defer_hard_irqs")
	s.readGlob("/sys/class/net/*/gro_flush_timeout")
	// NUMA placement, read where the kernel keeps it: each node's CPUs,
	// each PCI function's node and identity, which netdev hangs off which
	// function (directly, or through its virtio device), where each
	// interrupt is actually delivered, and the CPUs each of this
	// process's threads may run on.
	s.readGlob(NodeDir + "/node*/cpulist")
	for _, attr := range []string{"numa_node", "vendor", "device"} {
		s.readGlob(PCIDir + "/*/" + attr)
	}
	s.readGlob(PCIDir + "/*/net/*/ifindex")
	s.readGlob(PCIDir + "/*/virtio*/net/*/ifindex")
	s.readGlob("/proc/irq/*/effective_affinity_list")
	s.readGlob("/proc/self/task/*/status")
	s.netlink()
	s.Process = self()
	return s
}

func (s *Snapshot) read(p string) {
	b, err := os.ReadFile(p)
	if err != nil {
		s.Errors[p] = err.Error()
		return
	}
	s.Files[p] = string(b)
}

func (s *Snapshot) readGlob(pattern string) {
	ms, err := filepath.Glob(pattern)
	if err != nil {
		s.Errors[pattern] = err.Error()
	}
	for _, p := range ms {
		s.read(p)
	}
}

func (s *Snapshot) fail(what string, err error) { s.Errors[what] = err.Error() }

func (s *Snapshot) netlink() {
	links, err := netlink.LinkList()
	if err != nil {
		s.fail("netlink links", err)
		return
	}
	et, err := ethtool.NewEthtool()
	if err != nil {
		s.fail("ethtool", err)
	} else {
		defer et.Close()
	}
	names := map[int]string{}
	for _, l := range links {
		a := l.Attrs()
		names[a.Index] = a.Name
		k := Link{Index: a.Index, Name: a.Name, MTU: a.MTU, Up: a.Flags&net.FlagUp != 0, NumRx: a.NumRxQueues, NumTx: a.NumTxQueues}
		if et != nil && a.Name != "lo" {
			s.ethtool(et, &k)
		}
		s.Links = append(s.Links, k)

		qs, err := netlink.QdiscList(l)
		if err != nil {
			s.fail("netlink qdiscs "+a.Name, err)
		}
		for _, q := range qs {
			qa := q.Attrs()
			parent := "root"
			if qa.Parent != netlink.HANDLE_ROOT {
				parent = handle(qa.Parent)
			}
			s.Qdiscs = append(s.Qdiscs, Qdisc{Link: a.Name, Kind: q.Type(), Handle: handle(qa.Handle), Parent: parent})
		}
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		s.fail("netlink addrs", err)
	}
	for _, ad := range addrs {
		s.Addrs = append(s.Addrs, Addr{
			Link: names[ad.LinkIndex], CIDR: (&net.IPNet{IP: ad.IP, Mask: ad.Mask}).String(),
			ValidLft: uint32(ad.ValidLft), PreferLft: uint32(ad.PreferedLft),
		})
	}
	routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		s.fail("netlink routes", err)
	}
	for _, r := range routes {
		rt := Route{Link: names[r.LinkIndex], Dst: "default"}
		if r.Dst != nil && !(r.Dst.IP.IsUnspecified() && isZero(r.Dst.Mask)) {
			rt.Dst = r.Dst.String()
		}
		if r.Gw != nil {
			rt.Gateway = r.Gw.String()
		}
		s.Routes = append(s.Routes, rt)
	}
}

func isZero(m net.IPMask) bool {
	ones, _ := m.Size()
	return ones == 0
}

func handle(h uint32) string { return fmt.Sprintf("%x:%x", h>>16, h&0xffff) }

func (s *Snapshot) ethtool(et *ethtool.Ethtool, k *Link) {
	var err error
	if k.Driver, err = et.DriverName(k.Name); err != nil {
		s.fail("ethtool driver "+k.Name, err)
	}
	if c, err := et.GetChannels(k.Name); err == nil {
		k.Channels = &Channels{
			MaxCombined: int(c.MaxCombined), Combined: int(c.CombinedCount),
			MaxRx: int(c.MaxRx), Rx: int(c.RxCount), MaxTx: int(c.MaxTx), Tx: int(c.TxCount),
		}
	} else {
		s.fail("ethtool channels "+k.Name, err)
	}
	if k.Features, err = et.Features(k.Name); err != nil {
		s.fail("ethtool features "+k.Name, err)
	}
	if c, err := et.GetCoalesce(k.Name); err == nil {
		k.Coalesce = map[string]int64{
			"adaptive_rx": int64(c.UseAdaptiveRxCoalesce), "adaptive_tx": int64(c.UseAdaptiveTxCoalesce),
			"rx_usecs": int64(c.RxCoalesceUsecs), "tx_usecs": int64(c.TxCoalesceUsecs),
			"rx_frames": int64(c.RxMaxCoalescedFrames), "tx_frames": int64(c.TxMaxCoalescedFrames),
		}
	} else {
		s.fail("ethtool coalesce "+k.Name, err)
	}
}

func self() Process {
	p := Process{PID: os.Getpid(), UID: os.Getuid(), EUID: os.Geteuid(), GID: os.Getgid(), Args: os.Args}
	p.Groups, _ = os.Getgroups()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err == nil {
		for c := 0; c < 1024; c++ {
			if set.IsSet(c) {
				p.Affinity = append(p.Affinity, c)
			}
		}
	}
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "HOTPATH_") {
			p.Env = append(p.Env, e)
		}
	}
	sort.Strings(p.Env)
	return p
}

// ConnInfo describes an accepted connection: fd is its socket.
func ConnInfo(fd int, remote string) Conn {
	c := Conn{Remote: remote, IncomingCPU: -1, CPU: -1, UID: os.Getuid(), EUID: os.Geteuid(), GID: os.Getgid()}
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_INCOMING_CPU); err == nil {
		c.IncomingCPU = v
	}
	var cpu, node uint32
	if _, _, errno := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), uintptr(unsafe.Pointer(&node)), 0); errno == 0 {
		c.CPU = int(cpu)
	}
	return c
}

// TableRows counts the lines of a /proc table after its header
// (/proc/net/packet: one per open AF_PACKET socket).
func TableRows(text string) int {
	n := 0
	for i, l := range strings.Split(text, "\n") {
		if i > 0 && strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n
}
