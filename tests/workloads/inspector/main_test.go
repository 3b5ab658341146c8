package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/tests/inspector"
)

// TestInspectorWorkload runs the binary as the init would (HOTPATH_PORT),
// asks it over a real socket, and stops it with SIGTERM: exit status 0 and
// the line the e2e test waits for.
func TestInspectorWorkload(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "inspector")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), fmt.Sprintf("HOTPATH_PORT=%d", port), "HOTPATH_CPUS=0")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if l := <-lines; !strings.Contains(l, "listening") {
		t.Fatalf("first line %q", l)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	c := &http.Client{Timeout: 30 * time.Second}
	var s inspector.Snapshot
	get(t, c, base+"/inspect", &s)
	if s.Process.PID != cmd.Process.Pid || !strings.Contains(strings.Join(s.Process.Env, " "), "HOTPATH_CPUS=0") {
		t.Errorf("process %+v, want pid %d with HOTPATH_CPUS", s.Process, cmd.Process.Pid)
	}
	var conn inspector.Conn
	get(t, c, base+"/conn", &conn)
	if conn.IncomingCPU < 0 || conn.CPU < 0 || conn.UID != os.Getuid() || !strings.HasPrefix(conn.Remote, "127.0.0.1:") {
		t.Errorf("conn %+v", conn)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	var out []string
	for l := range lines {
		out = append(out, l)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	if !strings.Contains(strings.Join(out, "\n"), "inspector: SIGTERM") {
		t.Errorf("no SIGTERM line in %q", out)
	}
}

func get(t *testing.T, c *http.Client, url string, v any) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %s %s", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
