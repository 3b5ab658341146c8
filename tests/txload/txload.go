// Package txload is a load that fills a server's transmit path: many
// connections, each sending a burst of pipelined requests for a large
// answer in one write and reading every answer before the next burst.
// bench-vm's step-8 comparison and the e2e check of the default qdisc
// (tests/e2e) drive it against the appliance.
//
// It is not wrk because wrk's latency percentiles are wrong with a
// pipelining script (wrk 4.2: with 8 requests a batch, 75%, 90% and 99%
// read 0.00us while the median is twice the mean); here a batch's latency
// is from its write to its last answer, and every batch is kept.
package txload

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Load is Conns connections at once, each sending Depth pipelined GET
// Path in one write and reading the Depth answers, again and again for
// Duration.
type Load struct {
	Conns, Depth int
	Path         string
	BodyLen      int // each answer's body length, checked when positive
	Duration     time.Duration
}

// Dial opens one connection to the server.
type Dial func(ctx context.Context) (net.Conn, error)

// Result is what a run did.
type Result struct {
	Answers int             // answers read whole, each 200 with BodyLen bytes
	Batches []time.Duration // every completed batch's latency, sorted
	Errors  []error         // each connection's first error
}

// Percentile returns the p-th percentile (0 < p <= 100) of the batch
// latencies by the nearest-rank method; 0 without batches.
func (r Result) Percentile(p float64) time.Duration {
	if len(r.Batches) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(r.Batches))+0.5) - 1
	return r.Batches[min(max(rank, 0), len(r.Batches)-1)]
}

// Run drives the load over dial until Duration has passed or ctx ends.
func (l Load) Run(ctx context.Context, dial Dial) Result {
	ctx, cancel := context.WithTimeout(ctx, l.Duration)
	defer cancel()
	req := strings.Repeat("GET "+l.Path+" HTTP/1.1\r\nHost: guest\r\n\r\n", l.Depth)
	var (
		mu  sync.Mutex
		res Result
		wg  sync.WaitGroup
	)
	for i := 0; i < l.Conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, lat, err := l.conn(ctx, dial, req)
			mu.Lock()
			defer mu.Unlock()
			res.Answers += n
			res.Batches = append(res.Batches, lat...)
			if err != nil {
				res.Errors = append(res.Errors, err)
			}
		}()
	}
	wg.Wait()
	slices.Sort(res.Batches)
	return res
}

func (l Load) conn(ctx context.Context, dial Dial, req string) (int, []time.Duration, error) {
	c, err := dial(ctx)
	if err != nil {
		return 0, nil, ignoreEnd(ctx, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	r := bufio.NewReaderSize(c, 64<<10)
	n := 0
	var lat []time.Duration
	for ctx.Err() == nil {
		start := time.Now()
		if _, err := io.WriteString(c, req); err != nil {
			return n, lat, ignoreEnd(ctx, err)
		}
		for i := 0; i < l.Depth; i++ {
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				return n, lat, ignoreEnd(ctx, err)
			}
			m, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil {
				return n, lat, ignoreEnd(ctx, err)
			}
			if resp.StatusCode != 200 || (l.BodyLen > 0 && m != int64(l.BodyLen)) {
				return n, lat, fmt.Errorf("GET %s: %d with %d bytes, want 200 with %d", l.Path, resp.StatusCode, m, l.BodyLen)
			}
			n++
		}
		lat = append(lat, time.Since(start))
	}
	return n, lat, nil
}

// ignoreEnd drops the error of a connection cut by the load's own end.
func ignoreEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
