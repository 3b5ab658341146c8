package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/console"
	"github.com/hotpath-dev/hotpath/init/cpuset"
	"github.com/hotpath-dev/hotpath/init/nic"
	"github.com/hotpath-dev/hotpath/init/report"
)

func fakeSys(t *testing.T, online, possible string) string {
	t.Helper()
	sys := t.TempDir()
	dir := filepath.Join(sys, "devices/system/cpu")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "online"), []byte(online+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "possible"), []byte(possible+"\n"), 0o644)
	os.MkdirAll(filepath.Join(sys, "class/net/lo"), 0o755)
	os.WriteFile(filepath.Join(sys, "class/net/lo/type"), []byte("772\n"), 0o644)
	return sys
}

func testMachine(t *testing.T, sys string, set map[string]string) (*machine, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	cfg := config.Default()
	for k, v := range set {
		if err := cfg.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	return &machine{ctx: context.Background(), con: &console.Console{Out: &out}, sysRoot: sys, procRoot: t.TempDir(), cfg: cfg}, &out
}

// TestWorkloadCPUs: workload.cpus within the online CPUs; CPUs that are
// not online are dropped and named; none left means every online CPU and
// a failed step.
func TestWorkloadCPUs(t *testing.T) {
	for _, tc := range []struct {
		online, want, cpus, notOnline string
		status                        report.Status
	}{
		{"0-3", "all", "0-3", "", report.Applied},
		{"0-3", "1-2", "1-2", "", report.Applied},
		{"0-3", "0-7", "0-3", "4-7", report.Applied},
		{"0-1", "2,5", "0-1", "2,5", report.Failed},
		{"0,2-3", "0-3", "0,2-3", "1", report.Applied},
	} {
		m, out := testMachine(t, fakeSys(t, tc.online, "0-7"), map[string]string{"workload.cpus": tc.want})
		var r report.Step
		for _, s := range workloadCPUSteps(m) {
			r = m.run(s)
		}
		if r.Status != tc.status || r.Detail["cpus"] != tc.cpus || r.Detail["not_online"] != tc.notOnline {
			t.Errorf("online %s, workload.cpus=%s: %+v; want %s cpus %s not_online %q", tc.online, tc.want, r, tc.status, tc.cpus, tc.notOnline)
		}
		if got := cpuset.FormatList(m.workloadCPUs()); got != tc.cpus {
			t.Errorf("workload gets %s, want %s", got, tc.cpus)
		}
		if m.nrCPUs != 8 {
			t.Errorf("nr_cpu_ids %d, want 8", m.nrCPUs)
		}
		if tc.notOnline != "" && !strings.Contains(out.String(), "are not online") {
			t.Errorf("dropped cpus not logged: %s", out.String())
		}
	}
}

// TestNoNIC: without a NIC every NIC step is still in the report, skipped
// with the reason, and the network step says why there is no address.
func TestNoNIC(t *testing.T) {
	m, _ := testMachine(t, fakeSys(t, "0-1", "0-1"), nil)
	for _, mk := range []func(*machine) []boot.Step{workloadCPUSteps, nicDiscoverSteps, nicTuneSteps, networkSteps} {
		for _, s := range mk(m) {
			m.run(s)
		}
	}
	names := map[string]report.Step{}
	for _, r := range m.results {
		names[r.Name] = r
	}
	for _, n := range []string{"nic-discover", "nic-channels", "nic-spread", "nic-coalesce", "nic-xps", "nic-rps", "net"} {
		if r, ok := names[n]; !ok || r.Status != report.Skipped || r.Reason == "" {
			t.Errorf("%s: %+v, want skipped with a reason", n, r)
		}
	}
	if m.tuner != nil || m.dhcp != nil {
		t.Error("tuner or DHCP without a NIC")
	}
}

// TestSequenceOrder: the table is the boot order a reader sees.
func TestSequenceOrder(t *testing.T) {
	if len(sequence) < 4 {
		t.Fatalf("%d entries in the boot sequence", len(sequence))
	}
	m, _ := testMachine(t, fakeSys(t, "0-1", "0-1"), nil)
	var names []string
	for _, mk := range sequence[:4] {
		for _, s := range mk(m) {
			names = append(names, s.Name)
		}
	}
	got := strings.Join(names, " ")
	if !strings.HasPrefix(got, "loopback rlimit-nofile sysctl net.core.busy_poll") || !strings.HasSuffix(got, "workload-cpus") {
		t.Errorf("sequence starts %s", got)
	}
}

func TestFailed(t *testing.T) {
	rs := []report.Step{{Name: "net-dhcp", Status: report.Failed}, {Name: "x", Status: report.Applied}}
	if !failed(rs, "net-dhcp") || failed(rs, "x") || failed(rs, "y") {
		t.Error("failed()")
	}
}

// TestUserDataSequence: the per-instance entries of the sequence in turn.
// User-data is a step only when the metadata service was asked; the
// sysctls it changed (and only those) are applied again, named so; every
// key's source is settled, user-data's included.
func TestUserDataSequence(t *testing.T) {
	m, _ := testMachine(t, fakeSys(t, "0-1", "0-1"), map[string]string{"sysctl.net.core.somaxconn": "4096"})
	m.inst = newInstance(map[string]string{"sysctl.net.core.somaxconn": report.FromFile})
	sysctlSteps(m)
	if s := userDataSteps(m); len(s) != 0 {
		t.Fatalf("user-data steps without the metadata service: %v", s)
	}
	m.inst.ec2 = true
	m.inst.data = []byte("sysctl.net.core.somaxconn=8192\nsysctl.net.ipv4.tcp_fin_timeout=5\nworkload.port=9090\n")
	for _, s := range userDataSteps(m) {
		if r := boot.RunOne(m.ctx, s); r.Status != report.Applied {
			t.Fatalf("user-data step: %+v", r)
		}
	}
	var names []string
	for _, s := range userDataSysctlSteps(m) {
		names = append(names, s.Name)
	}
	want := "sysctl net.core.somaxconn (user-data),sysctl net.ipv4.tcp_fin_timeout (user-data)"
	if strings.Join(names, ",") != want || strings.Join(m.inst.userData.Reapplied, ",") != want {
		t.Errorf("re-applied %q (report %q), want %q", names, m.inst.userData.Reapplied, want)
	}
	for k, want := range map[string]string{"workload.port": report.FromUserData, "sysctl.net.core.somaxconn": report.FromUserData,
		"workload.path": report.FromDefault} {
		if got := m.inst.sources[k]; got != want {
			t.Errorf("source of %s: %q, want %q", k, got, want)
		}
	}
	if m.cfg.WorkloadPort != 9090 {
		t.Errorf("workload.port %d after user-data", m.cfg.WorkloadPort)
	}
}

// addNIC puts an Ethernet interface with a device link in the fake sysfs.
func addNIC(t *testing.T, sys, name string) {
	t.Helper()
	dir := filepath.Join(sys, "class/net", name)
	dev := filepath.Join(sys, "devices/virtio0")
	os.MkdirAll(filepath.Join(dev), 0o755)
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "type"), []byte("1\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "ifindex"), []byte("2\n"), 0o644)
	if err := os.Symlink(dev, filepath.Join(dir, "device")); err != nil {
		t.Fatal(err)
	}
}

// TestNICDiscoverInsideStep: the NIC is found and its ethtool opened by
// the nic-discover step itself, so a failure or a panic there is that
// step's outcome and every NIC step after it is still reported, skipped.
func TestNICDiscoverInsideStep(t *testing.T) {
	for _, tc := range []struct {
		name    string
		open    func() (nic.Ethtool, nic.Netlink, error)
		discErr string
		reason  string
	}{
		{"no ethtool", func() (nic.Ethtool, nic.Netlink, error) { return nil, nil, errors.New("socket: permission denied") },
			"verify: ethtool: socket: permission denied", "no ethtool netlink/ioctl socket"},
		{"panic", func() (nic.Ethtool, nic.Netlink, error) { panic("ethtool exploded") },
			"panic: ethtool exploded", "no ethtool netlink/ioctl socket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys := fakeSys(t, "0-1", "0-1")
			addNIC(t, sys, "eth0")
			m, _ := testMachine(t, sys, nil)
			m.openNIC = tc.open
			for _, mk := range []func(*machine) []boot.Step{workloadCPUSteps, nicDiscoverSteps, nicTuneSteps} {
				for _, s := range mk(m) {
					m.run(s)
				}
			}
			byName := map[string]report.Step{}
			for _, r := range m.results {
				byName[r.Name] = r
			}
			if r := byName["nic-discover"]; r.Status != report.Failed || !strings.HasPrefix(r.Error, tc.discErr) || r.Detail["name"] != "eth0" {
				t.Errorf("nic-discover: %+v, want failed with %q naming eth0", r, tc.discErr)
			}
			for _, n := range []string{"nic-channels", "nic-spread", "nic-gro", "nic-link-up", "nic-coalesce", "nic-qdisc", "nic-irq-affinity", "nic-xps", "nic-rps"} {
				if r := byName[n]; r.Status != report.Skipped || r.Reason != tc.reason {
					t.Errorf("%s: %+v, want skipped: %s", n, r, tc.reason)
				}
			}
			if m.link == nil || m.link.Name != "eth0" || m.tuner != nil {
				t.Errorf("link %+v tuner %v: want eth0 and no tuner", m.link, m.tuner)
			}
		})
	}
}

// TestBQLInert: nic.bql=auto makes the byte queue limits inert only under
// noqueue; on and inert are what they say whatever the qdisc.
func TestBQLInert(t *testing.T) {
	for _, tc := range []struct {
		b     config.BQL
		qdisc string
		want  bool
	}{
		{config.BQLAuto, "pfifo_fast", false},
		{config.BQLAuto, "noqueue", true},
		{config.BQLAuto, "", false}, // default_qdisc unreadable: the kernel's limits stay
		{config.BQLOn, "noqueue", false},
		{config.BQLInert, "pfifo_fast", true},
	} {
		if got := bqlInert(tc.b, tc.qdisc); got != tc.want {
			t.Errorf("nic.bql=%s with %q: inert %v, want %v", tc.b, tc.qdisc, got, tc.want)
		}
	}
}
