package mgmt

import (
	"context"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// guard is the listener the endpoint serves from, and the connection
// bookkeeping behind it. It exists because netutil.LimitListener is not
// enough: that one stops calling accept(2) when its limit is reached, so
// every further connection (the load balancer's health check among them)
// waits in the kernel's accept queue behind whatever holds the slots;
// 16 slowloris clients or 4,000 idle connections were enough to fail
// every health check. The guard instead accepts every connection at once
// and decides on the spot ("address" is the IPv4 address, or the IPv6
// /64, which one host holds whole):
//
//   - an address with MaxConnsPerAddr connections gets no more: the new one
//     is held unread for about HoldRejected and then reset (a tarpit: a
//     client that reconnects at once when refused would otherwise cost an
//     accept and a close per attempt, at its speed rather than ours);
//   - with MaxConns connections open, the new one replaces a connection
//     that has no request in progress (one still sending its header, a
//     slowloris, or one idle between requests) from an address holding
//     more than the newcomer's would, or older than MinEvictAge
//     (victimLocked); if there is none, the new one is held as above;
//   - every request first takes a token from its address's bucket
//     (RequestsPerAddr, BurstPerAddr), waiting for it without CPU, so the
//     requests served per second are bounded by the number of addresses
//     connected, not by how fast the clients send. The bucket outlives
//     the address's connections until it is full again, so reconnecting
//     buys no fresh burst.
//
// A health checker from an address of its own therefore always gets a
// slot (at worst by evicting an attacker's silent or idle connection) and
// a token (its own bucket) at once. What the guard cannot do is tell a
// health check from an attacker's request sharing the same address, or
// win against more than MaxConns/MaxConnsPerAddr addresses that all keep a
// handler busy at once; README.md ("What listens where") says to restrict
// the port with mgmt.addr and the network's own filters for that.
type guard struct {
	net.Listener
	lim   Limits
	stats *Stats // lim.Stats, or one of its own

	mu    sync.Mutex
	conns []*trackedConn            // open connections, oldest first; guarded by mu
	addrs map[netip.Addr]*addrState // per remote address (clientKey); guarded by mu
	held  int                       // refused connections being held; guarded by mu
	swept time.Time                 // last sweep of addrs; guarded by mu
}

// maxAddrs bounds the addresses remembered without a connection (for
// their request buckets): past it all of those are forgotten, so an
// attacker with more addresses than this gets fresh buckets.
const maxAddrs = 1 << 16

// addrState is what one remote address holds. It outlives the address's
// last connection until its bucket is full again (a fresh one would be
// full too): else a client could close and reconnect for a fresh burst.
type addrState struct {
	conns   int           // open connections, guarded by guard.mu
	limiter *rate.Limiter // its request bucket (safe for concurrent use)
}

// trackedConn is a connection the guard admitted.
type trackedConn struct {
	net.Conn
	g    *guard
	addr netip.Addr
	a    *addrState

	// state is the last http.ConnState the server reported; released
	// is set once the connection left the guard's books. Both guarded by
	// g.mu.
	state    http.ConnState
	released bool
	since    time.Time // accepted
}

func newGuard(ln net.Listener, l Limits) *guard {
	g := &guard{Listener: ln, lim: l, stats: l.Stats, addrs: map[netip.Addr]*addrState{}}
	if g.stats == nil {
		g.stats = &Stats{}
	}
	return g
}

// Accept returns the next connection the limits admit; refused ones are
// held and closed behind the caller's back.
func (g *guard) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc := g.admit(c); tc != nil {
			return tc, nil
		}
	}
}

// admit applies the connection limits to c: it returns the tracked
// connection, or nil when c was refused.
func (g *guard) admit(c net.Conn) *trackedConn {
	addr := clientKey(c)
	g.mu.Lock()
	g.sweepLocked(time.Now())
	a := g.addrs[addr]
	if a != nil && a.conns >= g.lim.MaxConnsPerAddr {
		g.mu.Unlock()
		g.refuse(c)
		return nil
	}
	var victim *trackedConn
	if len(g.conns) >= g.lim.MaxConns {
		victim = g.victimLocked(a, time.Now())
		if victim == nil {
			g.mu.Unlock()
			g.refuse(c)
			return nil
		}
		g.releaseLocked(victim)
		g.stats.Evicted.Add(1)
	}
	if a == nil {
		r, b := rate.Limit(g.lim.RequestsPerAddr), max(g.lim.BurstPerAddr, 1)
		if r <= 0 {
			r = rate.Inf
		}
		a = &addrState{limiter: rate.NewLimiter(r, b)}
		g.addrs[addr] = a
	}
	a.conns++
	tc := &trackedConn{Conn: c, g: g, addr: addr, a: a, state: http.StateNew, since: time.Now()}
	g.conns = append(g.conns, tc)
	g.mu.Unlock()
	g.stats.Accepted.Add(1)
	g.stats.Open.Add(1)
	if victim != nil {
		// The server sees an error and lets it go. (Should the victim's
		// header have completed since the state was read, that one
		// request fails: a race the fair-share rule makes rare.)
		victim.Conn.Close()
	}
	return tc
}

// victimLocked returns the connection a newcomer from the address with
// state a (nil: none yet) may replace, or nil. Only a connection with no
// request in progress (still sending its header, or idle) is replaced,
// and only one that is either from an address holding more connections
// than the newcomer's would with it (so that after the swap the victim's
// address still holds at least as many), or older than MinEvictAge. Of
// those, the one whose address holds the most connections goes, the
// oldest first. The fair-share rule lets a health checker from an address
// of its own in whatever the attack holds; the age rule lets it in when
// an attack spreads over as many addresses as there are slots; and
// attackers with equal shares cannot evict each other in a loop (each
// eviction would be a reconnection, an accept and a close at the
// attacker's pace: a first version without the rule churned 15,000
// connections a second under 1,000 reconnecting slowloris clients and let
// health checks wait 300 ms in the accept queue).
func (g *guard) victimLocked(a *addrState, now time.Time) *trackedConn {
	mine := 1
	if a != nil {
		mine = a.conns + 1
	}
	var victim *trackedConn
	for _, o := range g.conns {
		if o.state != http.StateNew && o.state != http.StateIdle {
			continue
		}
		if o.a.conns <= mine && now.Sub(o.since) < g.lim.MinEvictAge {
			continue
		}
		if victim == nil || o.a.conns > victim.a.conns {
			victim = o
		}
	}
	return victim
}

// refuse holds c unread for about HoldRejected, then closes it with a reset;
// beyond MaxHeld held connections it is closed at once.
func (g *guard) refuse(c net.Conn) {
	g.stats.Refused.Add(1)
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0) // RST: no FIN_WAIT/TIME_WAIT state kept for it
	}
	g.mu.Lock()
	if g.held >= g.lim.MaxHeld || g.lim.HoldRejected <= 0 {
		g.mu.Unlock()
		c.Close()
		return
	}
	g.held++
	g.mu.Unlock()
	g.stats.Held.Add(1)
	// Jitter (0.5-1.5x) so that refused clients that came together (an
	// attack starts at once) are not reset together and come back as one
	// burst in the accept queue, in front of a health check.
	hold := g.lim.HoldRejected/2 + rand.N(g.lim.HoldRejected)
	time.AfterFunc(hold, func() {
		c.Close()
		g.mu.Lock()
		g.held--
		g.mu.Unlock()
		g.stats.Held.Add(-1)
	})
}

// releaseLocked takes tc off the books (once).
func (g *guard) releaseLocked(tc *trackedConn) {
	if tc.released {
		return
	}
	tc.released = true
	g.stats.Open.Add(-1)
	for i, o := range g.conns {
		if o == tc {
			g.conns = append(g.conns[:i], g.conns[i+1:]...)
			break
		}
	}
	tc.a.conns--
	if tc.a.conns == 0 && tc.a.full(time.Now()) {
		delete(g.addrs, tc.addr)
	}
}

// full reports whether the address's bucket is back to its burst.
func (a *addrState) full(now time.Time) bool {
	return a.limiter.Limit() == rate.Inf || a.limiter.TokensAt(now) >= float64(a.limiter.Burst())
}

// sweepLocked forgets, at most once a second, the addresses without a
// connection whose buckets are full again; past maxAddrs, every address
// without a connection.
func (g *guard) sweepLocked(now time.Time) {
	if now.Sub(g.swept) < time.Second && len(g.addrs) <= maxAddrs {
		return
	}
	g.swept = now
	over := len(g.addrs) > maxAddrs
	for k, a := range g.addrs {
		if a.conns == 0 && (a.full(now) || over) {
			delete(g.addrs, k)
		}
	}
}

// Close releases the connection's slot and closes it.
func (tc *trackedConn) Close() error {
	tc.g.mu.Lock()
	tc.g.releaseLocked(tc)
	tc.g.mu.Unlock()
	return tc.Conn.Close()
}

// connState is the server's ConnState hook: it keeps each connection's
// state, which decides what may be evicted.
func (g *guard) connState(c net.Conn, s http.ConnState) {
	tc, ok := c.(*trackedConn)
	if !ok {
		return
	}
	g.mu.Lock()
	tc.state = s
	if s == http.StateClosed || s == http.StateHijacked {
		g.releaseLocked(tc)
	}
	g.mu.Unlock()
}

// open returns the number of connections on the books.
func (g *guard) open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.conns)
}

// clientKey is the remote address the per-address limits count by: the
// IPv4 address, or the IPv6 /64 (one host is given a whole /64, so
// counting by address would give it 2^64 budgets).
func clientKey(c net.Conn) netip.Addr {
	ta, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	return keyOf(ta.AddrPort().Addr())
}

func keyOf(a netip.Addr) netip.Addr {
	a = a.Unmap() // Prefix drops an IPv6 zone
	if a.Is4() {
		return a
	}
	p, _ := a.Prefix(64)
	return p.Addr()
}

type connKey struct{}

// connContext puts the tracked connection in each request's context, for
// the rate limit.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*trackedConn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

// limitRequests makes every request wait for a token of its address's
// bucket; waiting costs no CPU (a timer), and the client gets its answer
// late rather than a refusal it would retry at once. The wait is bounded
// by MaxConnsPerAddr/RequestsPerAddr (each connection has at most one
// request in progress); a client that leaves ends it.
func limitRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tc, ok := r.Context().Value(connKey{}).(*trackedConn); ok {
			res := tc.a.limiter.Reserve() // burst >= 1: always possible
			if d := res.Delay(); d > 0 {
				tc.g.stats.Delayed.Add(1)
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-r.Context().Done():
					t.Stop()
					res.Cancel()
					w.Header().Set("Connection", "close")
					http.Error(w, "too many requests from your address", http.StatusTooManyRequests)
					return
				}
			}
		}
		h.ServeHTTP(w, r)
	})
}
