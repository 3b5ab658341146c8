package mgmt

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/metrics"
	"github.com/hotpath-dev/hotpath/init/report"
	"golang.org/x/sys/unix"
)

// childEnv makes the test binary the endpoint's own process (TestMain),
// so that its CPU time is the endpoint's alone, or (=checker) the health
// checker's, so that the checks do not queue behind the attacker's
// goroutines in the test's own Go scheduler (with the checker in the
// test process, a burst of 256 reconnecting attackers delayed checks by
// 100-770 ms on a machine at load 10-14).
const childEnv = "HOTPATH_MGMT_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "checker":
		runChecker(os.Getenv(childEnv + "_ADDR"))
	default:
		runChild()
	}
}

// runChecker checks /healthz at addr every 100 ms until stdin closes,
// printing one line per check: the nanoseconds it took, and its error.
func runChecker(addr string) {
	stop := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(stop) }()
	took, errs := healthChecks(addr, 100*time.Millisecond, stop)
	for i, d := range took {
		fmt.Printf("%d %s\n", d.Nanoseconds(), errs[i])
	}
}

// runChild serves the endpoint with DefaultLimits on a loopback port,
// prints the address, and exits when stdin closes (the test ended).
func runChild() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	ready := metrics.WorkloadFunc(func() metrics.WorkloadState {
		return metrics.WorkloadState{State: "ready", Running: true, Ready: true, PID: 2}
	})
	rep := &report.Report{Version: report.Version, Kernel: "6.12", Steps: []report.Step{{Name: "mounts", Status: report.Applied}}}
	h := Handler(Options{Workload: ready, Report: func() (any, bool) { return rep, true }})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { io.Copy(io.Discard, os.Stdin); cancel() }()
	fmt.Println(ln.Addr().String())
	Serve(ctx, ln, h, DefaultLimits, nil)
}

// child is the endpoint running in its own process.
type child struct {
	addr string
	pid  int
}

func startChild(t testing.TB) child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.HasPrefix(line, "ERROR") {
		t.Fatalf("child: %q %v", line, err)
	}
	return child{addr: strings.TrimSpace(line), pid: cmd.Process.Pid}
}

// cpu returns the child's user+system CPU time (/proc/<pid>/stat).
func (c child) cpu(t *testing.T) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name (which may hold spaces): state is 3,
	// utime 14, stime 15.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ, fixed at 100 for /proc on Linux
	return time.Duration(ut+st) * time.Second / hz
}

// dialFrom dials addr from the loopback source address src, so that an
// attack can come from many addresses (all of 127/8 is this host's).
func dialFrom(src, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 2 * time.Second}
	return d.Dial("tcp", addr)
}

// attacker returns the source address of attacker i when n attackers
// share addresses in groups of per (127.<b>.x.y, never 127.0.0.1, the
// health checker's).
func attacker(block, i, per int) string {
	a := i/per + 1
	return fmt.Sprintf("127.%d.%d.%d", block, a/250, a%250+1)
}

// healthChecks checks /healthz every interval from 127.0.0.1-10 on a fresh
// connection each time, as a load balancer does, until stop closes; it
// returns the time each check took and its error ("" when it passed).
func healthChecks(addr string, interval time.Duration, stop <-chan struct{}) (took []time.Duration, errs []string) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		// From 127.0.0.1-10 in turn, as from a load balancer's nodes:
		// each address checks once a second, within its bucket (2/s);
		// one address checking every 100 ms would wait for its tokens.
		src := fmt.Sprintf("127.0.0.%d", len(took)%10+1)
		start := time.Now()
		err := healthzFrom(src, addr)
		took = append(took, time.Since(start))
		e := ""
		if err != nil {
			e = strings.ReplaceAll(err.Error(), "\n", " ")
		}
		errs = append(errs, e)
	}
}

// checker runs healthChecks in a process of its own until the returned
// function is called, which returns the results.
func checker(t *testing.T, addr string) (results func() (took []time.Duration, fails []string)) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=checker", childEnv+"_ADDR="+addr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return func() (took []time.Duration, fails []string) {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("checker: %v", err)
		}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			ns, e, _ := strings.Cut(line, " ")
			n, err := strconv.ParseInt(ns, 10, 64)
			if err != nil {
				continue
			}
			took = append(took, time.Duration(n))
			if e != "" {
				fails = append(fails, e)
			}
		}
		return took, fails
	}
}

func healthz(addr string) error { return healthzFrom("127.0.0.1", addr) }

// healthzFrom checks /healthz at addr from the loopback address src on a
// connection of its own, within 1 s.
func healthzFrom(src, addr string) error {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: lb\r\nConnection: close\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// checkHealth runs health checks while attack runs (it returns when
// attack does) and fails the test when one failed or took over 100 ms.
func checkHealth(t *testing.T, addr string, attack func(stop <-chan struct{})) {
	t.Helper()
	results := checker(t, addr)
	attack(nil)
	took, fails := results()
	var slow []string
	var worst time.Duration
	for i, d := range took {
		worst = max(worst, d)
		if d > 100*time.Millisecond {
			slow = append(slow, fmt.Sprintf("#%d: %v", i, d))
		}
	}
	t.Logf("%d health checks, slowest %v, %d failed", len(took), worst, len(fails))
	if len(took) < 10 {
		t.Errorf("only %d health checks ran", len(took))
	}
	if len(fails) > 0 {
		t.Errorf("%d of %d health checks failed: %q", len(fails), len(took), fails[:min(3, len(fails))])
	}
	if len(slow) > 0 {
		t.Errorf("%d of %d health checks took over 100 ms: %v", len(slow), len(took), slow)
	}
}

// raiseFDs makes room for n more descriptors or skips.
func raiseFDs(t *testing.T, n uint64) {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		t.Fatal(err)
	}
	if r.Cur < n+1000 {
		r.Cur = min(r.Max, n+1000)
		unix.Setrlimit(unix.RLIMIT_NOFILE, &r)
	}
	if r.Cur < n+1000 {
		t.Skipf("RLIMIT_NOFILE hard limit %d is below the %d descriptors this test needs", r.Max, n+1000)
	}
}

// TestHealthUnderAttack: /healthz answers within 100 ms, from an address
// of its own, while the endpoint (its own process, DefaultLimits) is
// attacked from many other loopback addresses. With the limits before
// issue 37 (8 connections, LimitListener, 5 s header timeout) every
// subtest fails: the checks wait in the accept queue.
func TestHealthUnderAttack(t *testing.T) {
	if testing.Short() {
		t.Skip("attack: 10-20 s")
	}
	// The control: the same checks with no attack. On a machine too
	// loaded to answer within 100 ms at all, this fails too, and the
	// others' failures say nothing about the endpoint.
	t.Run("no-attack", func(t *testing.T) {
		ch := startChild(t)
		checkHealth(t, ch.addr, func(<-chan struct{}) { time.Sleep(3 * time.Second) })
	})
	t.Run("slowloris-1000", func(t *testing.T) {
		raiseFDs(t, 1000)
		ch := startChild(t)
		// The 1,000 connect at once (a connection flood, see idle-10000);
		// the checks run from then on, while they drip their headers, are
		// cut off and reconnect.
		start := time.Now()
		stop := slowloris(ch.addr, 1000)
		t.Logf("1000 slowloris connections made in %v", time.Since(start).Round(time.Millisecond))
		checkHealth(t, ch.addr, func(<-chan struct{}) { time.Sleep(3 * time.Second) })
		stop()
	})
	t.Run("idle-10000", func(t *testing.T) {
		raiseFDs(t, 10000)
		ch := startChild(t)
		// The checks while the connections are being opened (a connection
		// flood: checks wait in the kernel's accept queue behind the
		// attacker's, for as long as the endpoint takes to refuse them on a
		// CPU shared with the attacker) are reported; the ones while they
		// are held are asserted.
		results := checker(t, ch.addr)
		conns := openIdle(t, ch.addr, 10000)
		during, _ := results()
		t.Logf("while opening: %d health checks, slowest %v", len(during), slices.Max(append(during, 0)))
		checkHealth(t, ch.addr, func(stop <-chan struct{}) { time.Sleep(3 * time.Second) })
		for _, c := range conns {
			c.Close()
		}
	})
	t.Run("flood-64", func(t *testing.T) {
		ch := startChild(t)
		var served atomic.Int64
		var cpu, took time.Duration
		checkHealth(t, ch.addr, func(stop <-chan struct{}) {
			cpu0, t0 := ch.cpu(t), time.Now()
			flood(ch.addr, 64, 3*time.Second, &served, nil)
			cpu, took = ch.cpu(t)-cpu0, time.Since(t0)
		})
		perSec := cpu.Seconds() / took.Seconds()
		t.Logf("flood: %d responses in %v, endpoint CPU %v (%.3f CPU-s/s)", served.Load(), took.Round(time.Millisecond), cpu, perSec)
		// The bound from the mechanism: 8 addresses, each 2 requests/s
		// after a burst of 5: 8*(5+2*3) = 88 responses in 3 s. Before
		// issue 37 the flood got 53,763-64,822.
		if n := served.Load(); n > 120 {
			t.Errorf("flood served %d requests in %v, the per-address buckets allow 88", n, took)
		}
		// 88 requests cost a few ms; 0.05 CPU-s/s is a generous ceiling
		// that the unlimited endpoint (0.5-0.76 in the issue) exceeds.
		if perSec > 0.05 {
			t.Errorf("endpoint CPU %.3f CPU-s per second of flood, want <= 0.05", perSec)
		}
	})
}

// slowloris opens n connections from n/8 addresses, each sending a
// request header one line every 500 ms that never ends; a connection the
// server closes is opened again after 50 ms (a real tool reconnects; the
// pause keeps the attacker from measuring this 2-CPU machine instead of
// the endpoint). It returns once every attacker connected once, with a
// function that stops them.
func slowloris(addr string, n int) (stop func()) {
	var wg, up sync.WaitGroup
	quit := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		up.Add(1)
		go func(src string) {
			defer wg.Done()
			first := true
			for {
				c, err := dialFrom(src, addr)
				if first {
					up.Done()
					first = false
				}
				if err == nil {
					io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n")
					for err == nil {
						select {
						case <-quit:
							c.Close()
							return
						case <-time.After(500 * time.Millisecond):
						}
						_, err = io.WriteString(c, "X-a: b\r\n")
					}
					c.Close()
				}
				select {
				case <-quit:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}(attacker(1, i, 8))
	}
	up.Wait()
	return func() { close(quit); wg.Wait() }
}

// openIdle opens n connections from n/100 addresses that send nothing
// (64 dialers, for at most 4 s: a server that stops accepting fills its
// accept queue and makes dials time out). Connections the server refused
// and reset at once count as dialled: the attack is the attempt.
func openIdle(t *testing.T, addr string, n int) []net.Conn {
	var mu sync.Mutex
	conns := make([]net.Conn, 0, n)
	var next, resets, timeouts atomic.Int64
	start := time.Now()
	end := start.Add(4 * time.Second)
	var wg sync.WaitGroup
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(attacker(2, i, 100))}, Timeout: 500 * time.Millisecond}
				c, err := d.Dial("tcp", addr)
				switch {
				case err == nil:
					mu.Lock()
					conns = append(conns, c)
					mu.Unlock()
				case errors.Is(err, syscall.ECONNRESET):
					resets.Add(1)
				default:
					timeouts.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("in %v: %d idle connections open, %d reset by the server at once, %d dials failed otherwise",
		time.Since(start).Round(time.Millisecond), len(conns), resets.Load(), timeouts.Load())
	return conns
}

// flood runs n keep-alive clients from n/8 addresses, each asking for
// /report, /healthz and / as fast as the endpoint answers, for d.
func flood(addr string, n int, d time.Duration, served *atomic.Int64, quit <-chan struct{}) {
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	var stopped atomic.Bool
	if quit != nil {
		go func() { <-quit; stopped.Store(true) }()
	}
	paths := []string{"/report", "/healthz", "/"}
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int, src string) {
			defer wg.Done()
			for time.Now().Before(end) && !stopped.Load() {
				c, err := dialFrom(src, addr)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				br := bufio.NewReader(c)
				for j := i; time.Now().Before(end) && !stopped.Load(); j++ {
					dl := time.Now().Add(3 * time.Second)
					if end.Before(dl) {
						dl = end
					}
					c.SetDeadline(dl)
					if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", paths[j%len(paths)]); err != nil {
						break
					}
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						break
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					served.Add(1)
					if resp.Close {
						break
					}
				}
				c.Close()
			}
		}(i, attacker(3, i, 8))
	}
	wg.Wait()
}
