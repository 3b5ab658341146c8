package server_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotpath-dev/hotpath/server"
)

// The descriptor table is sized at Start (fdtable.go), so that accept4
// never grows it: each growth sleeps through an RCU grace period in the
// worker (4-16 ms each here, six of them while 16,000 connections
// opened). A table only grows, and this test binary's other tests leave
// it large, so the server runs in a child process of its own (this
// binary again, running TestFDTableChild), which reports its table's size
// (FDSize in /proc/self/status) before and after Start, then on request:
// once grown, and once this process has opened MaxConnsPerWorker
// connections to it.
const fdTableEnv = "HOTPATH_TEST_FDTABLE"

func TestDescriptorTableSized(t *testing.T) {
	const maxConns = 2000
	cmd := exec.Command(os.Args[0], "-test.run=^TestFDTableChild$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%d", fdTableEnv, firstCPU(t), maxConns))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer in.Close()
	out := bufio.NewScanner(outp)
	line := func() string {
		t.Helper()
		if !out.Scan() {
			t.Fatalf("child: no line: %v", out.Err())
		}
		return out.Text()
	}

	var before, atStart, port int
	if l := line(); fmtScan(l, "started before=%d after=%d port=%d", &before, &atStart, &port) != nil {
		t.Fatalf("child: %q", l)
	}
	// state asks the child for its table's size and its server's accepts.
	state := func() (size, accepted int) {
		t.Helper()
		fmt.Fprintln(in, "state")
		if l := line(); fmtScan(l, "state fdsize=%d accepted=%d", &size, &accepted) != nil {
			t.Fatalf("child: %q", l)
		}
		return size, accepted
	}
	// One worker: its connections, the refused ones lingering, its own
	// three descriptors and the accept to be refused at once
	// (fdsPerWorker), and a reserve of 256.
	need := maxConns + 1024 + 4 + 256
	if before >= need {
		t.Fatalf("the child's table held %d descriptors before Start, enough for %d: this test cannot tell a sized table", before, need)
	}
	// Start has the table grown beside the workers' start: it is grown
	// within moments (one RCU grace period), before any connection.
	after, grown := atStart, time.Now()
	for deadline := grown.Add(5 * time.Second); after < need && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		after, _ = state()
	}
	t.Logf("child's descriptor table: %d before Start, %d when it returned, %d %v later (sized for %d)",
		before, atStart, after, time.Since(grown).Round(time.Millisecond), need)
	if after < need {
		t.Errorf("5 s after Start the table holds %d descriptors, want at least %d: accept4 will grow it", after, need)
	}

	fds := make([]int, 0, maxConns)
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for range maxConns {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		fds = append(fds, fd)
		if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: port}); err != nil {
			t.Fatalf("connection %d: %v", len(fds), err)
		}
	}
	var size, accepted int
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if size, accepted = state(); accepted >= maxConns || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("%d connections accepted: table %d", accepted, size)
	if accepted < maxConns {
		t.Fatalf("the child's server accepted %d of %d connections", accepted, maxConns)
	}
	if size != after {
		t.Errorf("the table grew from %d to %d while %d connections were accepted: accept4 grew it", after, size, maxConns)
	}
}

// fmtScan is fmt.Sscanf that also requires every value to be read.
func fmtScan(s, format string, args ...any) error {
	n, err := fmt.Sscanf(s, format, args...)
	if err == nil && n != len(args) {
		err = fmt.Errorf("%d of %d values", n, len(args))
	}
	return err
}

// TestFDTableChild is the server side of TestDescriptorTableSized; it runs
// only in that test's child process.
func TestFDTableChild(t *testing.T) {
	spec := os.Getenv(fdTableEnv)
	if spec == "" {
		t.Skip("runs as the child of TestDescriptorTableSized")
	}
	var cpu, maxConns int
	if _, err := fmt.Sscanf(spec, "%d,%d", &cpu, &maxConns); err != nil {
		t.Fatal(err)
	}
	before := fdSize(t)
	cfg := server.DefaultConfig()
	cfg.Addr, cfg.Port, cfg.CPUs = "127.0.0.1", 0, []int{cpu}
	cfg.MaxConnsPerWorker = maxConns
	cfg.Log = os.Stderr
	s := server.New(cfg)
	s.Handle("GET", "/json", func(c *server.Ctx) { c.Write([]byte("{}")) })
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("started before=%d after=%d port=%d\n", before, fdSize(t), s.Port())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		fmt.Printf("state fdsize=%d accepted=%d\n", fdSize(t), s.Accepts()[0].Accepted)
	}
	os.Exit(0)
}

// fdSize is the size of this process's descriptor table: the kernel's
// max_fds, FDSize in /proc/self/status.
func fdSize(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "FDSize:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no FDSize in /proc/self/status")
	return 0
}
