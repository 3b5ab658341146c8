// Command openloop offers requests at a fixed rate whatever the server's
// latency (an open loop: no coordinated omission), and reports the
// latency of the "other" requests from the time each was due to be sent.
// Every -every'th request goes to -deferred instead (0: none): the bench's
// api-defer row runs it twice at the same rate, with and without that
// deferred traffic, and compares the others' p99.
//
// Each class of request has its own pool of kept-alive connections (a
// request waits for a free one, which counts in its latency, as it would
// for a client with a bounded pool); its answer must be 200.
//
// Output, one line: others=N p50_ms=X p90_ms=X p99_ms=X max_ms=X
// start_p50_ms=X start_p99_ms=X deferred=N deferred_p50_ms=X errors=N.
// The start_ figures are from the time the request's goroutine ran (its
// wait for a connection included), without the lateness of the client's
// own timer (Go's sleeps wake up to a millisecond late, more when the
// client's CPU is busy).
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "server address")
	path := flag.String("path", "/v1/items/42", "the other requests' path")
	deferred := flag.String("deferred", "/v1/proxy/7", "the deferred requests' path")
	every := flag.Int("every", 0, "every N'th request goes to -deferred (10: 10%; 0: none)")
	rate := flag.Int("rate", 1000, "requests per second offered, all classes")
	dur := flag.Duration("d", 5*time.Second, "how long to offer them")
	conns := flag.Int("c", 64, "connections for the other requests")
	dconns := flag.Int("dc", 64, "connections for the deferred requests")
	flag.Parse()

	now, err := dialPool(*addr, *conns)
	if err != nil {
		log.Fatal(err)
	}
	var back chan *bufio.ReadWriter
	if *every > 0 {
		if back, err = dialPool(*addr, *dconns); err != nil {
			log.Fatal(err)
		}
	}
	var (
		mu        sync.Mutex
		lat, dlat []time.Duration
		slat      []time.Duration // the others' from their goroutine's start
		nerr      int
		wg        sync.WaitGroup
	)
	total := int(dur.Seconds() * float64(*rate))
	start := time.Now()
	for i := range total {
		at := start.Add(time.Duration(i) * time.Second / time.Duration(*rate))
		time.Sleep(time.Until(at))
		p, pool, isDef := *path, now, false
		if *every > 0 && i%*every == *every/2 {
			p, pool, isDef = *deferred, back, true
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			rw := <-pool
			err := get(rw, p)
			d, ds := time.Since(at), time.Since(t0)
			pool <- rw
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				nerr++
				if nerr <= 3 {
					fmt.Fprintf(os.Stderr, "openloop: %s: %v\n", p, err)
				}
			case isDef:
				dlat = append(dlat, d)
			default:
				lat = append(lat, d)
				slat = append(slat, ds)
			}
		}()
	}
	wg.Wait()
	q := func(l []time.Duration, f float64) float64 {
		if len(l) == 0 {
			return 0
		}
		return float64(l[min(len(l)-1, int(float64(len(l))*f))]) / 1e6
	}
	slices.Sort(lat)
	slices.Sort(dlat)
	slices.Sort(slat)
	fmt.Printf("others=%d p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f start_p50_ms=%.3f start_p99_ms=%.3f deferred=%d deferred_p50_ms=%.3f errors=%d\n",
		len(lat), q(lat, 0.5), q(lat, 0.9), q(lat, 0.99), q(lat, 1), q(slat, 0.5), q(slat, 0.99), len(dlat), q(dlat, 0.5), nerr)
}

// dialPool opens n kept-alive connections to addr.
func dialPool(addr string, n int) (chan *bufio.ReadWriter, error) {
	ch := make(chan *bufio.ReadWriter, n)
	for range n {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, err
		}
		ch <- bufio.NewReadWriter(bufio.NewReader(nc), bufio.NewWriter(nc))
	}
	return ch, nil
}

// get sends GET path on rw and reads its answer, which must be a 200.
func get(rw *bufio.ReadWriter, path string) error {
	fmt.Fprintf(rw, "GET %s HTTP/1.1\r\nHost: bench\r\n\r\n", path)
	if err := rw.Flush(); err != nil {
		return err
	}
	line, err := rw.ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "HTTP/1.1 200 ") {
		return fmt.Errorf("status line %q", strings.TrimSpace(line))
	}
	n := -1
	for {
		h, err := rw.ReadString('\n')
		if err != nil {
			return err
		}
		if h == "\r\n" {
			break
		}
		if v, ok := strings.CutPrefix(strings.ToLower(h), "content-length:"); ok {
			n, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if n < 0 {
		return errors.New("no Content-Length")
	}
	_, err = io.CopyN(io.Discard, rw, int64(n))
	return err
}
