package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hotpath-dev/hotpath/init/bond"
	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/bql"
	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/console"
	"github.com/hotpath-dev/hotpath/init/cpuset"
	"github.com/hotpath-dev/hotpath/init/kernlog"
	"github.com/hotpath-dev/hotpath/init/napi"
	"github.com/hotpath-dev/hotpath/init/netconf"
	"github.com/hotpath-dev/hotpath/init/nic"
	"github.com/hotpath-dev/hotpath/init/power"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/init/sysctl"
	"github.com/hotpath-dev/hotpath/init/tpm"
	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// sequence is the boot after the mounts and the configuration, in order.
// Each entry makes its steps when its turn comes, so it sees what the
// steps before it found (the NIC steps need the discovered link, the
// workload's CPUs need the queue count); each step's outcome goes into
// the boot report, and none stops the boot.
var sequence = []func(*machine) []boot.Step{
	loopbackSteps,       // lo up
	rlimitSteps,         // RLIMIT_NOFILE the workload inherits
	sysctlSteps,         // busy polling, default qdisc, reno, backlogs, sysctl.* keys
	workloadCPUSteps,    // workload.cpus within the online CPUs
	cpuPowerSteps,       // bare metal: performance governor or EPP, C-state latency through PM QoS (init/cpupower)
	previousBootSteps,   // a crashed previous boot's kernel log, from pstore (nitro.go)
	nicDiscoverSteps,    // the primary NIC and its ethtool socket
	numaSteps,           // NUMA nodes, the NIC's node, queue CPUs local first (nitro.go)
	bondCreateSteps,     // bond0 over the nic.match NICs, enslaved while down (physnic.go)
	nicTuneSteps,        // channels, spread, GRO, link up, moderation, qdisc, IRQs, XPS, RPS, NAPI deferral
	memberTuneSteps,     // the NIC steps for the other bond members; ice's DDP package (physnic.go)
	upperSteps,          // bond up with its members' link state, the VLAN on top (physnic.go)
	networkSteps,        // DHCP, static address, or none
	ipv6Steps,           // IPv6: DHCPv6, SLAAC, static or off (ipv6.go)
	imdsSteps,           // user-data and identity from IMDSv2, on EC2 (instance.go)
	userDataSteps,       // user-data as configuration
	userDataSysctlSteps, // sysctls user-data changed, applied again
	timeSyncSteps,       // NTP against Amazon Time Sync (time.ntp)
	privilegeSteps,      // the workload's uid, gid, capabilities
	observeSteps,        // log shipping, management endpoint (observe.go)
	powerButtonSteps,    // ACPI power button: orderly power off
	tpmSteps,            // PCR 4/7/12 and the event log's boot application, when there is a TPM
}

// machine is what the boot steps share: the file-system roots they read
// and write, the configuration, and what earlier steps found. Each field
// says who sets it; a step reads only what a step before it in sequence
// set.
type machine struct {
	// Set by run (main.go) before the sequence, or by the test.
	ctx                        context.Context
	con                        *console.Console
	procRoot, sysRoot, devRoot string
	requests                   chan<- request // shutdown requests (power button)
	// openNIC opens the system-call surface of the NIC steps; nil means
	// the running kernel's (ethtool socket, rtnetlink). Tests replace it.
	openNIC func() (nic.Ethtool, nic.Netlink, error)
	// cfg is loadConfig's (main.go); the user-data step replaces it.
	cfg config.Config
	obs *observer // startObserver (main.go); nil-safe: metrics, health, log shipping
	// inst is newInstance's (main.go); the per-instance steps fill it in
	// (instance.go).
	inst *instance

	settings []sysctl.Setting     // sysctlSteps (again in userDataSysctlSteps): the merged sysctls
	cpus     []int                // step workload-cpus: workload.cpus within the online CPUs
	online   []int                // step workload-cpus
	nrCPUs   int                  // step workload-cpus: nr_cpu_ids, the width of CPU masks
	link     *nic.Link            // step nic-discover; nil without a NIC
	ethtool  nic.Ethtool          // step nic-discover; nil without a NIC or ethtool
	tuner    *nic.Tuner           // step nic-discover; nil without a NIC or ethtool (nic-spread settles its CPUs)
	members  []nic.Link           // step nic-discover: the NICs in use (bond members), the primary first
	bond     *bond.Bond           // bondCreateSteps; nil without bond.mode
	netIf    string               // upperSteps: the interface the address goes on; "" is link's
	dhcp     *netconf.DHCPOptions // networkSteps, in DHCP mode (for the retry after boot)
	previous *report.PreviousBoot // step previous-boot; nil when pstore could not be read
	numa     *report.NUMA         // step numa-locality; nil without a NIC
	// hwErrors counts the hardware errors in the kernel log (run, after the
	// mounts); nil when /dev/kmsg could not be opened, and in tests.
	hwErrors *kernlog.Counter

	// netDeadline is when the boot's network steps give up together
	// (networkDeadline: net.deadline after the first of them).
	netDeadline time.Time
	// dhcpRetrying is set while net-dhcp-retry runs: its client holds
	// an AF_PACKET socket the IPv6 step's verify must not count.
	dhcpRetrying atomic.Bool

	// clock is CLOCK_BOOTTIME in milliseconds, the timeline's clock; nil
	// is the kernel's (bootClock). Tests replace it. initMillis is when
	// the init started (main), 0 when unknown (tests).
	clock      func() float64
	initMillis float64

	// mu guards results and timeline: background steps (background.go)
	// write them after the boot, while the report and metrics read them.
	mu       sync.Mutex
	results  []report.Step  // run: every step's outcome, in order, for the report
	timeline []report.Phase // run, background, the report: the boot phase by phase
}

// run runs one step, logs it, and keeps its result and its phase for the
// report.
func (m *machine) run(s boot.Step) report.Step {
	start := m.now()
	r := boot.RunOne(m.ctx, s)
	end := m.now()
	logStep(m.con, r)
	m.mu.Lock()
	m.openTimeline(start)
	m.results = append(m.results, r)
	m.timeline = append(m.timeline, report.Phase{Name: report.StepPhase(r.Name), Start: start, End: end})
	m.mu.Unlock()
	m.obs.step(r)
	return r
}

// boot runs the sequence; a step marked Background starts in its own
// goroutine and the sequence goes on (background.go).
func (m *machine) boot() {
	for _, mk := range sequence {
		m.runSteps(mk(m))
	}
}

// runSteps runs steps in order, starting those marked Background.
func (m *machine) runSteps(steps []boot.Step) {
	for _, s := range steps {
		if s.Background {
			m.background(s, nil)
			continue
		}
		m.run(s)
	}
}

// workloadCPUs is the CPU list the workload gets: the spread decision's
// when there is a NIC, else workload.cpus within the online CPUs.
func (m *machine) workloadCPUs() []int {
	if m.tuner != nil {
		return m.tuner.WorkloadCPUs()
	}
	return m.cpus
}

func logStep(con *console.Console, r report.Step) {
	switch r.Status {
	case report.Applied:
		con.Logf("step %s: applied %v", r.Name, r.Detail)
	case report.Skipped:
		con.Logf("step %s: skipped: %s", r.Name, r.Reason)
	default:
		con.Logf("step %s: FAILED: %s", r.Name, r.Error)
	}
}

func skipStep(name, reason string) boot.Step {
	return boot.Step{Name: name, Apply: func(context.Context, boot.Detail) error { return boot.Skip("%s", reason) }}
}

func loopbackSteps(*machine) []boot.Step {
	return []boot.Step{{Name: "loopback", Apply: func(context.Context, boot.Detail) error {
		return nic.NewNetlink().LinkSetUp("lo")
	}, Verify: func(context.Context, boot.Detail) error {
		up, err := nic.NewNetlink().LinkIsUp("lo")
		if err == nil && !up {
			err = errors.New("lo is down")
		}
		return err
	}}}
}

// rlimitSteps raise the open-file limit that the workload inherits: one
// descriptor per connection.
func rlimitSteps(*machine) []boot.Step {
	const n = 1 << 20
	return []boot.Step{{Name: "rlimit-nofile", Apply: func(_ context.Context, d boot.Detail) error {
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: n}); err != nil {
			return fmt.Errorf("setrlimit nofile %d: %w", n, err)
		}
		d["nofile"] = strconv.Itoa(n)
		return nil
	}, Verify: func(context.Context, boot.Detail) error {
		var r unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
			return err
		}
		if r.Cur != n {
			return fmt.Errorf("nofile is %d", r.Cur)
		}
		return nil
	}}}
}

func sysctlSteps(m *machine) []boot.Step {
	m.settings = sysctl.Merge(sysctl.Defaults(m.cfg.BusyPoll, m.cfg.BusyRead), m.cfg.SysctlNames(), m.cfg.Sysctls)
	return sysctl.Steps(m.procRoot, m.settings)
}

// workloadCPUSteps settle the workload's CPUs: workload.cpus ("all": every
// online CPU) within the online CPUs. CPUs that are not online are dropped
// and named in the report (the image build already refused CPUs that no
// instance of this kernel can have); if none is left, every online CPU.
func workloadCPUSteps(m *machine) []boot.Step {
	return []boot.Step{{Name: "workload-cpus", Apply: func(_ context.Context, d boot.Detail) error {
		online, err := cpuset.Online(m.sysRoot)
		if err != nil || len(online) == 0 {
			m.online, m.cpus, m.nrCPUs = []int{0}, []int{0}, 1
			return fmt.Errorf("online cpus: %v; assuming cpu 0", err)
		}
		m.online = online
		m.nrCPUs, err = cpuset.Possible(m.sysRoot)
		if err != nil {
			m.nrCPUs = online[len(online)-1] + 1
		}
		d["online"] = cpuset.FormatList(online)
		d["requested"] = m.cfg.WorkloadCPUs
		if m.cfg.WorkloadCPUs == "all" {
			m.cpus = online
			d["cpus"] = cpuset.FormatList(m.cpus)
			return nil
		}
		want, _ := cpuset.ParseList(m.cfg.WorkloadCPUs) // validated by config
		kept, dropped := intersect(want, online)
		if len(dropped) > 0 {
			d["not_online"] = cpuset.FormatList(dropped)
			m.con.Logf("workload.cpus=%s: cpus %s are not online (online: %s)", m.cfg.WorkloadCPUs,
				cpuset.FormatList(dropped), cpuset.FormatList(online))
		}
		if len(kept) == 0 {
			m.cpus = online
			d["cpus"] = cpuset.FormatList(m.cpus)
			return fmt.Errorf("none of workload.cpus=%s is online (online: %s); the workload gets every online cpu",
				m.cfg.WorkloadCPUs, cpuset.FormatList(online))
		}
		m.cpus = kept
		d["cpus"] = cpuset.FormatList(m.cpus)
		return nil
	}}}
}

// intersect splits want into the CPUs in have and the others.
func intersect(want, have []int) (kept, dropped []int) {
	for _, c := range want {
		if slices.Contains(have, c) {
			kept = append(kept, c)
		} else {
			dropped = append(dropped, c)
		}
	}
	return kept, dropped
}

// nicDiscoverSteps find the primary NIC and open its ethtool socket, inside
// the step (so under RunOne's recover and timing), and make the tuner the
// NIC steps that follow use. A NIC whose ethtool cannot be opened is
// found, named in the report, and fails the step in verify.
func nicDiscoverSteps(m *machine) []boot.Step {
	var openErr error
	return []boot.Step{{Name: "nic-discover", Apply: func(_ context.Context, d boot.Detail) error {
		l, err := m.discoverNICs(d)
		if err != nil {
			return boot.Skip("%v", err)
		}
		m.link = &l
		d["name"], d["driver"], d["device"] = l.Name, l.Driver, l.Device
		open := m.openNIC
		if open == nil {
			open = openKernelNIC
		}
		et, nl, err := open()
		if err != nil {
			openErr = err
			return nil
		}
		m.ethtool = et
		m.tuner = &nic.Tuner{SysRoot: m.sysRoot, ProcRoot: m.procRoot, Link: l, CPUs: m.cpus, NrCPUs: m.nrCPUs,
			Ethtool: et, Netlink: nl, Opt: m.cfg.NIC, DefaultQdisc: m.defaultQdisc()}
		return nil
	}, Verify: func(context.Context, boot.Detail) error {
		if openErr != nil {
			return fmt.Errorf("ethtool: %w", openErr)
		}
		return nil
	}}}
}

// openKernelNIC opens the running kernel's ethtool socket and rtnetlink.
func openKernelNIC() (nic.Ethtool, nic.Netlink, error) {
	et, err := ethtool.NewEthtool()
	if err != nil {
		return nil, nil, err
	}
	return et, nic.NewNetlink(), nil
}

// nicTuneSteps tune the NIC nic-discover found for the workload's CPUs;
// without one, every NIC step is in the report, skipped with the reason.
func nicTuneSteps(m *machine) []boot.Step {
	switch {
	case m.link == nil:
		return append(nic.SkippedSteps("no primary network interface"), skipStep(bql.StepName, "no primary network interface"), skipStep(napi.StepName, "no primary network interface"))
	case m.tuner == nil:
		return append(nic.SkippedSteps("no ethtool netlink/ioctl socket"), skipStep(bql.StepName, "no ethtool netlink/ioctl socket"), skipStep(napi.StepName, "no ethtool netlink/ioctl socket"))
	}
	name := func() string { return m.link.Name }
	return append(m.tuner.Steps(), bql.Step(m.sysRoot, name, bqlInert(m.cfg.NIC.BQL, m.tuner.DefaultQdisc)), napi.Step(m.sysRoot, name, napiSettings(m.cfg)))
}

// bqlInert says whether nic-bql makes the byte queue limits inert:
// nic.bql=inert, or auto with noqueue under mq (qdisc, the kind
// net.core.default_qdisc names), where a queue BQL stops drops packets.
func bqlInert(b config.BQL, qdisc string) bool {
	return b == config.BQLInert || (b == config.BQLAuto && qdisc == "noqueue")
}

// napiSettings is step 10 as the configuration asks for it: the step's
// and the workload environment's one source.
func napiSettings(cfg config.Config) napi.Settings {
	return napi.Settings{DeferHardIRQs: cfg.NIC.DeferHardIRQs, GROFlushTimeout: cfg.NIC.GROFlushTimeout, Prefer: cfg.NIC.PreferBusyPoll}
}

// defaultQdisc is net.core.default_qdisc as the kernel has it after the
// sysctl steps (what mq's children are created with); "" when unreadable.
func (m *machine) defaultQdisc() string {
	b, err := os.ReadFile(filepath.Join(m.procRoot, "sys", "net", "core", "default_qdisc"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// networkSteps configure the address: DHCP (retried in the background
// after boot if it fails here), a static address, or nothing.
func networkSteps(m *machine) []boot.Step {
	switch {
	case m.cfg.Net.Mode == config.NetOff:
		return []boot.Step{skipStep("net", "net.mode=off")}
	case m.link == nil:
		return []boot.Step{skipStep("net", "no primary network interface")}
	case m.cfg.Net.Mode == config.NetStatic:
		return []boot.Step{netconf.StaticStep(m.netName(),
			netconf.Lease{Addr: m.cfg.Net.Address, Gateway: m.cfg.Net.Gateway, MTU: m.cfg.Net.MTU}, m.procRoot)}
	}
	m.dhcp = &netconf.DHCPOptions{
		Interface: m.netName(), Timeout: m.cfg.Net.DHCPTimeout, Retries: m.cfg.Net.DHCPRetries,
		BackoffMax: m.cfg.Net.DHCPBackoffMax, MTU: m.cfg.Net.MTU,
		ResolvConf: "/etc/resolv.conf", ProcRoot: m.procRoot,
		Log: log.New(m.con, "dhclient: ", 0),
	}
	return []boot.Step{boot.Before(m.networkDeadline(), netconf.DHCPStep(*m.dhcp))}
}

// networkDeadline is when the boot's network steps give up together
// (net.deadline after the first of them): past it the step fails with its
// reason, the workload starts, and DHCP goes on in the background.
func (m *machine) networkDeadline() time.Time {
	if m.netDeadline.IsZero() {
		m.netDeadline = time.Now().Add(m.cfg.Net.Deadline)
	}
	return m.netDeadline
}

// powerButtonSteps watch the ACPI power button (EC2 stop/terminate, QEMU
// system_powerdown): a press is an orderly power off.
func powerButtonSteps(m *machine) []boot.Step {
	return []boot.Step{{Name: "power-button", Apply: func(_ context.Context, d boot.Detail) error {
		devs, err := power.Find(m.sysRoot, m.devRoot)
		if err != nil {
			return boot.Skip("%v", err)
		}
		if len(devs) == 0 {
			return boot.Skip("no input device reports KEY_POWER (kernel without CONFIG_INPUT_EVDEV or ACPI button?)")
		}
		w := power.Watch(m.ctx, devs, func(dev power.Device) {
			select {
			case m.requests <- request{"power button (" + dev.Desc + ")", false}:
			default: // a shutdown is already pending
			}
		}, m.con.Logf)
		if len(w) == 0 {
			return fmt.Errorf("could not open any of %d power button devices", len(devs))
		}
		for _, dev := range w {
			d[dev.Name] = dev.Desc
		}
		return nil
	}}}
}

// tpmSteps read what the firmware measured (init/tpm).
func tpmSteps(m *machine) []boot.Step { return []boot.Step{tpm.Step(m.sysRoot)} }

// observeSteps start log shipping and the management endpoint once the
// network is configured (observe.go).
func observeSteps(m *machine) []boot.Step {
	m.obs.configure(m.cfg)
	return m.obs.bootSteps(m.ctx, m.link, m.ethtool)
}
