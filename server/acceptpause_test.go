package server_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotpath-dev/hotpath/server"
)

const acceptPauseChildEnv = "HOTPATH_TEST_ACCEPT_PAUSE_CHILD"

// TestAcceptPauseResumes runs a two-worker server in a child process whose
// RLIMIT_NOFILE leaves room for three connections. Three connections from
// the first CPU take them; a fourth from that CPU and one from the second
// CPU then make both workers fail accept4 with EMFILE and pause accepting;
// the second worker has no connection of its own, so no connection close
// can resume it. Once the first three close, the second worker must serve
// its queued connection, and a new one, within a second each.
func TestAcceptPauseResumes(t *testing.T) {
	cpus := affinity(t)
	if len(cpus) < 2 {
		t.Skip("needs two CPUs")
	}
	cpus = cpus[:2]
	cmd := exec.Command(os.Args[0], "-test.run=^TestAcceptPauseChild$", "-test.v")
	cmd.Env = append(os.Environ(), acceptPauseChildEnv+"="+strconv.Itoa(cpus[0])+","+strconv.Itoa(cpus[1]))
	var log lockedBuffer // written by exec's copying goroutine
	cmd.Stderr = &log
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close() // the child exits when its stdin closes
		cmd.Wait()
		if t.Failed() {
			t.Logf("child stderr:\n%s", log.String())
		}
	}()
	var addr string
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if a, ok := strings.CutPrefix(lines.Text(), "listening "); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		t.Fatalf("child did not start")
	}
	go io.Copy(io.Discard, stdout)

	var held []net.Conn
	for i := range 3 {
		c := dialFromCPU(t, addr, cpus[0])
		if w := askCPU(t, c, time.Second); w != cpus[0] {
			t.Fatalf("connection %d from cpu %d served by worker %d", i, cpus[0], w)
		}
		held = append(held, c)
	}
	// Both workers now fail to accept: the descriptors are gone.
	queued0 := dialFromCPU(t, addr, cpus[0])
	queued1 := dialFromCPU(t, addr, cpus[1])
	for _, c := range []net.Conn{queued0, queued1} {
		c.Write([]byte("GET /cpu HTTP/1.1\r\nHost: x\r\n\r\n"))
	}
	time.Sleep(600 * time.Millisecond) // more than one retry of the pause timer
	if !strings.Contains(log.String(), "pausing accepts") {
		t.Fatalf("no worker paused accepting: the limit did not bite")
	}
	freed := time.Now()
	for _, c := range held {
		c.Close()
	}
	if w := readCPU(t, queued1, time.Second); w != cpus[1] {
		t.Errorf("queued connection from cpu %d served by worker %d", cpus[1], w)
	}
	t.Logf("the paused worker served its queued connection %v after the descriptors were freed", time.Since(freed).Round(time.Millisecond))
	fresh := dialFromCPU(t, addr, cpus[1])
	if w := askCPU(t, fresh, time.Second); w != cpus[1] {
		t.Errorf("new connection from cpu %d served by worker %d", cpus[1], w)
	}
	if w := readCPU(t, queued0, time.Second); w != cpus[0] {
		t.Errorf("queued connection from cpu %d served by worker %d", cpus[0], w)
	}
}

// TestAcceptPauseChild is the server side of TestAcceptPauseResumes; it
// runs only in the child process.
func TestAcceptPauseChild(t *testing.T) {
	list := os.Getenv(acceptPauseChildEnv)
	if list == "" {
		t.Skip("runs as the child of TestAcceptPauseResumes")
	}
	cpus, err := server.ParseCPUList(list)
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.Addr, cfg.Port, cfg.CPUs, cfg.Log = "127.0.0.1", 0, cpus, os.Stderr
	s := server.New(cfg)
	s.Handle("GET", "/cpu", func(c *server.Ctx) {
		c.SetResponseBody(strconv.AppendInt(c.ResponseBody(), int64(c.WorkerCPU()), 10))
	})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the runtime open what it opens
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	// ReadDir's own descriptor is closed again: len(fds)-1 are open.
	lim := unix.Rlimit{Cur: uint64(len(fds) - 1 + 3), Max: uint64(len(fds) - 1 + 3)}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "child: RLIMIT_NOFILE %d\n", lim.Cur)
	fmt.Printf("listening 127.0.0.1:%d\n", s.Port())
	io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.Shutdown(ctx)
}

// dialFromCPU connects from a thread pinned to cpu, so that on loopback
// the connection is received on that CPU and steered to its worker.
func dialFromCPU(t *testing.T, addr string, cpu int) net.Conn {
	t.Helper()
	var fd int
	if err := onCPU(addr, cpu, func(s int) error { fd = s; return nil }); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "conn")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// askCPU asks the connection's worker for its CPU.
func askCPU(t *testing.T, c net.Conn, within time.Duration) int {
	t.Helper()
	c.Write([]byte("GET /cpu HTTP/1.1\r\nHost: x\r\n\r\n"))
	return readCPU(t, c, within)
}

// readCPU reads one /cpu response, which must arrive within the given time.
func readCPU(t *testing.T, c net.Conn, within time.Duration) int {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(within))
	_, bodies, _ := readResponses(t, bufio.NewReader(c), 1)
	n, err := strconv.Atoi(strings.Fields(bodies[0])[0])
	if err != nil {
		t.Fatalf("response %q", bodies[0])
	}
	return n
}

// lockedBuffer is a bytes.Buffer safe for one writer and one reader.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
