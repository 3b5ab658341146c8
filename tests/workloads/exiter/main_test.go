package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExiter runs the real binary: it serves /json, exits 3 on /exit, and
// on SIGTERM prints its proof line and exits 0.
func TestExiter(t *testing.T) {
	if os.Getenv("EXITER_CHILD") == "1" {
		main()
		return
	}
	start := func(t *testing.T) (*exec.Cmd, string, <-chan string) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
		cmd := exec.Command(os.Args[0], "-test.run=^TestExiter$")
		cmd.Env = append(os.Environ(), "EXITER_CHILD=1", "HOTPATH_PORT="+port)
		pr, pw := io.Pipe()
		cmd.Stderr = pw
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); pw.Close() })
		r := bufio.NewReader(pr)
		line, err := r.ReadString('\n')
		if err != nil || !strings.Contains(line, "ready") {
			t.Fatalf("first line %q, %v; want the ready line", line, err)
		}
		rest := make(chan string, 1)
		go func() { b, _ := io.ReadAll(r); rest <- string(b) }()
		return cmd, "http://127.0.0.1:" + port, rest
	}
	get := func(t *testing.T, url string) string {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}

	t.Run("exit", func(t *testing.T) {
		cmd, base, _ := start(t)
		if got := get(t, base+"/json"); got != `{"message":"Hello, World!"}` {
			t.Errorf("/json = %q", got)
		}
		if got := get(t, base+"/exit"); !strings.Contains(got, "status 3") {
			t.Errorf("/exit = %q", got)
		}
		err := waitTimeout(cmd, 5*time.Second)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != ExitStatus {
			t.Errorf("after /exit: %v, want exit status %d", err, ExitStatus)
		}
	})
	t.Run("stop", func(t *testing.T) {
		cmd, base, _ := start(t)
		if got := get(t, base+"/stop"); got != "stopping\n" {
			t.Errorf("/stop = %q", got)
		}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
			if err != nil {
				t.Fatal(err)
			}
			// The state is the field after the parenthesised command.
			if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); f[0] == "T" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("not stopped 5 s after /stop: %s", b)
			}
		}
	})
	t.Run("sigterm", func(t *testing.T) {
		cmd, _, rest := start(t)
		cmd.Process.Signal(syscall.SIGTERM)
		if err := waitTimeout(cmd, 5*time.Second); err != nil {
			t.Errorf("after SIGTERM: %v, want exit 0", err)
		}
		cmd.Stderr.(*io.PipeWriter).Close()
		if out := <-rest; !strings.Contains(out, "SIGTERM") {
			t.Errorf("output after SIGTERM %q lacks the SIGTERM line", out)
		}
	})
}

func waitTimeout(cmd *exec.Cmd, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		cmd.Process.Kill()
		return errors.New("did not exit in time")
	}
}
