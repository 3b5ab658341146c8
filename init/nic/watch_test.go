package nic

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestWatchLink: a veth whose peer goes down loses carrier, and gets it
// back when the peer comes up: both transitions are reported, once each.
func TestWatchLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	ns := fmt.Sprintf("hpwatch%d", os.Getpid()%100000)
	ip(t, "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	ip(t, "-n", ns, "link", "add", "w0", "type", "veth", "peer", "name", "w1")
	ip(t, "-n", ns, "link", "set", "w0", "up")
	ip(t, "-n", ns, "link", "set", "w1", "up")
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan bool, 16)
	if err := WatchLink(ctx, &h, "w0", func(up bool) { got <- up }, t.Logf); err != nil {
		t.Fatal(err)
	}
	next := func() bool {
		t.Helper()
		select {
		case up := <-got:
			return up
		case <-time.After(10 * time.Second):
			t.Fatal("no link change reported")
			return false
		}
	}
	// The first report is the state at subscription; carrier may still be
	// coming up.
	first := next()
	if !first {
		if !next() {
			t.Fatal("w0 never got carrier")
		}
	}
	ip(t, "-n", ns, "link", "set", "w1", "down")
	if next() {
		t.Error("peer down reported as up")
	}
	ip(t, "-n", ns, "link", "set", "w1", "up")
	if !next() {
		t.Error("peer up reported as down")
	}
	// An unrelated change on the watched link (its MTU) is no transition.
	ip(t, "-n", ns, "link", "set", "w0", "mtu", "1400")
	select {
	case up := <-got:
		t.Errorf("MTU change reported as a transition (up=%v)", up)
	case <-time.After(500 * time.Millisecond):
	}
}
