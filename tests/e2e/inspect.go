package e2e

import (
	"fmt"
	"net"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/inspector"
	"github.com/hotpath-dev/hotpath/tests/vm"
	"github.com/insomniacslk/dhcp/dhcpv4"
)

// Expectation is what the test itself set up for one boot, known without
// asking the guest: QEMU's -smp and queue count, the DHCP server's lease,
// the manifest of the image.
type Expectation struct {
	CPUs    int    // QEMU -smp
	Queues  int    // virtio-net queue pairs QEMU was given
	Addr    string // CIDR the DHCP server leased
	Gateway string // its router option
	MTU     int    // its interface MTU option
	Kernel  string // the manifest's kernel version, e.g. 6.1.192
	Cmdline string // the manifest's full built-in command line
	// Config is the manifest's effective init configuration (nic.coalesce,
	// nic.rx_usecs, nic.tx_usecs are read from it).
	Config map[string]string
}

// Network is the lease part of the expectation, for CheckLocality.
func (e Expectation) Network() Network { return Network{Addr: e.Addr, Gateway: e.Gateway, MTU: e.MTU} }

// CompareInspection checks one boot three ways: the inspector's reading of
// the guest against the expectation (every policy and locality check, run
// on the inspector's facts instead of the report's), the boot report
// against the inspector (field by field: a report that says what the
// inspector does not read is lying), and what only the inspector sees (the
// kernel release, ethtool channels, the workload's process and the CPUs
// its connections arrive on).
func CompareInspection(exp Expectation, rep *report.Report, s *inspector.Snapshot, conns []inspector.Conn) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	truth, nicErr := FactsFromSnapshot(s, exp.Addr)
	if nicErr != nil {
		bad("inspector: %v", nicErr)
	}
	for _, err := range CheckPolicy(truth) {
		bad("inspector: %v", err)
	}
	for _, err := range CheckLocality(truth, exp.Queues, exp.Network()) {
		bad("inspector: %v", err)
	}
	said := rep.Facts
	if nicErr != nil {
		said.NIC = nil // which interface to compare is unknown
	}
	for _, err := range DiffFacts(&said, truth) {
		bad("the boot report lies: %v", err)
	}

	if !strings.HasPrefix(s.Release, exp.Kernel) {
		bad("inspector: kernel release %q, the manifest built %s", s.Release, exp.Kernel)
	}
	if rep.Kernel != s.Release {
		bad("the boot report lies: kernel %q, the inspector reads %q", rep.Kernel, s.Release)
	}
	if !BuiltCmdline(truth.Cmdline, exp.Cmdline) {
		bad("inspector: /proc/cmdline %q, the manifest built in %q", truth.Cmdline, exp.Cmdline)
	}
	if truth.NIC != nil {
		if l := linkNamed(s, truth.NIC.Name); l == nil || l.Channels == nil {
			bad("inspector: no ethtool channels for %s (%s)", truth.NIC.Name, s.Errors["ethtool channels "+truth.NIC.Name])
		} else if c := l.Channels; c.Combined != exp.Queues || c.MaxCombined != exp.Queues {
			bad("inspector: ethtool channels of %s: %d combined of %d, want %d of %d (QEMU queues=%d)",
				l.Name, c.Combined, c.MaxCombined, exp.Queues, exp.Queues, exp.Queues)
		}
		for _, err := range checkModeration(exp.Config, rep, truth.NIC.Coalesce) {
			bad("inspector: %v", err)
		}
	}

	p := s.Process
	if w := rep.Workload; w == nil {
		bad("the boot report names no workload, the inspector runs as pid %d", p.PID)
	} else {
		if w.PID != p.PID {
			bad("the boot report lies: workload pid %d, the inspector is pid %d", w.PID, p.PID)
		}
		if env := "HOTPATH_CPUS=" + w.CPUs; !slices.Contains(p.Env, env) {
			bad("the boot report lies: workload %s, the inspector's environment is %v", env, p.Env)
		}
		if env := "HOTPATH_PORT=" + strconv.Itoa(w.Port); !slices.Contains(p.Env, env) {
			bad("the boot report lies: workload %s, the inspector's environment is %v", env, p.Env)
		}
	}
	if want := seq(exp.CPUs); !slices.Equal(p.Affinity, want) {
		bad("inspector: the workload may run on CPUs %v, want %v (every vCPU)", p.Affinity, want)
	}
	if len(conns) == 0 {
		bad("inspector: no connection described")
	}
	for _, c := range conns {
		if c.IncomingCPU < 0 || c.IncomingCPU >= exp.CPUs {
			bad("inspector: connection %s arrived on CPU %d, the guest has %d", c.Remote, c.IncomingCPU, exp.CPUs)
		}
		if c.CPU < 0 || c.CPU >= exp.CPUs {
			bad("inspector: connection %s accepted on CPU %d, the guest has %d", c.Remote, c.CPU, exp.CPUs)
		}
		if c.UID != p.UID || c.EUID != p.EUID || c.GID != p.GID {
			bad("inspector: connection %s served as uid %d/%d gid %d, the process is uid %d/%d gid %d",
				c.Remote, c.UID, c.EUID, c.GID, p.UID, p.EUID, p.GID)
		}
	}
	return errs
}

// checkModeration checks the interrupt moderation the inspector reads
// (ethtool -c) against the image's configuration, where the init says it
// applied it: adaptive RX on, or the static rx/tx usecs (the fallback of
// nic.coalesce=adaptive on a driver without adaptive moderation).
func checkModeration(cfg map[string]string, rep *report.Report, c map[string]string) []error {
	s, ok := rep.Step("nic-coalesce")
	if !ok || s.Status != report.Applied {
		return nil // skipped with a reason (CheckReport), or failed
	}
	adaptive := c["adaptive_rx"] == "1"
	static := c["rx_usecs"] == cfg["nic.rx_usecs"] && c["tx_usecs"] == cfg["nic.tx_usecs"]
	switch mode := cfg["nic.coalesce"]; {
	case mode == "adaptive" && !adaptive && !static:
		return []error{fmt.Errorf("interrupt moderation %s: nic-coalesce applied, but neither adaptive RX nor rx/tx usecs %s/%s (nic.coalesce=adaptive)",
			sortedMap(c), cfg["nic.rx_usecs"], cfg["nic.tx_usecs"])}
	case mode == "static" && !static:
		return []error{fmt.Errorf("interrupt moderation %s: nic-coalesce applied, but not rx/tx usecs %s/%s (nic.coalesce=static)",
			sortedMap(c), cfg["nic.rx_usecs"], cfg["nic.tx_usecs"])}
	}
	return nil
}

// FactsFromSnapshot reads, from the inspector's raw snapshot, the facts
// the init reports, by code of its own: the NIC is the interface that holds
// addr (the lease), its IRQs are found by name in /proc/interrupts.
func FactsFromSnapshot(s *inspector.Snapshot, addr string) (*report.Facts, error) {
	f := &report.Facts{Vulnerabilities: map[string]string{}, Sysctls: map[string]string{}}
	for p, v := range s.Files {
		switch {
		case path.Dir(p) == inspector.VulnerabilitiesDir:
			f.Vulnerabilities[path.Base(p)] = strings.TrimSpace(v)
		case strings.HasPrefix(p, "/proc/sys/"):
			f.Sysctls[strings.ReplaceAll(strings.TrimPrefix(p, "/proc/sys/"), "/", ".")] = strings.TrimSpace(v)
		}
	}
	f.Netfilter = s.Exists["/proc/net/netfilter"]
	f.Audit = s.Exists["/proc/self/loginuid"]
	f.Modules = s.Exists["/proc/modules"]
	for _, l := range strings.Split(s.Files["/proc/self/status"], "\n") {
		if strings.HasPrefix(l, "Seccomp:") {
			f.Seccomp = true
		}
	}
	f.Cmdline = strings.TrimSpace(s.Files["/proc/cmdline"])
	if t, ok := s.Files["/proc/net/packet"]; ok {
		f.PacketSockets = inspector.TableRows(t)
	} else {
		f.PacketSockets = -1
	}

	name := ""
	for _, a := range s.Addrs {
		if a.CIDR == addr {
			name = a.Link
		}
	}
	l := linkNamed(s, name)
	if l == nil {
		return f, fmt.Errorf("no interface holds the leased address %s (addresses %v)", addr, s.Addrs)
	}
	n := &report.NIC{Name: l.Name, Driver: l.Driver, MTU: l.MTU, XPS: map[string]string{}, RPS: map[string]string{}, GRO: "unknown"}
	f.NIC = n
	for _, a := range s.Addrs {
		if a.Link != l.Name {
			continue
		}
		if len(n.Addrs) == 0 {
			n.Lifetime = strconv.FormatUint(uint64(a.ValidLft), 10)
			if a.ValidLft == 0xffffffff {
				n.Lifetime = "forever"
			}
		}
		n.Addrs = append(n.Addrs, a.CIDR)
	}
	for _, r := range s.Routes {
		if r.Link == l.Name && r.Dst == "default" {
			n.Gateway = r.Gateway
		}
	}
	qdir := "/sys/class/net/" + l.Name + "/queues/"
	for _, m := range []struct {
		file string
		dst  map[string]string
		n    *int
	}{{"xps_cpus", n.XPS, &n.TxQueues}, {"rps_cpus", n.RPS, &n.RxQueues}} {
		// A queue whose file exists but cannot be read (xps_cpus of a
		// single-queue device) still counts as a queue.
		for p := range s.Errors {
			if strings.HasPrefix(p, qdir) && path.Base(p) == m.file {
				*m.n++
			}
		}
		for p, v := range s.Files {
			if strings.HasPrefix(p, qdir) && path.Base(p) == m.file {
				*m.n++
				m.dst[path.Base(path.Dir(p))] = strings.TrimSpace(v)
			}
		}
	}
	n.IRQs = queueIRQs(s)
	var root *inspector.Qdisc
	for i, q := range s.Qdiscs {
		if q.Link == l.Name && q.Parent == "root" {
			root = &s.Qdiscs[i]
		}
	}
	n.Children = []string{}
	if root != nil {
		n.Qdisc = root.Kind
		major, _, _ := strings.Cut(root.Handle, ":")
		type child struct {
			minor int64
			kind  string
		}
		var cs []child
		for _, q := range s.Qdiscs {
			pmaj, pmin, _ := strings.Cut(q.Parent, ":")
			if q.Link == l.Name && q.Parent != "root" && pmaj == major {
				m, _ := strconv.ParseInt(pmin, 16, 64)
				cs = append(cs, child{m, q.Kind})
			}
		}
		sort.Slice(cs, func(i, j int) bool { return cs[i].minor < cs[j].minor })
		for _, c := range cs {
			n.Children = append(n.Children, c.kind)
		}
	}
	if v, ok := l.Features["rx-gro"]; ok {
		n.GRO = map[bool]string{true: "on", false: "off"}[v]
	}
	if l.Coalesce != nil {
		n.Coalesce = map[string]string{}
		for k, v := range l.Coalesce {
			n.Coalesce[k] = strconv.FormatInt(v, 10)
		}
	} else if e, ok := s.Errors["ethtool coalesce "+l.Name]; ok {
		n.Coalesce = map[string]string{"error": e}
	}
	return f, nil
}

// virtioQueueIRQ matches a virtio-net queue interrupt's name in
// /proc/interrupts: virtio0-input.0, virtio0-output.3.
var virtioQueueIRQ = regexp.MustCompile(`^virtio\d+-(input|output)\.(\d+)$`)

// queueIRQs reads the NIC's queue interrupts from /proc/interrupts and
// their affinity from /proc/irq/N/smp_affinity_list.
func queueIRQs(s *inspector.Snapshot) []report.IRQ {
	irqs := []report.IRQ{}
	for _, l := range interruptLines(s) {
		m := virtioQueueIRQ.FindStringSubmatch(l.name())
		if m == nil {
			continue
		}
		q, _ := strconv.Atoi(m[2])
		aff := strings.TrimSpace(s.Files[fmt.Sprintf("/proc/irq/%d/smp_affinity_list", l.num)])
		irqs = append(irqs, report.IRQ{IRQ: l.num, Name: m[0], Queue: q, Affinity: aff})
	}
	return irqs
}

// interruptLine is one numbered line of /proc/interrupts: the interrupt's
// number and the line's fields ("N:" first, the per-CPU counts, the
// chip, the action names last).
type interruptLine struct {
	num    int
	fields []string
}

// name is the line's last field: the (last) action's name.
func (l interruptLine) name() string { return l.fields[len(l.fields)-1] }

// interruptLines are the numbered lines of the snapshot's /proc/interrupts
// (not the NMI, LOC, ... rows).
func interruptLines(s *inspector.Snapshot) []interruptLine {
	var out []interruptLine
	for _, line := range strings.Split(s.Files["/proc/interrupts"], "\n") {
		fs := strings.Fields(line)
		if len(fs) < 2 {
			continue
		}
		if num, err := strconv.Atoi(strings.TrimSuffix(fs[0], ":")); err == nil {
			out = append(out, interruptLine{num, fs})
		}
	}
	return out
}

// DiffFacts names every fact the report states differently from the
// inspector's reading. Sysctls are compared where the inspector read them.
func DiffFacts(rep, truth *report.Facts) []error {
	var errs []error
	diff := func(what string, said, read any) {
		if s, r := fmt.Sprint(said), fmt.Sprint(read); s != r {
			errs = append(errs, fmt.Errorf("%s: the report says %s, the inspector reads %s", what, s, r))
		}
	}
	diff("vulnerabilities", sortedMap(rep.Vulnerabilities), sortedMap(truth.Vulnerabilities))
	diff("netfilter", rep.Netfilter, truth.Netfilter)
	diff("audit", rep.Audit, truth.Audit)
	diff("modules", rep.Modules, truth.Modules)
	diff("seccomp", rep.Seccomp, truth.Seccomp)
	diff("command line", strconv.Quote(rep.Cmdline), strconv.Quote(truth.Cmdline))
	names := map[string]bool{}
	for name := range truth.Sysctls {
		if _, ok := rep.Sysctls[name]; ok {
			names[name] = true
		}
	}
	for name := range requiredSysctls {
		names[name] = true
	}
	for _, name := range sortedKeys(names) {
		said, ok := rep.Sysctls[name]
		if !ok {
			said = "(not reported)"
		}
		read, ok := truth.Sysctls[name]
		if !ok {
			read = "(unreadable)"
		}
		diff("sysctl "+name, strconv.Quote(said), strconv.Quote(read))
	}
	diff("AF_PACKET sockets", rep.PacketSockets, truth.PacketSockets)
	r, t := rep.NIC, truth.NIC
	if r == nil || t == nil {
		if (r == nil) != (t == nil) {
			errs = append(errs, fmt.Errorf("primary NIC: the report says %+v, the inspector reads %+v", r, t))
		}
		return errs
	}
	diff("NIC name", r.Name, t.Name)
	diff("NIC driver", r.Driver, t.Driver)
	diff("MTU", r.MTU, t.MTU)
	diff("addresses", sorted(r.Addrs), sorted(t.Addrs))
	diff("address lifetime", r.Lifetime, t.Lifetime)
	diff("gateway", r.Gateway, t.Gateway)
	diff("rx queues", r.RxQueues, t.RxQueues)
	diff("tx queues", r.TxQueues, t.TxQueues)
	diff("queue IRQs", irqString(r.IRQs), irqString(t.IRQs))
	diff("XPS", sortedMap(r.XPS), sortedMap(t.XPS))
	diff("RPS", sortedMap(r.RPS), sortedMap(t.RPS))
	diff("root qdisc", r.Qdisc, t.Qdisc)
	diff("child qdiscs", r.Children, t.Children)
	diff("GRO", r.GRO, t.GRO)
	// An ethtool error's wording is the reader's own; that both failed is
	// agreement enough.
	if _, re := r.Coalesce["error"]; !re || t.Coalesce["error"] == "" {
		diff("interrupt moderation", sortedMap(r.Coalesce), sortedMap(t.Coalesce))
	}
	return errs
}

func irqString(irqs []report.IRQ) string {
	s := make([]string, len(irqs))
	for i, q := range irqs {
		s[i] = fmt.Sprintf("%d %s (queue %d) on %s", q.IRQ, q.Name, q.Queue, q.Affinity)
	}
	slices.Sort(s)
	return "[" + strings.Join(s, ", ") + "]"
}

func sortedMap(m map[string]string) string {
	var b strings.Builder
	b.WriteString("{")
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%q", k, m[k])
	}
	return b.String() + "}"
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func linkNamed(s *inspector.Snapshot, name string) *inspector.Link {
	for i := range s.Links {
		if s.Links[i].Name == name && name != "" {
			return &s.Links[i]
		}
	}
	return nil
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// CheckLeaseLog checks the test's DHCP server's log of one boot: the guest
// (mac) did one DISCOVER/REQUEST exchange for the address it serves on, got
// one lease, and never came back (a renewal or a second exchange means a
// DHCP client still runs, with its packet socket).
func CheckLeaseLog(log []vm.Message, leases []vm.Lease, errs []error, mac, served string) []error {
	var out []error
	bad := func(format string, a ...any) { out = append(out, fmt.Errorf(format, a...)) }
	for _, err := range errs {
		bad("DHCP server: %v", err)
	}
	if len(log) != 2 || log[0].Type != dhcpv4.MessageTypeDiscover || log[1].Type != dhcpv4.MessageTypeRequest {
		bad("DHCP log %v, want one DISCOVER then one REQUEST", log)
	}
	for _, m := range log {
		if m.MAC.String() != mac {
			bad("DHCP %s from %s, the guest is %s", m.Type, m.MAC, mac)
		}
		if m.ClientIP != nil && !m.ClientIP.IsUnspecified() {
			bad("DHCP %s with ciaddr %s: a renewal", m.Type, m.ClientIP)
		}
		if m.Type == dhcpv4.MessageTypeRequest && !m.Requested.Equal(net.ParseIP(served)) {
			bad("DHCP REQUEST for %v, the guest serves on %s", m.Requested, served)
		}
	}
	if len(leases) != 1 {
		bad("%d leases acknowledged, want 1", len(leases))
	}
	for _, l := range leases {
		if l.MAC.String() != mac || !l.IP.Equal(net.ParseIP(served)) {
			bad("lease %s to %s, want %s to the guest %s", l.IP, l.MAC, served, mac)
		}
	}
	return out
}
