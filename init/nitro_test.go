package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/nic"
)

// Without pstore the crash-capture step skips and the report gets no
// previous_boot; without a NIC the locality step skips and the report
// gets no numa.
func TestNitroStepsWithout(t *testing.T) {
	m, _ := testMachine(t, fakeSys(t, "0-1", "0-1"), nil)
	// One step each, in the report as skipped with the reason.
	want := []string{
		"previous-boot skipped: no pstore file system (kernel without CONFIG_PSTORE)",
		"numa-locality skipped: no primary network interface",
	}
	if got := runAll(m, append(previousBootSteps(m), numaSteps(m)...)); !matches(got, want) {
		t.Errorf("steps\n%q\nwant\n%q", got, want)
	}
	if m.previous != nil || m.numa != nil {
		t.Errorf("previous %+v, numa %+v; want nil", m.previous, m.numa)
	}
}

// With two nodes and the NIC on node 1 the tuner gets node 1's CPUs first,
// and the report the topology.
func TestNUMASteps(t *testing.T) {
	sys := fakeSys(t, "0-3", "0-3")
	for p, v := range map[string]string{
		"devices/system/node/node0/cpulist":         "0-1",
		"devices/system/node/node1/cpulist":         "2-3",
		"devices/pci0000:80/0000:81:00.0/numa_node": "1",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(sys, p)), 0o755)
		if err := os.WriteFile(filepath.Join(sys, p), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(sys, "class/net/eth0"), 0o755)
	if err := os.Symlink(filepath.Join(sys, "devices/pci0000:80/0000:81:00.0"), filepath.Join(sys, "class/net/eth0/device")); err != nil {
		t.Fatal(err)
	}
	m, _ := testMachine(t, sys, nil)
	m.cpus = []int{0, 1, 2, 3}
	m.link = &nic.Link{Name: "eth0"}
	m.tuner = &nic.Tuner{CPUs: m.cpus}
	if got, want := runAll(m, numaSteps(m)), []string{"numa-locality applied"}; !matches(got, want) {
		t.Fatalf("steps %q, want %q", got, want)
	}
	if !slices.Equal(m.tuner.QueueOrder, []int{2, 3, 0, 1}) {
		t.Errorf("queue order %v, want 2,3,0,1", m.tuner.QueueOrder)
	}
	if m.numa == nil || m.numa.NICNode != 1 || len(m.numa.Nodes) != 2 {
		t.Errorf("report numa %+v", m.numa)
	}
	// nic.numa_local=off: the topology is reported, the order left alone.
	m, _ = testMachine(t, sys, map[string]string{"nic.numa_local": "off"})
	m.cpus, m.link, m.tuner = []int{0, 1, 2, 3}, &nic.Link{Name: "eth0"}, &nic.Tuner{}
	if got, want := runAll(m, numaSteps(m)), []string{"numa-locality skipped: nic.numa_local=off"}; !matches(got, want) {
		t.Errorf("numa_local=off: steps %q, want %q", got, want)
	}
	if m.tuner.QueueOrder != nil || m.numa == nil || m.numa.NICNode != 1 || len(m.numa.Nodes) != 2 {
		t.Errorf("numa_local=off: order %v, numa %+v", m.tuner.QueueOrder, m.numa)
	}
}

// runAll runs steps and returns one "name status[: reason or error]" a
// step, for matches.
func runAll(m *machine, steps []boot.Step) []string {
	var out []string
	for _, s := range steps {
		r := m.run(s)
		l := r.Name + " " + string(r.Status)
		if why := r.Reason + r.Error; why != "" {
			l += ": " + why
		}
		out = append(out, l)
	}
	return out
}

// matches reports whether got has one line a line of want, in order, each
// starting with it (a reason may go on with the system's error).
func matches(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !strings.HasPrefix(got[i], want[i]) {
			return false
		}
	}
	return true
}
