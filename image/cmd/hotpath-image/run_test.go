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
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBuildAndRun is what `make image && make run` does, checked: the CLI
// builds the default appliance (the real kernel, from the cache), `run`
// boots it through OVMF under TCG, /json answers on the forwarded loopback
// port, and SIGINT to `run` powers the guest off in order (QMP
// system_powerdown -> ACPI power button -> the init's shutdown), after which
// QEMU and `run` exit 0. It needs the kernel build (cold: ~30 min) and so is
// skipped with -short.
func TestBuildAndRun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the real build and boot")
	}
	for _, f := range []string{"/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%v (image/deps.sh test installs ovmf)", err)
		}
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Fatal("qemu-system-x86_64 not installed (image/deps.sh test)")
	}
	dir := t.TempDir()
	cli := filepath.Join(dir, "hotpath-image")
	if out, err := exec.Command("go", "build", "-o", cli, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out := filepath.Join(dir, "out")
	start := time.Now()
	b := exec.Command(cli, "build", "-out", out)
	b.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=0")
	summary, err := b.CombinedOutput()
	if err != nil {
		t.Fatalf("hotpath-image build: %v\n%s", err, summary)
	}
	t.Logf("build took %s:\n%s", time.Since(start).Round(100*time.Millisecond), summary)

	// Free loopback ports, so a `make run` elsewhere does not collide.
	port, mgmtPort := freePort(t), freePort(t)

	run := exec.Command(cli, "run", "-disk", filepath.Join(out, "hotpath.img"), "-port", strconv.Itoa(port),
		"-mgmt-port", strconv.Itoa(mgmtPort))
	run.Stdin = nil // not a terminal: SIGINT becomes an orderly power-off
	run.Stderr = os.Stderr
	stdout, err := run.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	defer func() {
		select {
		case <-exited:
		default:
			run.Process.Kill() // QEMU dies with it (Pdeathsig)
			<-exited
		}
	}()
	ready := make(chan struct{})
	var console strings.Builder
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		once := false
		for sc.Scan() {
			line := sc.Text()
			console.WriteString(line + "\n")
			if !once && strings.HasPrefix(line, "HOTPATH-REPORT ") {
				once = true
				close(ready)
			}
		}
		io.Copy(io.Discard, stdout)
		exited <- run.Wait()
	}()
	select {
	case <-ready:
	case err := <-exited:
		exited <- err
		t.Fatalf("run exited before the boot report: %v\n%s", err, console.String())
	case <-time.After(4 * time.Minute):
		t.Fatalf("no boot report within 4 minutes:\n%s", console.String())
	}
	t.Logf("boot report after %s", time.Since(start).Round(100*time.Millisecond))

	body := getOK(t, "http://127.0.0.1:"+strconv.Itoa(port)+"/json", &console)
	if strings.TrimSpace(string(body)) != `{"message":"Hello, World!"}` {
		t.Errorf("/json = %q", body)
	}
	// The management endpoint through its own forward, as the banner says.
	if metrics := getOK(t, "http://127.0.0.1:"+strconv.Itoa(mgmtPort)+"/metrics", &console); !strings.Contains(string(metrics), "# TYPE") {
		t.Errorf("/metrics through the management forward is not Prometheus text:\n%.500s", metrics)
	}

	run.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("run after SIGINT: %v\n%s", err, console.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("the guest did not power off within 90s of SIGINT:\n%s", console.String())
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// getOK polls url for up to a minute until it answers 200 and returns the
// body; console is the guest's output, shown when it never does.
func getOK(t *testing.T, url string, console *strings.Builder) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return body
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("GET %s through the forwarded port: %v\n%s", url, err, console.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
}
