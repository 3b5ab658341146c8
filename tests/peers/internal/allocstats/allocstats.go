// Package allocstats reports a peer server's heap allocations per request
// for tests/bench: SIGUSR1 marks the start of the measured run (after the
// warm-up), SIGTERM prints the figures since then and exits 0:
//
//	stats requests=N mallocs=M allocs_per_request=X
package allocstats

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sync/atomic"
	"syscall"
)

// Requests is incremented by the peer's handlers, once a request.
var Requests atomic.Uint64

// Handle installs the signal handlers. It returns at once.
func Handle(name string) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		mallocs, reqs := ms.Mallocs, Requests.Load()
		for sig := range ch {
			runtime.ReadMemStats(&ms)
			if sig == syscall.SIGUSR1 {
				mallocs, reqs = ms.Mallocs, Requests.Load()
				continue
			}
			n := Requests.Load() - reqs
			per := 0.0
			if n > 0 {
				per = float64(ms.Mallocs-mallocs) / float64(n)
			}
			fmt.Fprintf(os.Stderr, "%s: stats requests=%d mallocs=%d allocs_per_request=%.6f\n", name, n, ms.Mallocs-mallocs, per)
			os.Exit(0)
		}
	}()
}
