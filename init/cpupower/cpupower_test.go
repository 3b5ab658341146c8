package cpupower

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/report"
)

// fakeQoS is the kernel's CPU latency QoS: the target is the lowest
// request held, PM_QOS_CPU_LATENCY_DEFAULT_VALUE (2000 s) without any.
type fakeQoS struct {
	mine   int32
	held   bool
	others []int32 // requests of other holders
}

func (q *fakeQoS) Hold(us int32) error { q.mine, q.held = us, true; return nil }
func (q *fakeQoS) Target() (int32, error) {
	t := int32(2000000000)
	if q.held {
		t = min(t, q.mine)
	}
	for _, o := range q.others {
		t = min(t, o)
	}
	return t, nil
}

// machine is a fake /sys and /proc.
type machine struct {
	t         *testing.T
	sys, proc string
}

func newMachine(t *testing.T, cpuFlags string) *machine {
	root := t.TempDir()
	m := &machine{t: t, sys: filepath.Join(root, "sys"), proc: filepath.Join(root, "proc")}
	var b strings.Builder
	for c := 0; c < 4; c++ {
		fmt.Fprintf(&b, "processor\t: %d\nvendor_id\t: GenuineIntel\nflags\t\t: %s\n\n", c, cpuFlags)
	}
	m.write("proc", "cpuinfo", b.String())
	return m
}

func (m *machine) write(root, rel, content string) {
	m.t.Helper()
	p := filepath.Join(map[string]string{"sys": m.sys, "proc": m.proc}[root], rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content+"\n"), 0o644); err != nil {
		m.t.Fatal(err)
	}
}

func (m *machine) read(rel string) string { return readTrim(filepath.Join(m.sys, rel)) }

// cpufreq gives every CPU a policy of driver, with governor gov of avail
// and, if epp is not "", an energy-performance preference.
func (m *machine) cpufreq(driver, gov, avail, epp string) {
	for c := 0; c < 4; c++ {
		p := fmt.Sprintf("devices/system/cpu/cpufreq/policy%d/", c)
		m.write("sys", p+"scaling_driver", driver)
		m.write("sys", p+"scaling_governor", gov)
		m.write("sys", p+"scaling_available_governors", avail)
		if epp != "" {
			m.write("sys", p+"energy_performance_preference", epp)
			m.write("sys", p+"energy_performance_available_preferences", "default performance balance_performance balance_power power")
		}
	}
}

// cpuidle registers driver with CPU 0's states as name:latency.
func (m *machine) cpuidle(driver string, states ...string) {
	m.write("sys", "devices/system/cpu/cpuidle/current_driver", driver)
	for i, s := range states {
		name, lat, _ := strings.Cut(s, ":")
		m.write("sys", fmt.Sprintf("devices/system/cpu/cpu0/cpuidle/state%d/name", i), name)
		m.write("sys", fmt.Sprintf("devices/system/cpu/cpu0/cpuidle/state%d/latency", i), lat)
	}
}

const (
	bareFlags = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art arch_perfmon pebs bts rep_good nopl xtopology nonstop_tsc cpuid aperfmperf pni pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg fma cx16 xtpr pdcm pcid dca sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand lahf_lm abm 3dnowprefetch cpuid_fault epb cat_l3 cdp_l3 invpcid_single intel_ppin ssbd mba ibrs ibpb stibp ibrs_enhanced tpr_shadow flexpriority ept vpid ept_ad fsgsbase tsc_adjust bmi1 hle avx2 smep bmi2 erms invpcid rtm cqm mpx rdt_a avx512f avx512dq rdseed adx smap clflushopt clwb intel_pt avx512cd avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local dtherm ida arat pln pts hwp hwp_act_window hwp_epp hwp_pkg_req pku ospke avx512_vnni md_clear flush_l1d arch_capabilities"
	// EC2 c5.xlarge (Nitro, KVM): no hwp, the hypervisor flag.
	ec2Flags = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid aperfmperf tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm abm 3dnowprefetch invpcid_single pti fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid mpx avx512f avx512dq rdseed adx smap clflushopt clwb avx512cd avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves ida arat pku ospke"
)

func run(t *testing.T, m *machine, pol config.PowerPolicy, q QoS) map[string]report.Step {
	t.Helper()
	out := map[string]report.Step{}
	for _, s := range Steps(Options{SysRoot: m.sys, ProcRoot: m.proc, QoS: q, Power: config.Power{Policy: pol, CPULatencyUs: 2}}) {
		out[s.Name] = boot.RunOne(context.Background(), s)
	}
	return out
}

// TestBareMetalIntel: a Xeon under intel_pstate in active mode with the
// kernel's schedutil default (which intel_pstate turns into powersave)
// and acpi_idle: performance set on every policy, EPP performance, and
// the C-state latency held at 2 µs, all read back.
func TestBareMetalIntel(t *testing.T) {
	m := newMachine(t, bareFlags)
	m.write("sys", "devices/system/cpu/intel_pstate/status", "active")
	m.cpufreq("intel_pstate", "powersave", "performance powersave", "balance_performance")
	m.cpuidle("acpi_idle", "POLL:0", "C1:1", "C2:41", "C3:133")
	q := &fakeQoS{}
	res := run(t, m, config.PowerAuto, q)
	g := res["cpu-governor"]
	if g.Status != report.Applied || g.Detail["governor"] != "performance" || g.Detail["epp"] != "performance" ||
		g.Detail["driver"] != "intel_pstate" || g.Detail["before"] != "powersave" || g.Detail["policies"] != "4" {
		t.Errorf("cpu-governor = %+v", g)
	}
	for c := 0; c < 4; c++ {
		p := fmt.Sprintf("devices/system/cpu/cpufreq/policy%d/", c)
		if m.read(p+"scaling_governor") != "performance" || m.read(p+"energy_performance_preference") != "performance" {
			t.Errorf("policy%d: %s %s", c, m.read(p+"scaling_governor"), m.read(p+"energy_performance_preference"))
		}
	}
	l := res["cpu-latency"]
	if l.Status != report.Applied || !q.held || q.mine != 2 || l.Detail["target_us"] != "2" ||
		l.Detail["allowed"] != "POLL,C1" || l.Detail["excluded"] != "C2(41us),C3(133us)" {
		t.Errorf("cpu-latency = %+v, held %v %d", l, q.held, q.mine)
	}
}

// TestSkips: where the step must not act, or finds nothing to act on, it
// says why and touches nothing.
func TestSkips(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flags   string
		setup   func(m *machine)
		pol     config.PowerPolicy
		gov     string // substring of cpu-governor's reason
		lat     string // substring of cpu-latency's reason
		touched bool
	}{
		{"virtualized EC2", ec2Flags, func(m *machine) {
			m.cpufreq("intel_pstate", "powersave", "performance powersave", "balance_performance") // as if exposed
			m.cpuidle("haltpoll", "POLL:0", "haltpoll:1")
		}, config.PowerAuto, "virtualized (cpuinfo flag hypervisor)", "virtualized (cpuinfo flag hypervisor)", false},
		{"Graviton, virtualized", "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics", func(m *machine) {
			m.write("sys", "class/dmi/id/sys_vendor", "Amazon EC2")
			m.write("sys", "class/dmi/id/product_name", "c7g.xlarge")
		}, config.PowerAuto, "virtualized (EC2 c7g.xlarge)", "virtualized (EC2 c7g.xlarge)", false},
		{"QEMU arm64", "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics", func(m *machine) {
			m.write("sys", "class/dmi/id/sys_vendor", "QEMU")
			m.write("sys", "class/dmi/id/product_name", "QEMU Virtual Machine")
			m.cpuidle("psci_idle", "WFI:1")
		}, config.PowerAuto, "virtualized (DMI vendor QEMU)", "virtualized (DMI vendor QEMU)", false},
		{"Xen", bareFlags, func(m *machine) { m.write("sys", "hypervisor/type", "xen") },
			config.PowerAuto, "virtualized (hypervisor xen)", "virtualized", false},
		{"no cpufreq, no cpuidle", bareFlags, func(*machine) {}, config.PowerAuto, "no cpufreq policy", "no cpuidle driver", false},
		{"cpuidle none", bareFlags, func(m *machine) { m.cpuidle("none") }, config.PowerAuto, "no cpufreq policy", "no cpuidle driver", false},
		{"no performance governor", bareFlags, func(m *machine) {
			m.cpufreq("acpi-cpufreq", "schedutil", "schedutil", "")
		}, config.PowerAuto, "no performance governor (available: schedutil; kernel without CONFIG_CPU_FREQ_GOV_PERFORMANCE?)", "no cpuidle", false},
		{"off", bareFlags, func(m *machine) {
			m.cpufreq("intel_pstate", "powersave", "performance powersave", "balance_performance")
			m.cpuidle("intel_idle", "POLL:0", "C1:2", "C1E:10", "C6:170")
		}, config.PowerOff, "power.policy=off", "power.policy=off", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMachine(t, tc.flags)
			tc.setup(m)
			q := &fakeQoS{}
			res := run(t, m, tc.pol, q)
			if r := res["cpu-governor"]; r.Status != report.Skipped || !strings.Contains(r.Reason, tc.gov) {
				t.Errorf("cpu-governor = %+v, want skipped with %q", r, tc.gov)
			}
			if r := res["cpu-latency"]; r.Status != report.Skipped || !strings.Contains(r.Reason, tc.lat) {
				t.Errorf("cpu-latency = %+v, want skipped with %q", r, tc.lat)
			}
			if q.held {
				t.Error("a latency request was held")
			}
			if g := m.read("devices/system/cpu/cpufreq/policy0/scaling_governor"); g == "performance" {
				t.Error("the governor was changed")
			}
		})
	}
}

// TestGravitonMetal: arm64 bare metal (c7g.metal: cppc_cpufreq, no EPP,
// no hypervisor flag on arm64 at all) gets the performance governor; and
// power.policy=on acts under a hypervisor where the knobs exist.
func TestGravitonMetal(t *testing.T) {
	m := newMachine(t, "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics")
	m.write("sys", "class/dmi/id/sys_vendor", "Amazon EC2")
	m.write("sys", "class/dmi/id/product_name", "c7g.metal")
	m.cpufreq("cppc_cpufreq", "schedutil", "performance schedutil", "")
	m.cpuidle("psci_idle", "WFI:1", "cpu-sleep-0:350")
	res := run(t, m, config.PowerAuto, &fakeQoS{})
	if g := res["cpu-governor"]; g.Status != report.Applied || g.Detail["governor"] != "performance" || g.Detail["epp"] != "" {
		t.Errorf("cpu-governor = %+v", g)
	}
	if l := res["cpu-latency"]; l.Status != report.Applied || l.Detail["allowed"] != "WFI" || l.Detail["excluded"] != "cpu-sleep-0(350us)" {
		t.Errorf("cpu-latency = %+v", l)
	}

	v := newMachine(t, ec2Flags)
	v.cpufreq("intel_pstate", "powersave", "performance powersave", "balance_performance")
	v.cpuidle("intel_idle", "POLL:0", "C1:2", "C6:133")
	if res := run(t, v, config.PowerOn, &fakeQoS{}); res["cpu-governor"].Status != report.Applied || res["cpu-latency"].Status != report.Applied {
		t.Errorf("power.policy=on under a hypervisor: %+v", res)
	}
}

// TestVerify: the read-back catches a governor changed behind the step's
// back and a latency target the request did not bring down.
func TestVerify(t *testing.T) {
	m := newMachine(t, bareFlags)
	m.cpufreq("intel_pstate", "powersave", "performance powersave", "balance_performance")
	m.cpuidle("intel_idle", "POLL:0", "C1:2", "C1E:10", "C6:170")
	q := &fakeQoS{}
	steps := Steps(Options{SysRoot: m.sys, ProcRoot: m.proc, QoS: q, Power: config.Power{Policy: config.PowerAuto, CPULatencyUs: 2}})
	for _, s := range steps {
		if r := boot.RunOne(context.Background(), s); r.Status != report.Applied {
			t.Fatalf("%+v", r)
		}
	}
	m.write("sys", "devices/system/cpu/cpufreq/policy2/scaling_governor", "powersave")
	if err := steps[0].Verify(context.Background(), boot.Detail{}); err == nil || !strings.Contains(err.Error(), `policy2: governor reads "powersave"`) {
		t.Errorf("governor verify: %v", err)
	}
	q.held = false // the request lost (the descriptor closed)
	if err := steps[1].Verify(context.Background(), boot.Detail{}); err == nil {
		t.Error("latency verify passed without the request")
	}
	q.held, q.others = true, []int32{0} // another holder asks for less: still in force
	if err := steps[1].Verify(context.Background(), boot.Detail{}); err != nil {
		t.Errorf("latency verify with a lower request held elsewhere: %v", err)
	}
}

// TestDevQoS: the real device's protocol on a stand-in file: the request
// is 4 native-endian bytes, read back at offset 0 through the held
// descriptor, and a second Hold updates the same request.
func TestDevQoS(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cpu_dma_latency")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	q := &DevQoS{Path: p}
	if _, err := q.Target(); err == nil {
		t.Error("Target before Hold")
	}
	for _, us := range []int32{2, 0} {
		if err := q.Hold(us); err != nil {
			t.Fatal(err)
		}
		// A regular file appends where the device replaces: read the
		// last write.
		b, _ := os.ReadFile(p)
		if len(b) < 4 || int32(uint32(b[len(b)-4])|uint32(b[len(b)-3])<<8|uint32(b[len(b)-2])<<16|uint32(b[len(b)-1])<<24) != us {
			t.Errorf("after Hold(%d) the file holds % x", us, b)
		}
	}
	if got, err := q.Target(); err != nil || got != 2 {
		t.Errorf("Target = %d, %v (offset 0 of the stand-in: the first request)", got, err)
	}
}
