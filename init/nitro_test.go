package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hotpath-dev/hotpath/init/nic"
	"github.com/hotpath-dev/hotpath/init/report"
)

// Without pstore the crash-capture step skips and the report gets no
// previous_boot; without a NIC the locality step skips and the report
// gets no numa.
func TestNitroStepsWithout(t *testing.T) {
	m, _ := testMachine(t, fakeSys(t, "0-1", "0-1"), nil)
	for _, s := range append(previousBootSteps(m), numaSteps(m)...) {
		if r := m.run(s); r.Status != report.Skipped {
			t.Errorf("%s: %s %s, want skipped", r.Name, r.Status, r.Error)
		}
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
	for _, s := range numaSteps(m) {
		if r := m.run(s); r.Status != report.Applied {
			t.Fatalf("%s: %s %s%s", r.Name, r.Status, r.Reason, r.Error)
		}
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
	for _, s := range numaSteps(m) {
		if r := m.run(s); r.Status != report.Skipped {
			t.Errorf("numa_local=off: %s %s", r.Status, r.Reason)
		}
	}
	if m.tuner.QueueOrder != nil || m.numa == nil || m.numa.NICNode != 1 {
		t.Errorf("numa_local=off: order %v, numa %+v", m.tuner.QueueOrder, m.numa)
	}
}
