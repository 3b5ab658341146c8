package nic

import (
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestQdiscStatsKernel lists a real device's qdiscs in a network
// namespace of the test's own: a veth whose root is replaced by mq (two
// tx queues) gets a child per queue of the default qdisc, and QdiscStats
// names the root by its parent "root", the children by mq's classes; the
// peer's root becomes pfifo_fast from a kind-only request (ReplaceRoot, as
// nic-qdisc asks for a single-queue device's root).
func TestQdiscStatsKernel(t *testing.T) {
	done := make(chan struct{})
	var err, opErr error // the namespace's setup (a skip), the calls under test (a failure)
	var qs, peer []QdiscStat
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the namespace dies with the thread
		if err = unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return
		}
		if err = netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "hp0", NumTxQueues: 2, NumRxQueues: 2}, PeerName: "hp1"}); err != nil {
			return
		}
		if opErr = (rtnl{}).ReplaceRoot("hp0", "mq"); opErr != nil {
			return
		}
		if qs, opErr = QdiscStats("hp0"); opErr != nil {
			return
		}
		if opErr = (rtnl{}).ReplaceRoot("hp1", "pfifo_fast"); opErr != nil {
			return
		}
		peer, opErr = QdiscStats("hp1")
	}()
	<-done
	if err != nil {
		t.Skipf("network namespace or veth: %v (needs root)", err)
	}
	if opErr != nil {
		t.Fatal(opErr)
	}
	var root, children int
	for _, q := range qs {
		switch {
		case q.Parent == "root" && q.Kind == "mq":
			root++
		case q.Parent != "root" && q.Kind != "mq":
			children++
		}
		if q.Drops != 0 || q.Backlog != 0 {
			t.Errorf("idle qdisc %+v counts drops or a backlog", q)
		}
	}
	if root != 1 || children != 2 {
		t.Errorf("qdiscs %+v: want an mq root and two children", qs)
	}
	if len(peer) != 1 || peer[0].Kind != "pfifo_fast" || peer[0].Parent != "root" {
		t.Errorf("peer's qdiscs %+v: want a pfifo_fast root", peer)
	}
}
