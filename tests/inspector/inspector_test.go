package inspector

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCollectHost reads this machine: the answers must match what the test
// reads itself by other means.
func TestCollectHost(t *testing.T) {
	s := Collect()
	osrelease, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	if s.Release == "" || s.Release != strings.TrimSpace(string(osrelease)) {
		t.Errorf("release %q, /proc/sys/kernel/osrelease %q", s.Release, osrelease)
	}
	cmdline, _ := os.ReadFile("/proc/cmdline")
	if s.Files["/proc/cmdline"] != string(cmdline) {
		t.Errorf("/proc/cmdline %q, read %q", s.Files["/proc/cmdline"], cmdline)
	}
	if _, err := os.Stat("/proc/modules"); (err == nil) != s.Exists["/proc/modules"] {
		t.Errorf("Exists[/proc/modules] = %v, stat says %v", s.Exists["/proc/modules"], err)
	}
	var lo *Link
	for i := range s.Links {
		if s.Links[i].Name == "lo" {
			lo = &s.Links[i]
		}
	}
	if lo == nil || !lo.Up {
		t.Fatalf("no loopback up in %+v", s.Links)
	}
	if ifi, err := net.InterfaceByName("lo"); err != nil || ifi.MTU != lo.MTU || ifi.Index != lo.Index {
		t.Errorf("lo: %+v, net says %+v (%v)", lo, ifi, err)
	}
	found := false
	for _, a := range s.Addrs {
		if a.Link == "lo" && a.CIDR == "127.0.0.1/8" {
			found = true
			if a.ValidLft != 0xffffffff {
				t.Errorf("127.0.0.1/8 valid_lft %d, want forever", a.ValidLft)
			}
		}
	}
	if !found {
		t.Errorf("127.0.0.1/8 not in %+v", s.Addrs)
	}
	if s.Process.PID != os.Getpid() || !slices.Contains(s.Process.Args, os.Args[0]) {
		t.Errorf("process %+v", s.Process)
	}
	if len(s.Process.Affinity) == 0 {
		t.Error("no CPU affinity read")
	}
	// The NUMA placement files, each as read here, wherever this machine
	// has them (a container may hide /sys/bus/pci or /proc/irq).
	for _, pattern := range []string{NodeDir + "/node*/cpulist", PCIDir + "/*/numa_node", PCIDir + "/*/vendor",
		PCIDir + "/*/net/*/ifindex", "/proc/irq/*/effective_affinity_list"} {
		ms, _ := filepath.Glob(pattern)
		for _, p := range ms {
			want, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			if got, ok := s.Files[p]; !ok || got != string(want) {
				t.Errorf("%s: %q (read: %v), want %q", p, got, ok, want)
			}
		}
		t.Logf("%s: %d files", pattern, len(ms))
	}
	// Every thread of this process, the main one included.
	tid := fmt.Sprintf("/proc/self/task/%d/status", os.Getpid())
	if !strings.Contains(s.Files[tid], "Cpus_allowed_list:") {
		t.Errorf("%s: %q, want the main thread's status", tid, s.Files[tid])
	}
	// Step 10's attributes of every interface that has them (Linux 5.11+),
	// as they are.
	for _, attr := range []string{"napi_defer_hard_irqs", "gro_flush_timeout"} {
		p := "/sys/class/net/lo/" + attr
		want, err := os.ReadFile(p)
		if err != nil {
			t.Logf("%s: %v (kernel too old)", p, err)
			continue
		}
		if got, ok := s.Files[p]; !ok || got != string(want) {
			t.Errorf("%s: %q (read: %v), want %q", p, got, ok, want)
		}
	}
}

func TestTableRows(t *testing.T) {
	for _, tc := range []struct {
		text string
		n    int
	}{
		{"sk RefCnt Type Proto Iface R Rmem User Inode\n", 0},
		{"sk RefCnt Type Proto Iface R Rmem User Inode\nffff 3 3 0003 2 1 0 0 1\n\nffff 3 3 0003 2 1 0 0 2\n", 2},
		{"", 0},
	} {
		if got := TableRows(tc.text); got != tc.n {
			t.Errorf("TableRows(%q) = %d, want %d", tc.text, got, tc.n)
		}
	}
}
