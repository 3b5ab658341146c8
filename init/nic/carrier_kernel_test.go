package nic

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestCarrierKernel runs nic-link-up against this machine's kernel: a veth
// pair in a network namespace of the test's own, with a sysfs mounted in
// a mount namespace of its own (sysfs shows the network namespace of its
// mounter). With the peer down the veth has no carrier: the step fails
// after the bound, naming the dead link. With the peer up the carrier
// comes, and the kernel's ethtool link settings (veth: 10000Mb/s, full)
// are reported.
func TestCarrierKernel(t *testing.T) {
	done := make(chan struct{})
	var setupErr error
	var dead, alive report.Step
	var waited time.Duration
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the namespaces die with the thread
		if setupErr = unix.Unshare(unix.CLONE_NEWNET | unix.CLONE_NEWNS); setupErr != nil {
			return
		}
		if setupErr = unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); setupErr != nil {
			return
		}
		sys, err := os.MkdirTemp("", "hotpath-sys")
		if err != nil {
			setupErr = err
			return
		}
		defer os.Remove(sys)
		if setupErr = unix.Mount("sysfs", sys, "sysfs", 0, ""); setupErr != nil {
			return
		}
		defer unix.Unmount(sys, unix.MNT_DETACH)
		if setupErr = netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "hp0"}, PeerName: "hp1"}); setupErr != nil {
			return
		}
		opt := defaultOpts()
		opt.CarrierWait = 300 * time.Millisecond
		tu := &Tuner{SysRoot: sys, Link: Link{Name: "hp0", Driver: "veth"}, Netlink: NewNetlink(), Opt: opt}
		step := stepNamed(t, tu.Steps(), "nic-link-up")
		start := time.Now()
		dead = boot.RunOne(context.Background(), step)
		waited = time.Since(start)
		peer, err := netlink.LinkByName("hp1")
		if err == nil {
			err = netlink.LinkSetUp(peer)
		}
		if setupErr = err; err != nil {
			return
		}
		opt.CarrierWait = 10 * time.Second
		tu.Opt = opt
		alive = boot.RunOne(context.Background(), stepNamed(t, tu.Steps(), "nic-link-up"))
	}()
	<-done
	if setupErr != nil {
		t.Skipf("no network or mount namespace, sysfs or veth here: %v", setupErr)
	}
	if dead.Status != report.Failed || !strings.Contains(dead.Error, "no carrier on hp0 after 300ms: the link is dead") {
		t.Errorf("peer down: %+v", dead)
	}
	if waited < 300*time.Millisecond {
		t.Errorf("peer down: gave up after %v, before the bound", waited)
	}
	if d := alive.Detail; alive.Status != report.Applied || d["carrier"] != "up" || d["speed"] != "10000Mb/s" || d["duplex"] != "full" {
		t.Errorf("peer up: %+v", alive)
	}
	t.Logf("peer up: carrier after %s", alive.Detail["carrier_after"])
}
