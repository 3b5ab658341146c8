package netconf

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/vm"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	uiorand "github.com/u-root/uio/rand"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

func TestPacketSockets(t *testing.T) {
	root := t.TempDir()
	os.Mkdir(root+"/net", 0o755)
	hdr := "sk       RefCnt Type Proto  Iface R Rmem   User   Inode\n"
	for want, body := range map[int]string{
		0: hdr,
		2: hdr + "0000000000000000 3 3 0003 2 1 0 0 1234\n0000000000000000 3 3 0003 2 1 0 0 1235\n",
	} {
		os.WriteFile(root+"/net/packet", []byte(body), 0o644)
		if n, err := PacketSockets(root); n != want || err != nil {
			t.Errorf("PacketSockets = %d, %v; want %d", n, err, want)
		}
	}
}

const childEnv = "HOTPATH_NETCONF_CHILD"

// childResult is what the child inside the client namespace reports.
type childResult struct {
	Step    report.Step `json:"step"`
	Packets int         `json:"packets"`
}

// TestHelperNetconfChild is not a test: it is the process the DHCP test
// runs inside the client network namespace (ip netns exec), so that every
// thread of the step, including dhclient's goroutines, is in it.
func TestHelperNetconfChild(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		t.Skip("helper process for TestDHCP/TestStatic")
	}
	ifname := os.Getenv("HOTPATH_NETCONF_IF")
	var step boot.Step
	switch mode {
	case "dhcp":
		timeout, retries := 2*time.Second, 3
		if os.Getenv("HOTPATH_NETCONF_SHORT") != "" {
			timeout, retries = 300*time.Millisecond, 2
		}
		step = DHCPStep(DHCPOptions{Interface: ifname, Timeout: timeout, Retries: retries,
			LinkTimeout: 5 * time.Second, ResolvConf: os.Getenv("HOTPATH_NETCONF_RESOLV"), ProcRoot: "/proc"})
	case "retry":
		// The boot step fails (no server yet), then the background
		// retries take the lease once the parent starts one.
		o := DHCPOptions{Interface: ifname, Timeout: 300 * time.Millisecond, Retries: 1,
			LinkTimeout: 5 * time.Second, ProcRoot: "/proc"}
		r := boot.RunOne(context.Background(), DHCPStep(o))
		fmt.Printf("STEP %s\n", r.Status)
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		var res childResult
		KeepTrying(ctx, o, 100*time.Millisecond, 400*time.Millisecond, func(l Lease, attempts int) {
			res.Step = report.Step{Name: "retry", Status: report.Applied, Detail: map[string]string{
				"address": l.Addr.String(), "attempts": fmt.Sprint(attempts)}}
		})
		res.Packets, _ = PacketSockets("/proc")
		b, _ := json.Marshal(res)
		fmt.Printf("RESULT %s\n", b)
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case "cap":
		// No server answers: six exchanges, each capped at 300 ms.
		step = DHCPStep(DHCPOptions{Interface: ifname, Timeout: 300 * time.Millisecond, Retries: 6,
			BackoffMax: 300 * time.Millisecond, LinkTimeout: 5 * time.Second, ProcRoot: "/proc"})
	case "deadline":
		// The boot with no server: exchanges without end but for the
		// network deadline; then the background attempts.
		o := DHCPOptions{Interface: ifname, Timeout: 300 * time.Millisecond, Retries: 1000,
			BackoffMax: 400 * time.Millisecond, LinkTimeout: 5 * time.Second, ProcRoot: "/proc"}
		r := boot.RunOne(context.Background(), boot.Before(time.Now().Add(1500*time.Millisecond), DHCPStep(o)))
		fmt.Printf("STEP %s %.0f %s\n", r.Status, r.Millis, r.Error)
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		var res childResult
		KeepTrying(ctx, o, 100*time.Millisecond, 400*time.Millisecond, func(l Lease, attempts int) {
			res.Step = report.Step{Name: "retry", Status: report.Applied, Detail: map[string]string{
				"address": l.Addr.String(), "attempts": fmt.Sprint(attempts)}}
		})
		res.Packets, _ = PacketSockets("/proc")
		b, _ := json.Marshal(res)
		fmt.Printf("RESULT %s\n", b)
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case "static":
		step = StaticStep(ifname, Lease{Addr: netip.MustParsePrefix("10.78.0.9/24"),
			Gateway: netip.MustParseAddr("10.78.0.1"), MTU: 1300}, "/proc")
	case "static32":
		step = StaticStep(ifname, Lease{Addr: netip.MustParsePrefix(static32Addr), Gateway: netip.MustParseAddr(static32Gateway)}, "/proc")
	}
	res := childResult{Step: boot.RunOne(context.Background(), step)}
	res.Packets, _ = PacketSockets("/proc")
	b, _ := json.Marshal(res)
	fmt.Printf("RESULT %s\n", b)
	// Stay alive until the parent has looked at our namespace.
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

var nsSeq atomic.Int32

// netnsPair creates two network namespaces joined by a veth pair and
// removes them when the test ends, whatever happens.
func netnsPair(t *testing.T) (srvNS, cliNS, srvIf, cliIf string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if testing.Short() {
			t.Skip("needs root for network namespaces; skipped in -short mode")
		}
		t.Fatal("needs root for network namespaces: run as root, or with -short to skip")
	}
	id := fmt.Sprintf("%d%d", os.Getpid()%100000, nsSeq.Add(1))
	srvNS, cliNS = "hpsrv"+id, "hpcli"+id
	srvIf, cliIf = "hs"+id, "hc"+id
	for _, ns := range []string{srvNS, cliNS} {
		run(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	}
	run(t, "ip", "link", "add", srvIf, "netns", srvNS, "type", "veth", "peer", "name", cliIf, "netns", cliNS)
	run(t, "ip", "-n", srvNS, "link", "set", "lo", "up")
	run(t, "ip", "-n", cliNS, "link", "set", "lo", "up")
	return
}

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// inNS runs f on a thread switched into the named namespace.
func inNS(t *testing.T, name string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		// The thread is left locked when the goroutine ends, so the
		// runtime discards it rather than reusing it in the wrong netns.
		h, err := netns.GetFromName(name)
		if err != nil {
			t.Errorf("netns %s: %v", name, err)
			return
		}
		defer h.Close()
		if err := unix.Setns(int(h), unix.CLONE_NEWNET); err != nil {
			t.Errorf("setns %s: %v", name, err)
			return
		}
		f()
	}()
	<-done
}

// dhcpServer serves one fixed lease on ifname inside ns.
type dhcpServer struct {
	srv      *server4.Server
	requests atomic.Int32
	acks     atomic.Int32
}

func startServer(t *testing.T, ns, ifname string, lease net.IP) *dhcpServer {
	t.Helper()
	return startServerAnswering(t, ns, ifname, lease, true)
}

// startSilentServer counts the requests on ifname inside ns and answers
// none.
func startSilentServer(t *testing.T, ns, ifname string) *dhcpServer {
	t.Helper()
	return startServerAnswering(t, ns, ifname, nil, false)
}

func startServerAnswering(t *testing.T, ns, ifname string, lease net.IP, answer bool) *dhcpServer {
	t.Helper()
	d := &dhcpServer{}
	serverIP := net.IPv4(10, 77, 0, 1)
	handler := func(conn net.PacketConn, peer net.Addr, m *dhcpv4.DHCPv4) {
		d.requests.Add(1)
		if !answer {
			return
		}
		var typ dhcpv4.MessageType
		switch m.MessageType() {
		case dhcpv4.MessageTypeDiscover:
			typ = dhcpv4.MessageTypeOffer
		case dhcpv4.MessageTypeRequest:
			typ = dhcpv4.MessageTypeAck
			d.acks.Add(1)
		default:
			return
		}
		resp, err := dhcpv4.NewReplyFromRequest(m,
			dhcpv4.WithMessageType(typ),
			dhcpv4.WithYourIP(lease),
			dhcpv4.WithServerIP(serverIP),
			dhcpv4.WithNetmask(net.CIDRMask(24, 32)),
			dhcpv4.WithRouter(serverIP),
			dhcpv4.WithDNS(serverIP),
			dhcpv4.WithLeaseTime(600),
			dhcpv4.WithOption(dhcpv4.OptServerIdentifier(serverIP)),
			dhcpv4.WithOption(dhcpv4.Option{Code: dhcpv4.OptionInterfaceMTU, Value: dhcpv4.Uint16(1400)}),
		)
		if err != nil {
			t.Errorf("dhcp reply: %v", err)
			return
		}
		// The client has no address yet: answer by broadcast.
		if _, err := conn.WriteTo(resp.ToBytes(), &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort}); err != nil {
			t.Errorf("dhcp send: %v", err)
		}
	}
	inNS(t, ns, func() {
		run(t, "ip", "-n", ns, "addr", "add", "10.77.0.1/24", "dev", ifname)
		run(t, "ip", "-n", ns, "link", "set", ifname, "up")
		conn, err := server4.NewIPv4UDPConn(ifname, &net.UDPAddr{IP: net.IPv4zero, Port: dhcpv4.ServerPort})
		if err != nil {
			t.Errorf("dhcp server socket: %v", err)
			return
		}
		d.srv, err = server4.NewServer(ifname, nil, handler, server4.WithConn(conn))
		if err != nil {
			t.Errorf("dhcp server: %v", err)
		}
	})
	if d.srv == nil {
		t.FailNow()
	}
	go d.srv.Serve()
	t.Cleanup(func() { d.srv.Close() })
	return d
}

// runChild runs the netconf child in ns and returns its result and the
// number of AF_PACKET sockets the parent sees in that namespace while the
// child is still alive.
func runChild(t *testing.T, ns, mode, ifname string, extraEnv ...string) (childResult, int) {
	t.Helper()
	return runChildWatch(t, ns, mode, ifname, nil, extraEnv...)
}

// runChildWatch is runChild, calling onLine with each line the child
// prints before its result.
func runChildWatch(t *testing.T, ns, mode, ifname string, onLine func(string), extraEnv ...string) (childResult, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, os.Args[0], "-test.run=^TestHelperNetconfChild$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "HOTPATH_NETCONF_IF="+ifname)
	cmd.Env = append(cmd.Env, extraEnv...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "RESULT ")
		if !ok {
			t.Logf("child: %s", line)
			if onLine != nil {
				onLine(line)
			}
			continue
		}
		var res childResult
		if err := json.Unmarshal([]byte(rest), &res); err != nil {
			t.Fatalf("child result %q: %v", rest, err)
		}
		// The namespace as seen from outside, while the child lives: the
		// parent reads /proc/net/packet of the namespace with ip netns exec.
		out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/proc/net/packet").Output()
		if err != nil {
			t.Fatalf("read packet sockets of %s: %v", ns, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return res, len(lines) - 1
	}
	t.Fatalf("child ended without a result (%v)", sc.Err())
	return childResult{}, 0
}

// checkInstalled asserts, through a netlink handle in ns, what a lease
// must leave behind.
func checkInstalled(t *testing.T, ns, ifname, cidr, gw string, mtu int) {
	t.Helper()
	nl, link := vm.LinkIn(t, ns, ifname)
	defer nl.Close()
	if link.Attrs().MTU != mtu {
		t.Errorf("mtu %d, want %d", link.Attrs().MTU, mtu)
	}
	addrs, err := nl.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range addrs {
		if a.IPNet.String() == cidr {
			found = true
			if uint32(a.ValidLft) != Forever || uint32(a.PreferedLft) != Forever {
				t.Errorf("%s valid_lft %d preferred_lft %d, want forever", cidr, a.ValidLft, a.PreferedLft)
			}
			if a.Flags&unix.IFA_F_PERMANENT == 0 {
				t.Errorf("%s is not permanent (flags %#x)", cidr, a.Flags)
			}
		}
	}
	if !found {
		t.Errorf("%s not installed; have %v", cidr, addrs)
	}
	routes, err := nl.RouteList(link, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	def := ""
	for _, r := range routes {
		if r.Dst == nil || r.Dst.String() == "0.0.0.0/0" {
			def = r.Gw.String()
		}
	}
	if def != gw {
		t.Errorf("default route via %q, want %q (routes %v)", def, gw, routes)
	}
}

func TestDHCP(t *testing.T) {
	srvNS, cliNS, srvIf, cliIf := netnsPair(t)
	srv := startServer(t, srvNS, srvIf, net.IPv4(10, 77, 0, 42))
	resolv := t.TempDir() + "/resolv.conf"
	res, outside := runChild(t, cliNS, "dhcp", cliIf, "HOTPATH_NETCONF_RESOLV="+resolv)
	if res.Step.Status != report.Applied {
		t.Fatalf("dhcp step: %+v", res.Step)
	}
	if srv.acks.Load() == 0 {
		t.Fatalf("the server acknowledged nothing (%d requests)", srv.requests.Load())
	}
	d := res.Step.Detail
	if d["address"] != "10.77.0.42/24" || d["gateway"] != "10.77.0.1" || d["mtu"] != "1400" || d["valid_lft"] != "forever" {
		t.Errorf("step detail %v", d)
	}
	if res.Packets != 0 || outside != 0 {
		t.Errorf("AF_PACKET sockets after the lease: %d seen by the child, %d from outside; want 0", res.Packets, outside)
	}
	checkInstalled(t, cliNS, cliIf, "10.77.0.42/24", "10.77.0.1", 1400)
	if b, err := os.ReadFile(resolv); err != nil || !strings.Contains(string(b), "nameserver 10.77.0.1") {
		t.Errorf("resolv.conf %q, %v", b, err)
	}
}

// TestDHCPNoServer: without an answer the step fails (it does not hang)
// and leaves no AF_PACKET socket behind either.
func TestDHCPNoServer(t *testing.T) {
	srvNS, cliNS, srvIf, cliIf := netnsPair(t)
	run(t, "ip", "-n", srvNS, "link", "set", srvIf, "up")
	res, outside := runChild(t, cliNS, "dhcp", cliIf, "HOTPATH_NETCONF_SHORT=1")
	if res.Step.Status != report.Failed {
		t.Errorf("dhcp without a server: %+v", res.Step)
	}
	if res.Packets != 0 || outside != 0 {
		t.Errorf("AF_PACKET sockets after a failed exchange: %d/%d", res.Packets, outside)
	}
}

func TestStatic(t *testing.T) {
	srvNS, cliNS, srvIf, cliIf := netnsPair(t)
	run(t, "ip", "-n", srvNS, "link", "set", srvIf, "up")
	res, _ := runChild(t, cliNS, "static", cliIf)
	if res.Step.Status != report.Applied {
		t.Fatalf("static step: %+v", res.Step)
	}
	checkInstalled(t, cliNS, cliIf, "10.78.0.9/24", "10.78.0.1", 1300)
}

// TestNonblockingXID: once installed, the DHCP library's transaction ids
// come from the never-blocking reader, and they still differ.
func TestNonblockingXID(t *testing.T) {
	nonblockingXID()
	if _, ok := uiorand.Reader.(nonblockingReader); !ok {
		t.Fatalf("uio/rand.Reader is %T", uiorand.Reader)
	}
	a, err := dhcpv4.GenerateTransactionID()
	if err != nil {
		t.Fatal(err)
	}
	b, err := dhcpv4.GenerateTransactionID()
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Errorf("two transaction ids equal: %v", a)
	}
}

// TestDHCPBackgroundRetry: the boot step fails with no server; a server
// that appears later is found by the background retries, whose lease is
// installed, and no AF_PACKET socket stays behind.
func TestDHCPBackgroundRetry(t *testing.T) {
	srvNS, cliNS, srvIf, cliIf := netnsPair(t)
	run(t, "ip", "-n", srvNS, "link", "set", srvIf, "up")
	var srv *dhcpServer
	res, outside := runChildWatch(t, cliNS, "retry", cliIf, func(line string) {
		if strings.HasPrefix(line, "STEP ") {
			if line != "STEP failed" {
				t.Errorf("boot step without a server: %s", line)
			}
			srv = startServer(t, srvNS, srvIf, net.IPv4(10, 77, 0, 43))
		}
	})
	if srv == nil {
		t.Fatal("the child never reported its boot step")
	}
	if res.Step.Status != report.Applied || res.Step.Detail["address"] != "10.77.0.43/24" {
		t.Fatalf("background retry: %+v", res.Step)
	}
	if res.Packets != 0 || outside != 0 {
		t.Errorf("AF_PACKET sockets after the background lease: %d/%d", res.Packets, outside)
	}
	checkInstalled(t, cliNS, cliIf, "10.77.0.43/24", "10.77.0.1", 1400)
}

func TestNextBackoff(t *testing.T) {
	d := time.Second
	var got []time.Duration
	for range 5 {
		got = append(got, d)
		d = NextBackoff(d, 5*time.Second)
	}
	if fmt.Sprint(got) != "[1s 2s 4s 5s 5s]" {
		t.Errorf("back-off %v", got)
	}
}

// TestSettling: the error of a DHCP exchange whose first send the kernel
// refused (as nclient4 wraps it: "got an error while processing the
// request: error writing packet to connection: write packet <mac>: sendto:
// network is down", joined by RequestLease) is the link settling; a
// timeout is not.
func TestSettling(t *testing.T) {
	send := &net.OpError{Op: "write", Net: "packet", Err: os.NewSyscallError("sendto", unix.ENETDOWN)}
	wrapped := fmt.Errorf("dhcp eth0: %w", errors.Join(fmt.Errorf("got an error while processing the request: %w",
		fmt.Errorf("error writing packet to connection: %w", send))))
	if !settling(wrapped) {
		t.Errorf("%v: not settling", wrapped)
	}
	if settling(fmt.Errorf("dhcp eth0: %w", os.ErrDeadlineExceeded)) {
		t.Error("a timeout counted as settling")
	}
}
