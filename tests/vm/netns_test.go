package vm

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// requireRoot fails a test that needs root when not root: a CI run that
// skipped every namespace test would go green untested. -short skips.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if testing.Short() {
			t.Skip("needs root (network namespaces); skipped in -short mode")
		}
		t.Fatal("needs root (network namespaces): run as root, or with -short to skip")
	}
}

func netnsExists(t *testing.T, name string) bool {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return true
		}
	}
	return false
}

func TestNetnsTapAndClose(t *testing.T) {
	requireRoot(t)
	n, err := CreateNetns()
	if err != nil {
		t.Fatal(err)
	}
	name := n.Name
	if err := n.AddTap("tap0", "10.77.0.1/24"); err != nil {
		n.Close()
		t.Fatal(err)
	}
	out, err := exec.Command("ip", "-n", name, "-d", "link", "show", "tap0").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "multi_queue") {
		t.Errorf("tap0 in %s: %v\n%s\nwant a multi_queue tap", name, err, out)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if netnsExists(t, name) {
		t.Errorf("namespace %s still exists after Close", name)
	}
}

func TestNetnsDoDialAcrossVeth(t *testing.T) {
	requireRoot(t)
	a, b := NewNetns(t), NewNetns(t)
	if err := a.AddVeth("va", "10.78.0.1/24", b, "vb", "10.78.0.2/24"); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if err := a.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", "10.78.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.WriteString(c, "hello from a")
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := b.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(c)
	c.Close()
	if string(got) != "hello from a" {
		t.Errorf("read %q", got)
	}
	// The test process itself stays in its own namespace: the address
	// exists only inside a and b.
	d := net.Dialer{Timeout: 300 * time.Millisecond}
	if c, err := d.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Error("reached the namespace's listener from outside: Do leaked its namespace")
	}
}

func TestRemoveStaleNetns(t *testing.T) {
	requireRoot(t)
	// A PID that no longer exists: a process that has been reaped.
	p := exec.Command("true")
	if err := p.Run(); err != nil {
		t.Fatal(err)
	}
	stale := nsPrefix + strconv.Itoa(p.ProcessState.Pid()) + "-1"
	if err := ip("netns", "add", stale); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if netnsExists(t, stale) {
			ip("netns", "del", stale)
		}
	})
	n := NewNetns(t)
	if netnsExists(t, stale) {
		t.Errorf("stale namespace %s survived CreateNetns", stale)
	}
	if !netnsExists(t, n.Name) {
		t.Errorf("new namespace %s missing", n.Name)
	}
}
