// Command gpinit is the PID 1 of the bench-vm baseline: Debian's stock
// kernel with a general-purpose setup, the way a workload typically runs on
// a stock distribution image. It is the "before" against which the hotpath
// appliance is measured, so it deliberately does what hotpath removes:
//
//   - mitigations stay at the kernel's defaults (nothing on the command line);
//   - netfilter is loaded with a stateful rule (ct state established,related
//     accept), so every packet goes through conntrack;
//   - the DHCP client stays running for the lease's life, holding its
//     AF_PACKET socket open, so every packet is also copied to it;
//   - no NIC, IRQ, qdisc or sysctl tuning.
//
// It then starts /workload with the same contract the hotpath init uses
// (HOTPATH_CPUS, HOTPATH_PORT) and prints "GPINIT-READY" once it accepts.
//
// For the bench's per-request figures it serves the same counters the
// appliance's management port does, on the same port (init/metrics'
// interrupts and cpu collectors over /proc, GET /metrics on 9100), so both
// kinds of guest are read alike; nothing is read between scrapes.
package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/hotpath-dev/hotpath/init/metrics"
	"github.com/hotpath-dev/hotpath/init/nic"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ModulesList names the kernel modules to load, one path per line, in
// dependency order (the bench program resolves the order on the host from
// each module's "depends" field): Debian builds virtio and netfilter as
// modules.
const ModulesList = "/etc/gpinit/modules"

const port = 8080

func main() {
	log.SetFlags(0)
	log.SetPrefix("gpinit: ")
	if err := run(); err != nil {
		log.Print(err)
	}
	// PID 1 must not exit; the harness ends the VM.
	for {
		time.Sleep(time.Hour)
	}
}

func run() error {
	for _, m := range []struct{ src, dst, typ string }{
		{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"}, {"tmpfs", "/run", "tmpfs"},
	} {
		os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.typ, 0, ""); err != nil {
			return fmt.Errorf("mount %s: %w", m.dst, err)
		}
	}
	var uts unix.Utsname
	unix.Uname(&uts)
	log.Printf("kernel %s", unix.ByteSliceToString(uts.Release[:]))
	if err := loadModules(); err != nil {
		return err
	}
	lo, err := netlink.LinkByName("lo")
	if err == nil {
		netlink.LinkSetUp(lo)
	}
	eth, err := waitEthernet(10 * time.Second)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetUp(eth); err != nil {
		return fmt.Errorf("link up %s: %w", eth.Attrs().Name, err)
	}
	if err := firewall(); err != nil {
		return err
	}
	if err := dhcp(eth); err != nil {
		return err
	}
	go serveMetrics(eth.Attrs().Name)
	return workload()
}

func waitEthernet(d time.Duration) (netlink.Link, error) {
	deadline := time.Now().Add(d)
	for {
		links, err := netlink.LinkList()
		if err != nil {
			return nil, fmt.Errorf("list links: %w", err)
		}
		for _, l := range links {
			if l.Type() == "device" && l.Attrs().Name != "lo" && len(l.Attrs().HardwareAddr) == 6 {
				return l, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no Ethernet device after %v", d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// firewall installs a stateful input rule, as a stock host firewall does.
func firewall() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "filter"})
	accept := nftables.ChainPolicyAccept
	for _, hook := range []struct {
		name string
		h    *nftables.ChainHook
	}{{"input", nftables.ChainHookInput}, {"output", nftables.ChainHookOutput}} {
		ch := c.AddChain(&nftables.Chain{Name: hook.name, Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: hook.h, Priority: nftables.ChainPriorityFilter, Policy: &accept})
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
			&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
				Xor:  binaryutil.NativeEndian.PutUint32(0)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0, 0, 0, 0}},
			&expr.Counter{},
			&expr.Verdict{Kind: expr.VerdictAccept},
		}})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: install rules: %w", err)
	}
	log.Print("netfilter: inet filter input/output with ct state established,related accept")
	return nil
}

// dhcp obtains a lease and keeps the client (and its AF_PACKET socket)
// alive, renewing at half the lease time, as a stock DHCP client does.
func dhcp(eth netlink.Link) error {
	name := eth.Attrs().Name
	cl, err := nclient4.New(name, nclient4.WithTimeout(5*time.Second), nclient4.WithRetry(5))
	if err != nil {
		return fmt.Errorf("dhcp %s: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lease, err := cl.Request(ctx)
	if err != nil {
		return fmt.Errorf("dhcp %s: %w", name, err)
	}
	ack := lease.ACK
	lt := ack.IPAddressLeaseTime(time.Hour)
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: ack.YourIPAddr, Mask: ack.SubnetMask()},
		ValidLft: int(lt.Seconds()), PreferedLft: int(lt.Seconds())}
	if err := netlink.AddrAdd(eth, addr); err != nil {
		return fmt.Errorf("address %s: %w", addr, err)
	}
	if r := ack.Router(); len(r) > 0 {
		netlink.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: r[0]})
	}
	log.Printf("dhcp: %s on %s for %v; client keeps running", addr.IPNet, name, lt)
	go func() {
		for {
			time.Sleep(lt / 2)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if l, err := cl.Renew(ctx, lease); err == nil {
				lease = l
			}
			cancel()
		}
	}()
	return nil
}

func workload() error {
	cmd := exec.Command("/workload")
	cmd.Env = []string{
		"HOTPATH_CPUS=0-" + strconv.Itoa(runtimeCPUs()-1),
		"HOTPATH_PORT=" + strconv.Itoa(port),
	}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start workload: %w", err)
	}
	for i := 0; i < 300; i++ {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			c.Close()
			fmt.Println("GPINIT-READY")
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	err := cmd.Wait()
	return fmt.Errorf("workload exited: %v", err)
}

func runtimeCPUs() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 1
	}
	return set.Count()
}

func loadModules() error {
	list, err := os.ReadFile(ModulesList)
	if err != nil {
		return err
	}
	for _, p := range strings.Fields(string(list)) {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && err != unix.EEXIST {
			return fmt.Errorf("load %s: %w", p, err)
		}
	}
	log.Printf("loaded %d modules", len(strings.Fields(string(list))))
	return nil
}

// metricsPort is the appliance's management port (init/mgmt.DefaultPort).
const metricsPort = "9100"

// serveMetrics serves the NIC's queue interrupts and the CPU time, named
// by the same code the appliance's init uses (init/nic's IRQ names,
// init/metrics' collectors).
func serveMetrics(ifname string) {
	o := metrics.Options{ProcRoot: "/proc"}
	link, err := nic.Discover("/sys", ifname)
	if err == nil {
		var irqs []nic.QueueIRQ
		if irqs, err = nic.QueueIRQs("/proc", link); err == nil {
			queues := map[string]int{}
			for _, q := range irqs {
				queues[q.Name] = q.Queue
			}
			o.QueueIRQ = func(name string) (int, bool) { q, ok := queues[name]; return q, ok }
			log.Printf("metrics: %d queue interrupts of %s (%s)", len(irqs), ifname, link.Driver)
		}
	}
	if err != nil {
		log.Printf("metrics: %s: %v (every interrupt line exported, none as a queue)", ifname, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(metrics.NewRegistry(o), promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: ":" + metricsPort, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Printf("metrics: %v", srv.ListenAndServe())
}
