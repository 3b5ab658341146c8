package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/server"
)

// rss returns the process's resident set size from /proc/self/status.
func rss(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// memoryBound is the documented bound of Config.MemoryBudget for one
// worker with conns connections whose largest response is resp bytes.
func memoryBound(cfg server.Config, conns int, resp int64) int64 {
	r := int64(cfg.ReadBufferSize)
	return int64(conns)*(r+resp) + cfg.MemoryBudget + int64(cfg.MaxOutputPerTurn) + resp + 256*r + 150<<10
}

// TestHostileMemory runs the attack that used to take a worker to 683 MB
// with 200 connections: each sends a 1 MiB body (which grows its input
// buffer), then pipelines small requests ~1 MiB at a time and never reads
// a response. The worker's accounted memory must stay under the documented
// bound throughout, the process's RSS under its idle size plus the bound
// times the garbage collector's factor, and both must come back to idle
// once the connections are gone.
func TestHostileMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("200 connections pushing 1 MiB each")
	}
	if raceEnabled {
		t.Skip("RSS under the race detector includes its shadow memory")
	}
	s, addr := start(t, nil)
	cfg := server.DefaultConfig()
	const conns = 200
	const resp = 512 // the 405 and /json responses are under this
	bound := memoryBound(cfg, conns, resp)
	// Garbage waits for the next collection, which comes once the heap
	// has grown by GOGC percent.
	gcFactor := int64(2)
	if v := debug.SetGCPercent(-1); v >= 0 {
		debug.SetGCPercent(v)
		gcFactor = 1 + int64(v)/100
	}

	body := bytes.Repeat([]byte("x"), 1<<20)
	head := []byte(fmt.Sprintf("POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(body)))
	small := bytes.Repeat([]byte("GET /json HTTP/1.1\r\nHost: x\r\n\r\n"), (1<<20)/32)
	runtime.GC()
	debug.FreeOSMemory()
	time.Sleep(100 * time.Millisecond)
	idleRSS, idleMem, headroom := rss(t), s.MemoryInUse(), heapHeadroom()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	t.Logf("idle: RSS %d KiB, heap headroom %d KiB, worker buffers %d KiB; bound %d KiB", idleRSS>>10, headroom>>10, idleMem>>10, bound>>10)

	var (
		wg      sync.WaitGroup
		stop    = make(chan struct{})
		written atomic.Int64
		clients = make([]net.Conn, 0, conns)
	)
	for range conns {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		wg.Go(func() {
			c.SetWriteDeadline(time.Now().Add(3 * time.Second))
			for _, b := range [][]byte{head, body} {
				n, err := c.Write(b)
				written.Add(int64(n))
				if err != nil {
					return // refused (503 for the body) or blocked
				}
			}
			for {
				n, err := c.Write(small)
				written.Add(int64(n))
				if err != nil {
					return // blocked: the worker stopped reading, as it should
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		})
	}
	// Sample while the attack runs.
	var maxRSS, maxMem int64
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		maxRSS = max(maxRSS, rss(t))
		maxMem = max(maxMem, s.MemoryInUse())
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("attack: %d MiB written, %d requests answered; peak RSS %d KiB (+%d), peak worker buffers %d KiB",
		written.Load()>>20, s.Requests(), maxRSS>>10, (maxRSS-idleRSS)>>10, maxMem>>10)
	if maxMem > bound {
		t.Errorf("worker buffers peaked at %d KiB, over the documented bound %d KiB", maxMem>>10, bound>>10)
	}
	// slack is what the runtime may hold beyond that without anything
	// being wrong: pages freed but not yet returned, and the heap a
	// collection slowed by a loaded machine lets grow past its goal
	// (seen: 171 MB against a 166 MB limit, once, at load average 10).
	// A leak per connection of the attack's size, 1 MiB times 200, is
	// 25 times larger.
	const slack = 8 << 20
	if limit := idleRSS + gcFactor*bound + slack; maxRSS > limit {
		t.Errorf("RSS peaked at %d KiB, over idle + %d × bound + %d KiB = %d KiB", maxRSS>>10, gcFactor, slack>>10, limit>>10)
	}
	if s.Requests() < 1000 {
		t.Errorf("only %d requests answered: the attack did not get through", s.Requests())
	}

	for _, c := range clients {
		c.Close()
	}
	// Back to idle: the worker drops its buffers at once (spare input
	// buffers at the next timeout scan), and releaseMemory hands the
	// freed memory back within a second or two. RSS may stay over its idle
	// figure by the heap's headroom at idle (garbage the collector lets
	// grow before its next cycle: this test's own clients make some after
	// the server's last release) and the slack; it failed once with a
	// fixed 8 MiB, 9 MiB over idle with 5 MiB more heap in use, all of it
	// the test's. Without releaseMemory RSS stayed 55 MiB over (68,928
	// KiB against 12,460 idle).
	backTo := idleRSS + headroom + slack
	var nowRSS, nowMem int64
	for range 100 {
		time.Sleep(100 * time.Millisecond)
		nowRSS, nowMem = rss(t), s.MemoryInUse()
		if nowRSS <= backTo && nowMem <= idleMem {
			break
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("runtime before/after: heap in use %d/%d KiB, stacks %d/%d KiB, span+GC+other metadata %d/%d KiB",
		ms0.HeapInuse>>10, ms.HeapInuse>>10, ms0.StackInuse>>10, ms.StackInuse>>10,
		(ms0.MSpanSys+ms0.GCSys+ms0.OtherSys+ms0.MCacheSys+ms0.BuckHashSys)>>10, (ms.MSpanSys+ms.GCSys+ms.OtherSys+ms.MCacheSys+ms.BuckHashSys)>>10)
	t.Logf("after close: RSS %d KiB (idle %d), worker buffers %d KiB (idle %d)", nowRSS>>10, idleRSS>>10, nowMem>>10, idleMem>>10)
	if nowRSS > backTo || nowMem > idleMem {
		t.Errorf("10 s after the connections closed: RSS %d KiB (allowed: idle %d + heap headroom %d + slack %d), worker buffers %d KiB (idle %d)",
			nowRSS>>10, idleRSS>>10, headroom>>10, slack>>10, nowMem>>10, idleMem>>10)
	}
	// And the worker still serves.
	c, r := dial(t, addr)
	c.Write([]byte("GET /json HTTP/1.1\r\nHost: x\r\n\r\n"))
	if codes, _, _ := readResponses(t, r, 1); codes[0] != 200 {
		t.Errorf("after the attack: %d", codes[0])
	}
}

// TestFairService checks that one connection's deep pipeline cannot make
// the others of its worker wait for all of it. The hog first sends a 1 MiB
// body (which used to leave it a 1 MiB input buffer, so that one read took
// in ~30,000 pipelined requests and served them all in one turn), then
// blocks the worker for 200 ms and meanwhile queues 1 MB of pipelined
// requests in the server's socket; a bystander sends one request during
// the block. Every /stamp response carries how many /stamp requests were
// served before it, so the bystander's stamp counts the hog's requests
// served ahead of it: a few turns of MaxRequestsPerTurn (the hog gets up
// to two per loop iteration, its event's and its queued one, and the
// bystander's connection needs an iteration to be accepted and one more
// to be read), not the whole pipeline.
// Its latency after the block is reported, not asserted.
func TestFairService(t *testing.T) {
	_, addr := start(t, func(c *server.Config) { c.RecvBuf = 4 << 20 })
	hog, hogR := dial(t, addr)
	body := bytes.Repeat([]byte("x"), 1<<20)
	fmt.Fprintf(hog, "POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(body))
	hog.Write(body)
	if codes, _, _ := readResponses(t, hogR, 1); codes[0] != 405 {
		t.Fatalf("POST /json: %d", codes[0])
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { io.Copy(io.Discard, hogR) })
	const block = 200 * time.Millisecond
	blocked := time.Now()
	hog.Write([]byte("GET /sleep?" + block.String() + " HTTP/1.1\r\nHost: x\r\n\r\n"))
	pipeline := bytes.Repeat([]byte("GET /stamp HTTP/1.1\r\nHost: x\r\n\r\n"), 1<<15)
	if _, err := hog.Write(pipeline); err != nil {
		t.Fatal(err)
	}
	c, r := dial(t, addr)
	c.Write([]byte("GET /stamp HTTP/1.1\r\nHost: x\r\n\r\n"))
	if time.Since(blocked) > block {
		t.Skip("the machine is too slow to queue the pipeline within the block")
	}
	_, bodies, _ := readResponses(t, r, 1)
	wait := time.Since(blocked) - block
	ahead, err := strconv.ParseInt(bodies[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	ahead-- // its own
	t.Logf("bystander served after %d of the hog's %d queued requests, %v after the block", ahead, 1<<15, wait)
	if limit := int64(8 * server.DefaultConfig().MaxRequestsPerTurn); ahead > limit {
		t.Errorf("%d of the hog's requests served before the bystander's, want at most %d", ahead, limit)
	}
	hog.Close()
}

// TestTrickledChunkedLinear trickles a 4 MiB chunked body in 64-byte
// chunks, 1120 bytes per write, and waits after each write until the
// worker has answered a probe on another connection, so that it reads
// every piece on its own. It compares the worker thread's CPU time with
// that of the same bytes trickled the same way as a Content-Length body,
// which costs only the reads.
//
// Nearly all of the worker's time here is the kernel's (a wake-up, a read
// and a probe per piece), whose cost per piece varied 4x or more from one
// trickle to the next on this VM; the twin has the same noise. The
// collector is off while measuring (each trickle starts from an explicit
// one), as the chunked body's buffer doublings would otherwise bring a
// collection that the Content-Length body does not. Measured so: 0.93–2.90
// as the worker is, 25.2 with the worker re-parsing from the first byte at
// every read (http1.Parse in place of ParseResume: the bug this guards
// against, whose cost grows with the square of the body, hence 4 MiB).
// TestParseResumeLinear in http1 compares two body sizes for the decoder
// alone, without system calls.
func TestTrickledChunkedLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("trickles 44 MiB in 1 KiB pieces")
	}
	_, addr := start(t, func(c *server.Config) { c.MaxBodyBytes = 8 << 20 })
	probe, probeR := dial(t, addr)
	probe.SetDeadline(time.Now().Add(120 * time.Second))
	cputime := func() time.Duration {
		t.Helper()
		probe.Write([]byte("GET /cputime HTTP/1.1\r\nHost: x\r\n\r\n"))
		_, bodies, _ := readResponses(t, probeR, 1)
		n, err := strconv.ParseInt(bodies[0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return time.Duration(n)
	}
	const chunkData, pieces = 64, 4096
	chunked := bytes.Repeat(append([]byte(fmt.Sprintf("%x\r\n", chunkData)), append(bytes.Repeat([]byte("c"), chunkData), "\r\n"...)...), 1024/chunkData)
	plain := bytes.Repeat([]byte("c"), len(chunked))
	trickle := func(head string, piece []byte, end string) time.Duration {
		c, r := dial(t, addr)
		c.SetDeadline(time.Now().Add(120 * time.Second))
		before := cputime()
		c.Write([]byte(head))
		for range pieces {
			if _, err := c.Write(piece); err != nil {
				t.Fatal(err)
			}
			cputime() // the worker has read the piece
		}
		c.Write([]byte(end))
		if codes, bodies, _ := readResponses(t, r, 1); codes[0] != 200 || bodies[0] != "POST" {
			t.Fatalf("POST %q: %d %q", head, codes[0], bodies[0])
		}
		return cputime() - before
	}
	// The best of five of each, each after a collection, the two taken in
	// turn: a change of load meanwhile falls on both.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	a, b := time.Duration(1<<62), time.Duration(1<<62)
	for range 5 {
		runtime.GC()
		a = min(a, trickle("POST /any HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", chunked, "0\r\n\r\n"))
		runtime.GC()
		b = min(b, trickle(fmt.Sprintf("POST /any HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", pieces*len(plain)), plain, ""))
	}
	ratio := float64(a) / float64(b)
	t.Logf("worker CPU for %d KiB in %d pieces: %v chunked, %v with Content-Length: ratio %.2f", pieces*len(plain)>>10, pieces, a, b, ratio)
	if ratio > 10 {
		t.Errorf("the chunked body cost %.1fx the CPU of the same bytes with Content-Length: decoding is not linear", ratio)
	}
}
