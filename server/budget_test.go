package server

import (
	"io"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hotpath-dev/hotpath/server/reuseport"
)

// checkBudget compares a budget's two figures with what they must be.
func checkBudget(t *testing.T, step string, b *budget, held, extra int64) {
	t.Helper()
	if b.held != held || b.extra != extra {
		t.Errorf("%s: held %d extra %d, want held %d extra %d", step, b.held, b.extra, held, extra)
	}
}

// TestBudgetInputBuffers: base-size input buffers are charged to held
// once, kept in the free list (still held) up to maxFreeIn, and released
// beyond it and when the list is dropped; none of them counts as extra.
func TestBudgetInputBuffers(t *testing.T) {
	const base = 1000
	b := newBudget(&Config{ReadBufferSize: base, MemoryBudget: 1 << 20})
	in := make([][]byte, maxFreeIn+3)
	for i := range in {
		in[i] = b.getIn()
		if cap(in[i]) != base || len(in[i]) != 0 {
			t.Fatalf("getIn: len %d cap %d, want an empty %d-byte buffer", len(in[i]), cap(in[i]), base)
		}
	}
	checkBudget(t, "after getIn", &b, int64(len(in))*base, 0)
	for _, p := range in {
		if b.putIn(append(p, "data"...)) {
			t.Error("putIn of a base-size buffer reported a grown one")
		}
	}
	// maxFreeIn kept (still held), the three beyond the list released.
	checkBudget(t, "after putIn", &b, maxFreeIn*base, 0)
	if len(b.free) != maxFreeIn {
		t.Errorf("free list holds %d, want %d", len(b.free), maxFreeIn)
	}
	if p := b.getIn(); len(p) != 0 || cap(p) != base {
		t.Errorf("reused buffer len %d cap %d, want empty (putIn keeps p[:0])", len(p), cap(p))
	} else {
		b.putIn(p)
	}
	checkBudget(t, "a buffer reused from the list", &b, maxFreeIn*base, 0)
	if b.putIn(nil) {
		t.Error("putIn(nil) reported a grown buffer")
	}

	// dropUnused keeps the list while getIn was called since the last call.
	b.dropUnused()
	checkBudget(t, "dropUnused after a getIn", &b, maxFreeIn*base, 0)
	b.dropUnused()
	checkBudget(t, "dropUnused after none", &b, 0, 0)
	if len(b.free) != 0 {
		t.Errorf("free list holds %d after dropUnused", len(b.free))
	}
}

// TestBudgetGrow: a grown input buffer is charged to held by its whole
// capacity and to extra by what lies beyond base; the request for it is
// refused only when extra would pass limit (reaching it is allowed); and
// giving it back releases both figures exactly.
func TestBudgetGrow(t *testing.T) {
	const base, limit = 1000, 10000
	b := newBudget(&Config{ReadBufferSize: base, MemoryBudget: limit})
	in := append(b.getIn(), "head"...)
	g, ok := b.grow(in, 4*base)
	if !ok || cap(g) != 4*base || string(g) != "head" {
		t.Fatalf("grow to %d: ok %v, cap %d, %q; want the data in a %d-byte buffer", 4*base, ok, cap(g), g, 4*base)
	}
	checkBudget(t, "grown to 4 base, old still out", &b, base+4*base, 3*base)
	b.putIn(in) // to the free list: still held, as a spare
	checkBudget(t, "the old buffer back", &b, base+4*base, 3*base)
	if b.spent() {
		t.Error("spent with extra 3000 of 10000")
	}

	// From the 4-base buffer, 11 base would take extra to 3000-3000+10000
	// = limit exactly: allowed. One byte more is refused and costs nothing.
	if _, ok := b.grow(g, 11*base+1); ok {
		t.Error("grow past limit allowed")
	}
	checkBudget(t, "a refused grow", &b, base+4*base, 3*base)
	g2, ok := b.grow(g, 11*base)
	if !ok {
		t.Fatal("grow to exactly limit refused")
	}
	if !b.putIn(g) {
		t.Error("putIn of a grown buffer did not report it")
	}
	checkBudget(t, "grown to 11 base", &b, base+11*base, limit)
	if !b.spent() {
		t.Error("not spent with extra == limit")
	}
	if !b.putIn(g2) {
		t.Error("putIn of a grown buffer did not report it")
	}
	checkBudget(t, "everything back", &b, base, 0)
	if len(b.free) != 1 {
		t.Errorf("free list holds %d, want the one base-size buffer (a grown one went there?)", len(b.free))
	}
	b.dropFree()
	checkBudget(t, "free list dropped", &b, 0, 0)
}

// TestBudgetPending: pending output is charged to held and extra by its
// capacity as it grows (never refused, even past limit) and released when
// dropped.
func TestBudgetPending(t *testing.T) {
	const base, limit = 1000, 500
	b := newBudget(&Config{ReadBufferSize: base, MemoryBudget: limit})
	p := b.setPending(nil, []byte("0123456789"))
	if string(p) != "0123456789" {
		t.Fatalf("setPending holds %q", p)
	}
	checkBudget(t, "10 bytes pending", &b, int64(cap(p)), int64(cap(p)))
	small := b.setPending(p, []byte("abc"))
	if string(small) != "abc" || cap(small) != cap(p) {
		t.Errorf("setPending of less: %q cap %d, want the same buffer (cap %d)", small, cap(small), cap(p))
	}
	checkBudget(t, "3 bytes in the same buffer", &b, int64(cap(p)), int64(cap(p)))
	big := b.setPending(small, make([]byte, 2*limit))
	checkBudget(t, "past limit", &b, int64(cap(big)), int64(cap(big)))
	if cap(big) < 2*limit || !b.spent() {
		t.Errorf("pending of %d: cap %d, spent %v; want kept and spent", 2*limit, cap(big), b.spent())
	}
	if b.replacePending(big, nil) != nil {
		t.Error("replacePending(nil) returned a buffer")
	}
	checkBudget(t, "dropped", &b, 0, 0)
}

// TestGrowInFairShare: with the budget spent, a connection asking for a
// buffer makes the connection holding the largest grown buffer yield
// (503, closed after it) when that buffer is more than four times the
// size asked for, and is itself refused otherwise, leaving the others
// alone.
func TestGrowInFairShare(t *testing.T) {
	const base = 16 << 10
	w := bareWorker(t, Config{Log: io.Discard, ReadBufferSize: base, MemoryBudget: 1 << 20})
	newConn := func() (*conn, int) {
		t.Helper()
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(pair[1]) })
		c := w.addConn(pair[0], true)
		if c == nil {
			t.Fatal("addConn failed")
		}
		c.in = append(c.in, make([]byte, base)...) // full, as awaitBody asks
		return c, pair[1]
	}
	peerRead := func(fd int) string {
		buf := make([]byte, 4096)
		n, _ := unix.Read(fd, buf)
		return string(buf[:max(n, 0)])
	}

	// Two holders, of 512 KiB + base and 480 KiB + base: extra is 992 KiB
	// of the 1 MiB.
	big, bigPeer := newConn()
	big2, big2Peer := newConn()
	if !w.growIn(big, 512<<10+base) || !w.growIn(big2, 480<<10+base) {
		t.Fatal("growing within the budget refused")
	}

	// 64 KiB would take extra to 1040 KiB: the largest holder (528 KiB)
	// is over 4 × 64 KiB, so it yields.
	small, _ := newConn()
	if !w.growIn(small, 64<<10) {
		t.Fatal("a 64 KiB buffer refused while a holder of 528 KiB could yield")
	}
	if cap(small.in) != 64<<10 || len(small.in) != base {
		t.Errorf("grown buffer cap %d len %d, want %d holding the %d bytes", cap(small.in), len(small.in), 64<<10, base)
	}
	evicted, kept := big, big2 // the largest holder yields, not just any
	if evicted.in != nil || !evicted.closeAfter || evicted.state != stateLinger {
		t.Errorf("the yielding connection: in cap %d, closeAfter %v, state %v; want no buffer, closing", cap(evicted.in), evicted.closeAfter, evicted.state)
	}
	if got := peerRead(bigPeer); !strings.HasPrefix(got, "HTTP/1.1 503 ") {
		t.Errorf("the yielding connection's client read %q, want a 503", got)
	}
	if cap(kept.in) != 480<<10+base || kept.closeAfter {
		t.Errorf("the other holder: cap %d, closeAfter %v; want left alone", cap(kept.in), kept.closeAfter)
	}
	checkBudget(t, "after the eviction", &w.bud, w.bud.held, 480<<10+(64<<10-base))

	// A third holder takes extra to 1008 KiB. Then 200 KiB would take it
	// past the limit, but the largest holders (496 KiB) are not over
	// 4 × 200 KiB (though over 1 ×): the asker is refused and nobody
	// yields.
	big3, _ := newConn()
	if !w.growIn(big3, 480<<10+base) {
		t.Fatal("growing within the budget refused")
	}
	third, _ := newConn()
	if w.growIn(third, 200<<10) {
		t.Error("a 200 KiB buffer granted past the budget, or by evicting a holder under 4 times its size")
	}
	if cap(big3.in) != 480<<10+base || big3.closeAfter || cap(kept.in) != 480<<10+base || kept.closeAfter || cap(small.in) != 64<<10 || small.closeAfter {
		t.Errorf("a refused request made another connection yield: holder cap %d closing %v, small cap %d closing %v",
			cap(kept.in), kept.closeAfter, cap(small.in), small.closeAfter)
	}
	if got := peerRead(big2Peer); got != "" {
		t.Errorf("the holder left alone was sent %q", got)
	}
	if cap(third.in) != base {
		t.Errorf("the refused connection's buffer: cap %d, want its own %d", cap(third.in), base)
	}
	checkBudget(t, "after the refusal", &w.bud, w.bud.held, 2*480<<10+(64<<10-base))

	// Every buffer given back: extra returns to 0, held to the spare
	// input buffers the free list keeps.
	for _, c := range []*conn{big, big2, big3, small, third} {
		w.closeConn(c)
	}
	checkBudget(t, "all closed", &w.bud, int64(len(w.bud.free))*base, 0)
}

// bareWorker is a worker of a server with cfg, on a loopback listener,
// not running: the test calls its methods itself.
func bareWorker(t *testing.T, cfg Config) *worker {
	t.Helper()
	s := New(cfg)
	fds, _, err := reuseport.Listen([]int{0}, reuseport.Options{Addr: netip.MustParseAddr("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	w, err := newWorker(s, 0, 0, fds[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.closeFDs()
		unix.Close(w.evfd)
	})
	w.tick()
	return w
}
