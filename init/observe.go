package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/console"
	"github.com/hotpath-dev/hotpath/init/kernlog"
	"github.com/hotpath-dev/hotpath/init/logship"
	"github.com/hotpath-dev/hotpath/init/metrics"
	"github.com/hotpath-dev/hotpath/init/mgmt"
	"github.com/hotpath-dev/hotpath/init/nic"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/init/supervise"
	"golang.org/x/sys/unix"
)

// observer is the appliance's voice beyond the console: the management
// endpoint (metrics, health, report) and log shipping. Its methods are
// safe on a nil observer, so the boot sequence calls them without caring
// whether observation started.
type observer struct {
	con  *console.Console
	cfg  config.Config
	ship *logship.Shipper // nil without log.remote

	sup      atomic.Pointer[supervise.Supervisor] // set once the workload is started
	hwErrors *kernlog.Counter                     // run (main.go); nil leaves the hardware-error metrics out
	hostname atomic.Pointer[string]

	// timeline is the boot's timeline as it stands (machine.timelineNow);
	// nil leaves the phase metrics out.
	timeline func() []report.Phase

	mu    sync.Mutex
	steps []report.Step
	rep   *report.Report
}

// startObserver keeps the steps run so far and, when log.remote is set,
// starts collecting log lines for shipping: from here on every line the
// init writes to the console is also queued (the lines printed before,
// mounts and config, are not). They are sent once the network is up (bootSteps).
func startObserver(con *console.Console, cfg config.Config, steps []report.Step) *observer {
	o := &observer{con: con, cfg: cfg, steps: append([]report.Step(nil), steps...)}
	o.startShipping(cfg.LogRemote)
	return o
}

// startShipping creates the shipper for log.remote (nothing when it is
// empty) and hands it every line the init writes to the console.
func (o *observer) startShipping(logRemote string) {
	if logRemote == "" {
		return
	}
	remote, err := logship.ParseRemote(logRemote)
	if err != nil {
		o.con.Logf("log.remote: %v; shipping off", err)
		return
	}
	ship := logship.New(logship.Config{Remote: remote, Hostname: o.host, Logf: o.con.Logf})
	o.con.OnLine(func(line string) {
		if m, ok := logship.InitMessage(line); ok {
			m.ProcID = "1"
			ship.Send(m)
		}
	})
	o.ship = ship
	o.con.Logf("shipping logs to %s (RFC 5424 over %s) once the network is up", remote.Addr, remote.Network)
}

// configure takes the configuration as it is after user-data (the
// management port and log.remote may come from there). Shipping that
// began at boot with the baked log.remote keeps its collector: a
// different one from user-data is refused here, on the console, not
// silently.
func (o *observer) configure(cfg config.Config) {
	if o == nil {
		return
	}
	baked := o.cfg.LogRemote
	o.cfg = cfg
	switch {
	case cfg.LogRemote == baked:
	case o.ship == nil:
		o.startShipping(cfg.LogRemote)
	default:
		o.con.Logf("log.remote=%s (user-data) refused: shipping to %s began at boot; change the baked init.conf", cfg.LogRemote, baked)
		o.cfg.LogRemote = baked
	}
}

// host is the syslog HOSTNAME: the node name if one was set, else the
// primary address once the network is configured, else NILVALUE.
func (o *observer) host() string {
	if h := o.hostname.Load(); h != nil {
		return *h
	}
	return "-"
}

func (o *observer) step(r report.Step) {
	if o == nil {
		return
	}
	o.mu.Lock()
	o.steps = append(o.steps, r)
	o.mu.Unlock()
}

// setTimeline gives the metrics the boot's timeline.
func (o *observer) setTimeline(f func() []report.Phase) {
	if o != nil {
		o.timeline = f
	}
}

// stepDone takes the outcome of a background step in place of its
// "background" entry, so that the metrics show how it ended.
func (o *observer) stepDone(r report.Step) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, s := range o.steps {
		if s.Name == r.Name && s.Status == report.Background {
			o.steps[i] = r
			return
		}
	}
	o.steps = append(o.steps, r)
}

// supervise hands the observer the supervisor, whose snapshot /healthz
// and the workload metrics read from then on.
func (o *observer) supervise(s *supervise.Supervisor) {
	if o != nil {
		o.sup.Store(s)
	}
}

// Snapshot implements metrics.Workload: the supervisor's state, or a
// workload not started yet.
func (o *observer) Snapshot() metrics.WorkloadState {
	var s *supervise.Supervisor
	if o != nil {
		s = o.sup.Load()
	}
	if s == nil {
		return metrics.WorkloadState{State: supervise.StateDown}
	}
	return workloadState(s.Snapshot(), time.Now())
}

// workloadState is the supervisor's state as the metrics and /healthz
// see it at now.
func workloadState(st supervise.State, now time.Time) metrics.WorkloadState {
	w := metrics.WorkloadState{State: st.State, Running: st.PID != 0, PID: st.PID, Started: st.Started,
		Starts: st.Starts, Restarts: st.Restarts, Exits: st.Exits, Unresponsive: st.Unresponsive,
		CrashLoop: st.CrashLoop, Stopping: st.Stopping}
	if w.Running {
		w.Ready, w.Uptime = st.Ready, now.Sub(st.Started)
	}
	return w
}

// bootReport is what /report serves: the boot report as printed on the
// console (secret values already out of it: newBootReport), or false
// before it exists.
func (o *observer) bootReport() (any, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.rep, o.rep != nil
}

func (o *observer) report(rep report.Report) {
	if o == nil {
		return
	}
	o.mu.Lock()
	o.rep = &rep
	o.mu.Unlock()
}

// workloadOutput returns the workload's stdout and stderr. Without
// shipping both are one pipe to the console (Console.Passthrough). With
// it, each is its own pipe, copied to the console as it comes and shipped
// line by line with the stream's name as MSGID. Either way the output is
// counted towards the report's reprint and never taken for the init's own.
func (o *observer) workloadOutput(con *console.Console) (stdout, stderr *os.File) {
	if o == nil || o.ship == nil {
		out, err := con.Passthrough()
		if err != nil {
			con.Logf("workload output straight to the console: %v", err)
			return os.Stdout, os.Stdout
		}
		return out, out
	}
	app := path.Base(o.cfg.WorkloadPath)
	pipe := func(id string) *os.File {
		r, w, err := os.Pipe()
		if err != nil {
			o.con.Logf("workload %s pipe: %v; not shipped", id, err)
			return os.Stdout
		}
		go func() {
			// Whatever happens to shipping, the pipe is drained: a full
			// pipe would block the workload.
			defer func() {
				if p := recover(); p != nil {
					o.con.Logf("PANIC in workload %s shipping: %v; copying to the console only", id, p)
				}
				io.Copy(con.Writer(), r)
			}()
			logship.Copy(con.Writer(), r, func(line string) {
				m := logship.Message{Facility: logship.FacilityUser, Severity: logship.SeverityInfo,
					App: app, MsgID: id, Text: line}
				if pid := o.Snapshot().PID; pid != 0 {
					m.ProcID = strconv.Itoa(pid)
				}
				o.ship.Send(m)
			})
		}()
		return w // kept open for every restart of the workload
	}
	return pipe("stdout"), pipe("stderr")
}

// bootSteps are the boot steps of observation, run once the NIC is tuned and
// the network configured: "log-shipping" names this host for syslog by
// its primary address and starts sending the queued log lines;
// "mgmt-endpoint" starts the management endpoint (unless mgmt.port is 0).
func (o *observer) bootSteps(ctx context.Context, link *nic.Link, et nic.Ethtool) []boot.Step {
	if o == nil {
		return nil
	}
	return []boot.Step{
		{Name: "log-shipping", Apply: func(_ context.Context, d boot.Detail) error {
			if link != nil {
				if h := hostName(link.Name); h != "" {
					o.hostname.Store(&h)
				}
			}
			if o.ship == nil {
				return boot.Skip("log.remote not set: the console only")
			}
			go func() {
				defer recoverLog(o.con, "log shipper")
				o.ship.Run(ctx)
			}()
			d["remote"], d["hostname"] = o.cfg.LogRemote, o.host()
			return nil
		}},
		{Name: "mgmt-endpoint", Apply: func(_ context.Context, d boot.Detail) error {
			return o.serve(ctx, link, et, d)
		}},
	}
}

// serve starts the management endpoint. If its address cannot be bound
// now, the step fails and the endpoint keeps trying in the background.
func (o *observer) serve(ctx context.Context, link *nic.Link, et nic.Ethtool, d boot.Detail) error {
	if o.cfg.MgmtPort == 0 {
		return boot.Skip("mgmt.port=0")
	}
	if o.cfg.MgmtPort == o.cfg.WorkloadPort {
		return fmt.Errorf("mgmt.port %d is the workload's port", o.cfg.MgmtPort)
	}
	limits := mgmt.DefaultLimits
	limits.Stats = &mgmt.Stats{}
	reg := metrics.NewRegistry(o.metricsOptions(link, et))
	reg.MustRegister(limits.Stats.Collectors()...)
	h := mgmt.Handler(mgmt.Options{
		Gatherer: reg,
		Workload: o,
		Report:   o.bootReport,
		Logf:     o.con.Logf,
	})
	addr := net.JoinHostPort(o.cfg.MgmtAddr, strconv.Itoa(o.cfg.MgmtPort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		go func() {
			defer recoverLog(o.con, "management endpoint")
			mgmt.ListenAndServe(ctx, addr, h, limits, o.con.Logf)
		}()
		return fmt.Errorf("listen %s: %w (retrying in the background)", addr, err)
	}
	go func() {
		defer recoverLog(o.con, "management endpoint")
		if err := mgmt.Serve(ctx, ln, h, limits, o.con.Logf); err != nil {
			o.con.Logf("management endpoint: %v", err)
		}
	}()
	d["addr"] = ln.Addr().String()
	d["paths"] = "/metrics /healthz /report"
	return nil
}

func (o *observer) metricsOptions(link *nic.Link, et nic.Ethtool) metrics.Options {
	mo := metrics.Options{
		ProcRoot: procRoot, SysRoot: sysRoot,
		Workload: o,
		Boot: func() []report.Step {
			o.mu.Lock()
			defer o.mu.Unlock()
			return append([]report.Step(nil), o.steps...)
		},
		Timeline: o.timeline,
		Timex:    metrics.Adjtimex,
		Logf:     o.con.Logf,
	}
	if o.hwErrors != nil {
		mo.HardwareErrors = func() (kernlog.Snapshot, error) {
			err := o.hwErrors.Scan()
			return o.hwErrors.Snapshot(), err
		}
	}
	mo.PreviousBoot = func() *report.PreviousBoot {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.rep == nil {
			return nil
		}
		return o.rep.PreviousBoot
	}
	if o.ship != nil {
		mo.Log = func() metrics.LogStats {
			s := o.ship.Stats()
			return metrics.LogStats{Sent: s.Sent, Dropped: s.Dropped, Truncated: s.Truncated, QueuedBytes: s.QueuedBytes, Connected: s.Connected}
		}
	}
	if link == nil {
		return mo
	}
	mo.Device, mo.Driver = link.Name, link.Driver
	// Per-queue packets and bytes: virtio-net lists them only here from
	// Linux 6.10 on, no longer in ethtool -S.
	mo.QueueStats = metrics.DialGenetlink
	// The qdiscs' drops, next to the device's tx_dropped (netdev): with a
	// queueing qdisc a stopped queue's packets wait or drop there.
	mo.Qdiscs = qdiscStats
	// The NIC steps' own handle: it is a socket for ioctls, safe to share
	// between scrapes and the re-application after a device reset.
	if st, ok := et.(metrics.StatsReader); ok {
		mo.Stats = st
	} else {
		o.con.Logf("metrics: no ethtool statistics (no ethtool handle)")
	}
	// The queue interrupts are named once the channels are set.
	if irqs, err := nic.QueueIRQs(procRoot, *link); err == nil && len(irqs) > 0 {
		queues := map[string]int{}
		for _, q := range irqs {
			queues[q.Name] = q.Queue
		}
		mo.QueueIRQ = func(name string) (int, bool) { q, ok := queues[name]; return q, ok }
	}
	return mo
}

// hostName is the node name if one was set (uname), else the first IPv4
// address of the interface.
func hostName(iface string) string {
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		if n := unix.ByteSliceToString(u.Nodename[:]); n != "" && n != "(none)" && n != "localhost" {
			return n
		}
	}
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return ""
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if p, ok := a.(*net.IPNet); ok && p.IP.To4() != nil {
			return p.IP.String()
		}
	}
	return ""
}

// qdiscStats is nic.QdiscStats in the metrics package's terms.
func qdiscStats(dev string) ([]metrics.QdiscStat, error) {
	qs, err := nic.QdiscStats(dev)
	out := make([]metrics.QdiscStat, len(qs))
	for i, q := range qs {
		out[i] = metrics.QdiscStat{Kind: q.Kind, Handle: q.Handle, Parent: q.Parent, Drops: q.Drops, Requeues: q.Requeues, Backlog: q.Backlog}
	}
	return out, err
}
