package nic

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

// TestWatchLinkIgnoresOthers: carrier changes of another link in the same
// namespace (a second veth pair) are not reported for the watched one.
func TestWatchLinkIgnoresOthers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	ns := fmt.Sprintf("hpwatcho%d", os.Getpid()%100000)
	ip(t, "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	for _, pair := range [][2]string{{"w0", "w1"}, {"x0", "x1"}} {
		ip(t, "-n", ns, "link", "add", pair[0], "type", "veth", "peer", "name", pair[1])
		ip(t, "-n", ns, "link", "set", pair[0], "up")
		ip(t, "-n", ns, "link", "set", pair[1], "up")
	}
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
	// Wait for w0's carrier (the first report may come before it).
	for deadline := time.After(10 * time.Second); ; {
		select {
		case up := <-got:
			if !up {
				continue
			}
		case <-deadline:
			t.Fatal("w0 never reported up")
		}
		break
	}
	ip(t, "-n", ns, "link", "set", "x1", "down")
	select {
	case up := <-got:
		t.Errorf("x1 (another link) going down was reported for w0 (up=%v)", up)
	case <-time.After(time.Second):
	}
}
