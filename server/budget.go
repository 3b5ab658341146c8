package server

// maxFreeIn bounds the default-size input buffers a budget keeps for new
// connections (4 MiB at the default 16 KiB).
const maxFreeIn = 256

// budget accounts for the connection buffers of one worker: every input
// buffer and pending-output buffer a connection holds is obtained from it
// and given back to it, so that its two figures are exact.
//
// Invariant: held is the total capacity of the buffers it handed out and
// has not taken back, plus those in its free list; extra is the part of
// held beyond each connection's own base-size input buffer (the growth of
// input buffers past base, and all pending output); and a request for
// more (grow) is refused when it would take extra past limit. Pending
// output is never refused (a response already built must be kept), so
// extra can exceed limit by what respond produced after the budget was
// spent: one turn of one request per connection (see respond).
//
// A budget belongs to one worker and is used by its thread only.
type budget struct {
	base  int   // Config.ReadBufferSize: each connection's own input buffer
	limit int64 // Config.MemoryBudget

	held, extra int64
	free        [][]byte // empty base-size input buffers for reuse
	used        bool     // getIn was called since the last dropUnused
}

func newBudget(cfg *Config) budget {
	return budget{base: cfg.ReadBufferSize, limit: cfg.MemoryBudget}
}

// beyond is the part of an n-byte input buffer that counts against limit.
func (b *budget) beyond(n int) int64 { return int64(max(n-b.base, 0)) }

// spent reports whether extra has reached limit.
func (b *budget) spent() bool { return b.extra >= b.limit }

// getIn returns an empty base-size input buffer.
func (b *budget) getIn() []byte {
	b.used = true
	if k := len(b.free); k > 0 {
		p := b.free[k-1]
		b.free = b.free[:k-1]
		return p
	}
	b.held += int64(b.base)
	return make([]byte, 0, b.base)
}

// putIn takes back an input buffer (nil is ignored): a base-size one into
// the free list while it has room, anything else to the garbage
// collector. It reports whether p was a grown buffer, whose array the
// caller must make sure nothing else keeps alive.
func (b *budget) putIn(p []byte) (grown bool) {
	if p == nil {
		return false
	}
	if cap(p) == b.base && len(b.free) < maxFreeIn {
		b.free = append(b.free, p[:0])
		return false
	}
	b.held -= int64(cap(p))
	b.extra -= b.beyond(cap(p))
	return cap(p) > b.base
}

// grow returns a buffer of capacity size holding a copy of in, if limit
// allows the difference from in's capacity, and false otherwise. in stays
// the caller's, to give back with putIn once it is replaced.
func (b *budget) grow(in []byte, size int) ([]byte, bool) {
	if b.extra+b.beyond(size)-b.beyond(cap(in)) > b.limit {
		return nil, false
	}
	grown := make([]byte, len(in), size)
	copy(grown, in)
	b.held += int64(size)
	b.extra += b.beyond(size)
	return grown, true
}

// setPending returns cur holding a copy of out, reallocated when too small.
func (b *budget) setPending(cur, out []byte) []byte {
	if cap(cur) < len(out) {
		cur = b.replacePending(cur, make([]byte, 0, len(out)))
	}
	return append(cur[:0], out...)
}

// replacePending accounts for a pending-output buffer cur replaced by nb
// (nil to drop it) and returns nb.
func (b *budget) replacePending(cur, nb []byte) []byte {
	d := int64(cap(nb) - cap(cur))
	b.held += d
	b.extra += d
	return nb
}

// dropUnused gives the free list back (dropFree) when no input buffer
// was asked for since the last call: spare buffers nobody needed for a
// whole timeout pass are memory held for nothing.
func (b *budget) dropUnused() {
	if !b.used {
		b.dropFree()
	}
	b.used = false
}

// dropFree gives the free list's buffers to the garbage collector.
func (b *budget) dropFree() {
	for _, p := range b.free {
		b.held -= int64(cap(p))
	}
	clear(b.free)
	b.free = b.free[:0]
}
