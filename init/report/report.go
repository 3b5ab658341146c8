// Package report defines the machine-readable lines the init prints on the
// serial console: one boot report once the workload accepts connections, and
// an event line for everything that happens to the workload afterwards.
//
// The console is the only window into the appliance (there is no shell, and
// EC2's get-console-output reads it), so both the end-to-end tests and an
// operator parse these lines; that is why the types live in their own package
// with no dependencies: a test imports it to decode what the guest printed.
package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/hotpath-dev/hotpath/init/kernlog"
)

// Line prefixes. Each line is the prefix followed by one JSON object.
const (
	ReportPrefix = "HOTPATH-REPORT "
	EventPrefix  = "HOTPATH-EVENT "
)

// Version is the schema version of Report; bump it on incompatible changes.
const Version = 1

// Status is the outcome of one boot step.
type Status string

const (
	Applied Status = "applied" // the step changed the system and its verification passed
	Skipped Status = "skipped" // the step did not apply here; Reason says why
	Failed  Status = "failed"  // apply or verify failed; Error says how
	// Background: the step goes on after the workload started (IPv6 when
	// IPv4 serves: its address serves when it arrives); its outcome
	// comes later in an EventStepDone line, the metrics and the timeline.
	Background Status = "background"
)

// Step is the result of one boot step.
type Step struct {
	Name   string  `json:"name"`
	Status Status  `json:"status"`
	Reason string  `json:"reason,omitempty"` // why it was skipped
	Error  string  `json:"error,omitempty"`  // why it failed
	Millis float64 `json:"ms"`               // time spent in apply and verify
	// Detail holds what the step did, for a reader: "channels": "4", ...
	Detail map[string]string `json:"detail,omitempty"`
}

// Report is the boot report, printed once when the workload is ready.
type Report struct {
	Version int    `json:"version"`
	Kernel  string `json:"kernel"` // uname release
	CPUs    int    `json:"cpus"`
	Steps   []Step `json:"steps"`
	// ReadyMillis is the time from kernel start (CLOCK_BOOTTIME) to the
	// workload accepting connections.
	ReadyMillis int64 `json:"ready_ms"`
	// ReadyError is set (and ReadyMillis is -1) when the workload did not
	// accept within the ready timeout or could not be started; the report
	// is printed anyway so that a reader is not left waiting.
	ReadyError string `json:"ready_error,omitempty"`
	// Workload is the workload's command line and environment additions
	// (HOTPATH_CPUS, HOTPATH_PORT) as started; the values in its
	// arguments are hidden (config.RedactArgs) unless report.secrets=show.
	Workload *Workload `json:"workload,omitempty"`
	// Config is the effective init configuration (file plus command
	// line), the values of secret keys hidden (config.ReportMap) unless
	// report.secrets=show; Facts.Cmdline likewise.
	Config map[string]string `json:"config"`
	// Unknown lists configuration keys that were given but not understood.
	Unknown []string `json:"unknown,omitempty"`
	// Sources maps each Config key to where its value came from
	// (FromDefault, FromFile, FromCmdline, FromUserData); UserData,
	// Instance, Time and Privileges are described in instance.go.
	Sources    map[string]string `json:"config_sources,omitempty"`
	UserData   *UserData         `json:"user_data,omitempty"`
	Instance   *Instance         `json:"instance,omitempty"`
	Time       *TimeSync         `json:"time,omitempty"`
	Privileges *Privileges       `json:"privileges,omitempty"`
	// Facts are observations of the running system, read after all steps, so
	// that a test outside the guest can check the policy held.
	Facts Facts `json:"facts"`
	// CRNG is when the kernel's random number generator became ready.
	CRNG *CRNG `json:"crng,omitempty"`
	// PreviousBoot is what a crash of the boot before left (nitro.go);
	// nil when pstore could not be read.
	PreviousBoot *PreviousBoot `json:"previous_boot,omitempty"`
	// HardwareErrors counts the hardware errors the kernel logged during
	// this boot so far (machine checks, APEI GHES records, PCIe AER, memory
	// failures), with the last ones; nil when the kernel log could not be
	// read. /metrics has the live counts.
	HardwareErrors *kernlog.Snapshot `json:"hardware_errors,omitempty"`
	// NUMA is the NUMA topology and the NIC's node (nitro.go); nil
	// without a NIC.
	NUMA *NUMA `json:"numa,omitempty"`
	// Timeline is the boot phase by phase on the kernel's clock: kernel
	// start to init, init to its first step, each step, the workload's
	// exec, its first accept (ready), and the background steps (timeline.go).
	Timeline []Phase `json:"timeline,omitempty"`
	// Compact marks a report printed again to stay within the console's
	// last 64 KiB (EC2 get-console-output): step details, facts and the
	// configuration are left out; the first report has them.
	Compact bool `json:"compact,omitempty"`
	// Truncated says what the console cut to keep the line within its
	// bound (a string or a list from outside, or the whole report); empty
	// when nothing was cut. Only the console sets it.
	Truncated string `json:"truncated,omitempty"`
}

// Compacted returns r without step details, facts, configuration and
// timeline: a few hundred bytes per step, enough to see what failed and
// whether the workload became ready.
func (r Report) Compacted() Report {
	c := r
	c.Compact = true
	c.Config = nil
	c.Facts = Facts{}
	c.Timeline = nil // ~60 bytes a phase: the first report and /metrics have it
	if he := r.HardwareErrors; he != nil && len(he.Last) > 1 {
		// The counts and the latest line; the first report has the others.
		h := *he
		h.Last = h.Last[len(h.Last)-1:]
		c.HardwareErrors = &h
	}
	c.Steps = make([]Step, len(r.Steps))
	for i, s := range r.Steps {
		s.Detail = nil
		c.Steps[i] = s
	}
	return c
}

// CRNG is when the kernel's CRNG became ready (nothing at boot waits for
// it; this says how long a workload that needs it would have waited).
type CRNG struct {
	ReadyAtInit bool  `json:"ready_at_init"` // already ready when the init started
	ReadyMillis int64 `json:"ready_ms"`      // CLOCK_BOOTTIME ms; -1: not yet at report time
}

// Workload is how the init started the workload.
type Workload struct {
	Path string   `json:"path"`
	Args []string `json:"args"`
	CPUs string   `json:"cpus"` // HOTPATH_CPUS
	Port int      `json:"port"` // HOTPATH_PORT
	PID  int      `json:"pid,omitempty"`
}

// Facts are read from /proc and /sys after the boot steps ran.
type Facts struct {
	// Vulnerabilities maps each file in /sys/devices/system/cpu/vulnerabilities
	// to its content.
	Vulnerabilities map[string]string `json:"vulnerabilities"`
	Netfilter       bool              `json:"netfilter"` // /proc/net/netfilter exists
	Audit           bool              `json:"audit"`     // the kernel has audit support (/proc/self/loginuid exists)
	Modules         bool              `json:"modules"`   // loadable modules supported (/proc/modules exists)
	Seccomp         bool              `json:"seccomp"`   // "Seccomp:" present in /proc/self/status
	// Cmdline is /proc/cmdline.
	Cmdline string `json:"cmdline"`
	// Sysctls maps each sysctl the init set (dotted name) to its value read back.
	Sysctls map[string]string `json:"sysctls"`
	// PacketSockets is the number of AF_PACKET sockets open (/proc/net/packet).
	PacketSockets int `json:"packet_sockets"`
	// NIC describes the primary network interface; nil if none was found.
	NIC *NIC `json:"nic,omitempty"`
}

// NIC is what the init observed of the primary network interface.
type NIC struct {
	Name     string   `json:"name"`
	Driver   string   `json:"driver"`
	MTU      int      `json:"mtu"`
	Addrs    []string `json:"addrs"`    // CIDR notation
	Lifetime string   `json:"lifetime"` // "forever" or the valid_lft of the primary address in seconds
	Gateway  string   `json:"gateway,omitempty"`
	RxQueues int      `json:"rx_queues"`
	TxQueues int      `json:"tx_queues"`
	// IRQs lists each queue interrupt with the CPU list it is bound to.
	IRQs []IRQ `json:"irqs"`
	// XPS maps a tx queue ("tx-0") to its xps_cpus mask as read back.
	XPS map[string]string `json:"xps"`
	// RPS maps an rx queue ("rx-0") to its rps_cpus mask as read back.
	RPS map[string]string `json:"rps"`
	// Qdisc is the root qdisc kind ("mq") and Children the kinds under it.
	Qdisc    string   `json:"qdisc"`
	Children []string `json:"qdisc_children"`
	// TxDropped is the device's tx_dropped when the report was made
	// (statistics/tx_dropped): under noqueue, packets the stack handed to
	// a stopped queue ("Virtual device ... asks to queue packet!").
	// QdiscDrops is the root qdisc's drops (0 under noqueue, which counts
	// nothing). Both keep counting in the metrics
	// (hotpath_netdev_tx_dropped_total, hotpath_qdisc_drops_total).
	TxDropped  uint64 `json:"tx_dropped"`
	QdiscDrops uint64 `json:"qdisc_drops"`
	GRO        string `json:"gro"` // "on", "off" or "unknown"
	// Coalesce holds the interrupt moderation settings read back.
	Coalesce map[string]string `json:"coalesce,omitempty"`
}

// IRQ is one queue interrupt and its affinity.
type IRQ struct {
	IRQ      int    `json:"irq"`
	Name     string `json:"name"` // as in /proc/interrupts, e.g. "virtio0-input.0"
	Queue    int    `json:"queue"`
	Affinity string `json:"affinity"` // smp_affinity_list read back
}

// Event kinds.
const (
	EventStart     = "workload-start"   // the workload process started (PID)
	EventReady     = "workload-ready"   // the workload accepts connections
	EventExit      = "workload-exit"    // the workload exited (Detail: status)
	EventRestart   = "workload-restart" // a restart is scheduled after Backoff
	EventCrashLoop = "crash-loop"       // too many exits within the window
	// EventUnresponsive: the liveness probe failed too often; the workload
	// is killed and restarted (Detail: the last failure).
	EventUnresponsive = "workload-unresponsive"
	EventShutdown     = "shutdown"    // an orderly shutdown began (Detail: why)
	EventPowerOff     = "poweroff"    // the last line before power off / reboot
	EventNetBound     = "net-bound"   // a background DHCP attempt got the lease the boot did not (Detail: lease)
	EventLink         = "link"        // the primary link lost or regained carrier (Detail: down/up)
	EventNICReapply   = "nic-reapply" // NIC steps run again (Detail: why; Steps: results)
	EventCRNGReady    = "crng-ready"  // the kernel's CRNG became ready after the init started
	// EventStepDone: a background step finished (Steps: its outcome;
	// Phase: its span on the timeline).
	EventStepDone = "step-done"
)

// Event is one thing that happened after boot.
type Event struct {
	Kind string `json:"kind"`
	// Millis is CLOCK_BOOTTIME in milliseconds.
	Millis    int64  `json:"ms"`
	PID       int    `json:"pid,omitempty"`
	Detail    string `json:"detail,omitempty"`
	BackoffMS int64  `json:"backoff_ms,omitempty"`
	Exits     int    `json:"exits,omitempty"` // exits counted within the crash-loop window
	// Steps are the results of boot steps run again after boot (NIC steps
	// after a link change or a late DHCP lease).
	Steps []Step `json:"steps,omitempty"`

	// Phase is the span of the background step of an EventStepDone.
	Phase *Phase `json:"phase,omitempty"`

	// Time is the NTP state of an EventTimeSync event.
	Time *TimeSync `json:"time,omitempty"`

	// Truncated says what the console cut (see Report.Truncated).
	Truncated string `json:"truncated,omitempty"`
}

// Format renders v (a Report or an Event) as one console line, newline included.
func Format(prefix string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	out := make([]byte, 0, len(prefix)+len(b)+1)
	out = append(out, prefix...)
	out = append(out, b...)
	return append(out, '\n'), nil
}

// Parse scans console output and returns the boot reports and events in it.
// Lines may carry console noise before the prefix (kernel messages interleave
// on a serial console), so the prefix is searched anywhere in the line.
func Parse(r io.Reader) ([]Report, []Event, error) {
	var reports []Report
	var events []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if i := strings.Index(line, ReportPrefix); i >= 0 {
			var rep Report
			if err := json.Unmarshal([]byte(line[i+len(ReportPrefix):]), &rep); err != nil {
				return reports, events, fmt.Errorf("report: parse boot report: %w", err)
			}
			reports = append(reports, rep)
		} else if i := strings.Index(line, EventPrefix); i >= 0 {
			var ev Event
			if err := json.Unmarshal([]byte(line[i+len(EventPrefix):]), &ev); err != nil {
				return reports, events, fmt.Errorf("report: parse event: %w", err)
			}
			events = append(events, ev)
		}
	}
	return reports, events, sc.Err()
}

// Step returns the step named name, or false.
func (r *Report) Step(name string) (Step, bool) {
	for _, s := range r.Steps {
		if s.Name == name {
			return s, true
		}
	}
	return Step{}, false
}
