package vm

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// nsPrefix starts the name of every namespace the harness creates; the PID
// of the creating process follows, so a leftover of a killed run is known.
const nsPrefix = "hptest-"

var nsSeq atomic.Int64

// Netns is a network namespace created for one test. It is managed with
// iproute2 (the same commands an operator would type, and `ip netns exec`
// is how QEMU is started inside it), and entered from Go on a locked OS
// thread for sockets the test itself opens.
type Netns struct {
	Name string
	h    netns.NsHandle
}

// ip runs iproute2 and returns its error with its output.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// CreateNetns creates a fresh namespace with loopback up. The caller must
// Close it.
func CreateNetns() (*Netns, error) {
	removeStaleNetns()
	name := fmt.Sprintf("%s%d-%d", nsPrefix, os.Getpid(), nsSeq.Add(1))
	if err := ip("netns", "add", name); err != nil {
		return nil, err
	}
	n := &Netns{Name: name, h: netns.None()}
	h, err := netns.GetFromName(name)
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("open netns %s: %w", name, err)
	}
	n.h = h
	if err := ip("-n", name, "link", "set", "lo", "up"); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// NewNetns is CreateNetns for tests: it fails the test on error and removes
// the namespace when the test ends.
func NewNetns(t testing.TB) *Netns {
	t.Helper()
	n, err := CreateNetns()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	return n
}

// Close deletes the namespace; the devices inside it (tap, veth) go with it.
func (n *Netns) Close() error {
	if n.h.IsOpen() {
		n.h.Close()
		n.h = netns.None()
	}
	if n.Name == "" {
		return nil
	}
	err := ip("netns", "del", n.Name)
	n.Name = ""
	return err
}

// removeStaleNetns deletes namespaces left by harness processes that no
// longer exist (a test binary killed by a timeout cannot run its cleanups).
func removeStaleNetns() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, nsPrefix)
		if !ok {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			ip("netns", "del", name)
		}
	}
}

// AddTap creates a persistent multi-queue tap device inside the namespace,
// gives it addr (CIDR) and sets it up. QEMU attaches to it by name with
// queues=N; multi_queue is required for virtio-net mq.
func (n *Netns) AddTap(name, addr string) error {
	if err := ip("-n", n.Name, "tuntap", "add", "dev", name, "mode", "tap", "multi_queue"); err != nil {
		return err
	}
	if addr != "" {
		if err := ip("-n", n.Name, "addr", "add", addr, "dev", name); err != nil {
			return err
		}
	}
	return ip("-n", n.Name, "link", "set", name, "up")
}

// AddVeth creates a veth pair with one end (name, addr) in n and the other
// (peerName, peerAddr) in peer, both up. Empty addresses are not assigned.
func (n *Netns) AddVeth(name, addr string, peer *Netns, peerName, peerAddr string) error {
	if err := ip("-n", n.Name, "link", "add", name, "type", "veth", "peer", "name", peerName, "netns", peer.Name); err != nil {
		return err
	}
	for _, d := range []struct{ ns, dev, addr string }{{n.Name, name, addr}, {peer.Name, peerName, peerAddr}} {
		if d.addr != "" {
			if err := ip("-n", d.ns, "addr", "add", d.addr, "dev", d.dev); err != nil {
				return err
			}
		}
		if err := ip("-n", d.ns, "link", "set", d.dev, "up"); err != nil {
			return err
		}
	}
	return nil
}

// Do runs fn on an OS thread switched into the namespace. Sockets created
// by fn belong to the namespace for their whole life, wherever they are used
// afterwards; goroutines started by fn do not inherit the namespace.
func (n *Netns) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("get current netns: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(n.h); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter netns %s: %w", n.Name, err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			// The thread stays locked, so the runtime discards it when
			// this goroutine ends instead of reusing it in the wrong
			// namespace.
			errc <- fmt.Errorf("leave netns %s: %w", n.Name, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// DialContext dials from inside the namespace.
func (n *Netns) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.Do(func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// HTTPClient returns a client whose connections are made inside the
// namespace.
func (n *Netns) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout:   timeout,
		Transport: &http.Transport{DialContext: n.DialContext, DisableCompression: true},
	}
}

// Command returns a command that runs prog inside the namespace
// (`ip netns exec`), e.g. QEMU or a load generator.
func (n *Netns) Command(ctx context.Context, prog string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name, prog}, args...)...)
}

// LinkIn returns a netlink handle inside the namespace named ns and the
// link named ifname there, for a test that reads back what a step
// installed. The caller closes the handle.
func LinkIn(t testing.TB, ns, ifname string) (*netlink.Handle, netlink.Link) {
	t.Helper()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close() // the handle's sockets stay in the namespace
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	link, err := nl.LinkByName(ifname)
	if err != nil {
		nl.Close()
		t.Fatal(err)
	}
	return nl, link
}
