package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSIGTERMDrains builds the workload, runs it as a child process the
// way the init does (HOTPATH_CPUS, HOTPATH_PORT), waits for the ready line,
// and checks that SIGTERM with a request in flight drains it and exits 0.
func TestSIGTERMDrains(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := filepath.Join(t.TempDir(), "hotpath-json")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-addr", "127.0.0.1", "-grace", "3s")
	cmd.Env = append(os.Environ(), "HOTPATH_CPUS=0", "HOTPATH_PORT=0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stderr)
	var addr string
	for lines.Scan() {
		t.Log(lines.Text())
		if m := regexp.MustCompile(`ready: .* listening on (\S+)`).FindStringSubmatch(lines.Text()); m != nil {
			addr = m[1]
			break
		}
	}
	if addr == "" {
		t.Fatal("no ready line")
	}
	go io.Copy(io.Discard, stderr)

	// A served request, then one in flight when SIGTERM arrives.
	resp, err := http.Get("http://" + addr + "/json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != `{"message":"Hello, World!"}` {
		t.Fatalf("body %q", body)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("GET /plaintext HTTP/1.1\r\n"))
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	c.Write([]byte("Host: x\r\n\r\n"))
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("in-flight request: %v", err)
	}
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "Hello, World!" || !resp.Close {
		t.Errorf("in-flight request: %d %q close=%v", resp.StatusCode, body, resp.Close)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v to exit, grace is 3s", d)
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("dial after exit: %v, want connection refused", err)
	}
}
