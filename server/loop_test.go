package server

import (
	"io"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestScanBounded: a timeout pass over connections that have all timed
// out expires at most expirePerTurn of them per loop turn (scan call), and
// examines at most scanPerTurn slots, so that an expiry storm is spread
// over turns with events served between them (TestExpiryStorm measures
// the effect); the pass ends once every slot was examined.
func TestScanBounded(t *testing.T) {
	w := bareWorker(t, Config{Log: io.Discard, IdleTimeout: time.Second})
	const n = 3*expirePerTurn + 5
	for range n {
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(pair[1]) })
		c := w.addConn(pair[0], true)
		if c == nil {
			t.Fatal("addConn failed")
		}
		c.reqStart = 0 // idle between requests: the idle timeout applies
	}
	w.now += int64(2 * time.Second) // every one past its idle timeout
	w.scanNext = 0
	var turns []int
	for w.scanNext >= 0 && len(turns) < 100 {
		before := w.nconns
		w.scan()
		turns = append(turns, before-w.nconns)
	}
	if w.nconns != 0 {
		t.Errorf("%d connections left open after the pass (expired per turn: %v)", w.nconns, turns)
	}
	for i, k := range turns {
		if k > expirePerTurn {
			t.Errorf("turn %d expired %d connections, over expirePerTurn (%d): %v", i, k, expirePerTurn, turns)
		}
	}
	if len(turns) < n/expirePerTurn+1 {
		t.Errorf("the pass took %d turns for %d expiries, want at least %d: %v", len(turns), n, n/expirePerTurn+1, turns)
	}

	// Slots examined per turn: with nothing to expire, a pass over more
	// than scanPerTurn slots takes more than one turn.
	w.conns = append(w.conns, make([]*conn, 2*scanPerTurn)...)
	w.scanNext = 0
	w.scan()
	if w.scanNext != scanPerTurn {
		t.Errorf("one turn examined up to slot %d, want scanPerTurn (%d)", w.scanNext, scanPerTurn)
	}
}
