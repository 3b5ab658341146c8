package mgmt

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkWorkloadP99UnderFlood measures what a flood of the management
// port costs the workload: the p99 latency of sequential keep-alive GET
// /json requests to the default workload (server/cmd/hotpath-json, its own
// process, on every CPU) while idle, and while 64 clients flood the
// endpoint (its own process, DefaultLimits), in 7 interleaved rounds. It
// reports the medians of both and their ratio (the target: within
// 1.2x). A benchmark rather than a test:
// on a shared 2-CPU machine the p99 of either phase moves with the other
// users' load more than 20%. Run:
//
//	go test -run '^$' -bench WorkloadP99 -benchtime 1x ./init/mgmt
func BenchmarkWorkloadP99UnderFlood(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "hotpath-json")
	build := exec.Command("go", "build", "-o", bin, "github.com/hotpath-dev/hotpath/server/cmd/hotpath-json")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build the workload: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	wl := exec.Command(bin)
	wl.Env = append(os.Environ(), fmt.Sprintf("HOTPATH_PORT=%d", port))
	out, err := wl.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	wl.Stderr = wl.Stdout
	if err := wl.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { wl.Process.Signal(os.Interrupt); wl.Wait() }()
	sc := bufio.NewScanner(out)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "hotpath: ready:") {
	}
	if sc.Err() != nil || !strings.HasPrefix(sc.Text(), "hotpath: ready:") {
		b.Fatalf("the workload did not get ready: %q %v", sc.Text(), sc.Err())
	}
	go io.Copy(io.Discard, out)
	waddr := fmt.Sprintf("127.0.0.1:%d", port)
	ch := startChild(b)

	// Rounds of idle and flood phases, interleaved so that the other
	// users of the machine weigh on both alike; the medians of the
	// rounds' p99s are compared.
	const rounds, n = 7, 5000
	for i := 0; i < b.N; i++ {
		var idle, during []time.Duration
		var served atomic.Int64
		for range rounds {
			idle = append(idle, p99(b, waddr, n))
			quit, done := make(chan struct{}), make(chan struct{})
			go func() { flood(ch.addr, 64, time.Minute, &served, quit); close(done) }()
			time.Sleep(200 * time.Millisecond) // the flood under way
			during = append(during, p99(b, waddr, n))
			close(quit)
			<-done
		}
		mi, md := median(idle), median(during)
		b.Logf("p99 idle %v, during the flood %v", idle, during)
		b.ReportMetric(float64(mi.Microseconds()), "p99-idle-µs")
		b.ReportMetric(float64(md.Microseconds()), "p99-flood-µs")
		b.ReportMetric(float64(md)/float64(mi), "p99-ratio")
		b.ReportMetric(float64(served.Load()), "flood-responses")
	}
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}

// p99 sends n sequential GET /json on one keep-alive connection and
// returns the 99th percentile latency.
func p99(b *testing.B, addr string, n int) time.Duration {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	req := []byte("GET /json HTTP/1.1\r\nHost: x\r\n\r\n")
	lat := make([]time.Duration, n)
	for i := range lat {
		t0 := time.Now()
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		lat[i] = time.Since(t0)
	}
	slices.Sort(lat)
	return lat[n*99/100]
}
