package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestProbe runs the real binary: /cpu names the worker's CPU and the
// handler runs on it (the worker is pinned); -exit-now exits 1 at once.
// /signal and /panic are only for a guest: here they would signal the
// host's PID 1 and crash the host.
func TestProbe(t *testing.T) {
	if os.Getenv("PROBE_CHILD") == "1" {
		// The test binary's own flags are parsed by now; main parses these.
		os.Args = append(os.Args[:1], strings.Fields(os.Getenv("PROBE_ARGS"))...)
		main()
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestProbe$")
	cmd.Env = append(os.Environ(), "PROBE_CHILD=1", "HOTPATH_PORT="+port, "HOTPATH_CPUS=0")
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); pw.Close() })
	r := bufio.NewReader(pr)
	if line, err := r.ReadString('\n'); err != nil || !strings.Contains(line, "ready") {
		t.Fatalf("first line %q, %v", line, err)
	}
	go io.Copy(io.Discard, r)
	resp, err := http.Get("http://127.0.0.1:" + port + "/cpu")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var worker, running, incoming int
	var allowed string
	if _, err := fmt.Sscanf(string(b), "worker=%d running=%d incoming=%d allowed=%s", &worker, &running, &incoming, &allowed); err != nil {
		t.Fatalf("/cpu answered %q: %v", b, err)
	}
	// allowed is the deterministic witness of the pinning: an unpinned
	// thread may still happen to run on cpu 0.
	if worker != 0 || running != 0 || allowed != "0" {
		t.Errorf("/cpu %q: want worker 0 running on cpu 0 and allowed only there (HOTPATH_CPUS=0)", b)
	}

	ex := exec.Command(os.Args[0], "-test.run=^TestProbe$")
	ex.Env = append(os.Environ(), "PROBE_CHILD=1", "HOTPATH_PORT="+port, "PROBE_ARGS=-exit-now")
	if err := ex.Run(); err == nil || ex.ProcessState.ExitCode() != 1 {
		t.Errorf("-exit-now: %v, want exit status 1", err)
	}
}
