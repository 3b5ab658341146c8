package metrics

import (
	"strconv"
	"time"

	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/prometheus/client_golang/prometheus"
)

// WorkloadState is the workload as the supervisor sees it.
type WorkloadState struct {
	State    string        // the supervisor's word for it: starting, ready, running, down, crash-loop
	Running  bool          // a workload process exists
	Ready    bool          // it accepted a connection since it started and answers the liveness probe
	PID      int           // of the running process, 0 if none
	Started  time.Time     // when the running (or last) process started
	Uptime   time.Duration // since Started while Running, else 0
	Starts   int           // processes started so far
	Restarts int           // restarts scheduled after an exit
	Exits    int           // processes that exited, killed or not
	// Unresponsive counts the processes the liveness probe had killed.
	Unresponsive int
	CrashLoop    bool // a crash loop was reported and the workload has not been ready since
	Stopping     bool // shutdown began
}

// Workload reports the workload's state; /healthz and the workload
// metrics read it. The init's is the supervisor's own snapshot, so that
// what the liveness probe finds reaches /healthz.
type Workload interface {
	Snapshot() WorkloadState
}

// WorkloadFunc adapts a function to Workload.
type WorkloadFunc func() WorkloadState

// Snapshot implements Workload.
func (f WorkloadFunc) Snapshot() WorkloadState { return f() }

var (
	workloadUp = prometheus.NewDesc(Namespace+"_workload_up",
		"1 if the workload process is running.", nil, nil)
	workloadReady = prometheus.NewDesc(Namespace+"_workload_ready",
		"1 if the running workload has accepted a connection on its port (what /healthz answers 200 for).", nil, nil)
	workloadStarts = prometheus.NewDesc(Namespace+"_workload_starts_total",
		"Workload processes started.", nil, nil)
	workloadRestarts = prometheus.NewDesc(Namespace+"_workload_restarts_total",
		"Restarts of the workload after it exited.", nil, nil)
	workloadExits = prometheus.NewDesc(Namespace+"_workload_exits_total",
		"Workload processes that exited (a crash, an exit, or a kill by the liveness probe).", nil, nil)
	workloadUnresponsive = prometheus.NewDesc(Namespace+"_workload_unresponsive_total",
		"Workload processes killed because they stopped answering the liveness probe.", nil, nil)
	workloadUptime = prometheus.NewDesc(Namespace+"_workload_uptime_seconds",
		"Seconds since the running workload process started; 0 while none runs.", nil, nil)
	workloadCrashLoop = prometheus.NewDesc(Namespace+"_workload_crash_loop",
		"1 while a reported crash loop lasts (until the workload is ready again).", nil, nil)
)

type workload struct{ w Workload }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c *workload) collect(ch chan<- prometheus.Metric) error {
	s := c.w.Snapshot()
	up := 0.0
	if s.Running {
		up = s.Uptime.Seconds()
	}
	ch <- prometheus.MustNewConstMetric(workloadUp, prometheus.GaugeValue, b2f(s.Running))
	ch <- prometheus.MustNewConstMetric(workloadReady, prometheus.GaugeValue, b2f(s.Running && s.Ready))
	ch <- prometheus.MustNewConstMetric(workloadStarts, prometheus.CounterValue, float64(s.Starts))
	ch <- prometheus.MustNewConstMetric(workloadRestarts, prometheus.CounterValue, float64(s.Restarts))
	ch <- prometheus.MustNewConstMetric(workloadExits, prometheus.CounterValue, float64(s.Exits))
	ch <- prometheus.MustNewConstMetric(workloadUnresponsive, prometheus.CounterValue, float64(s.Unresponsive))
	ch <- prometheus.MustNewConstMetric(workloadUptime, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(workloadCrashLoop, prometheus.GaugeValue, b2f(s.CrashLoop))
	return nil
}

// StepState is one boot step's outcome.
type StepState = report.Step

var (
	bootStepStatus = prometheus.NewDesc(Namespace+"_boot_step_status",
		"Outcome of each boot step: 1 for the step's status (applied, skipped, failed, background while it runs after boot), 0 for the others.",
		[]string{"step", "status"}, nil)
	bootStepSeconds = prometheus.NewDesc(Namespace+"_boot_step_duration_seconds",
		"Time a boot step took (apply and verify).", []string{"step"}, nil)
	bootStatuses = []report.Status{report.Applied, report.Skipped, report.Failed, report.Background}
)

type bootSteps struct{ steps func() []StepState }

func (c *bootSteps) collect(ch chan<- prometheus.Metric) error {
	seen := map[string]bool{}
	for _, s := range c.steps() {
		if seen[s.Name] {
			continue // a step run twice: its first outcome stands
		}
		seen[s.Name] = true
		for _, st := range bootStatuses {
			ch <- prometheus.MustNewConstMetric(bootStepStatus, prometheus.GaugeValue, b2f(s.Status == st), s.Name, string(st))
		}
		ch <- prometheus.MustNewConstMetric(bootStepSeconds, prometheus.GaugeValue, s.Millis/1000, s.Name)
	}
	return nil
}

var (
	bootPhaseStart = prometheus.NewDesc(Namespace+"_boot_phase_start_seconds",
		"When each boot phase began, in seconds since the kernel started (CLOCK_BOOTTIME): kernel, init, each step, workload-exec, ready, and the background steps.",
		[]string{"phase", "background"}, nil)
	bootPhaseEnd = prometheus.NewDesc(Namespace+"_boot_phase_end_seconds",
		"When each boot phase ended, in seconds since the kernel started; absent while a background step still runs.",
		[]string{"phase", "background"}, nil)
)

type bootTimeline struct{ phases func() []report.Phase }

func (c *bootTimeline) collect(ch chan<- prometheus.Metric) error {
	seen := map[string]bool{}
	for _, p := range c.phases() {
		if seen[p.Name] {
			continue // a step run twice: its first phase stands
		}
		seen[p.Name] = true
		bg := strconv.FormatBool(p.Background)
		ch <- prometheus.MustNewConstMetric(bootPhaseStart, prometheus.GaugeValue, p.Start/1000, p.Name, bg)
		if p.End >= 0 {
			ch <- prometheus.MustNewConstMetric(bootPhaseEnd, prometheus.GaugeValue, p.End/1000, p.Name, bg)
		}
	}
	return nil
}

// LogStats are the log shipper's counters.
type LogStats struct {
	Sent, Dropped, Truncated uint64
	QueuedBytes              int
	Connected                bool
}

var (
	logSent = prometheus.NewDesc(Namespace+"_log_messages_sent_total",
		"Log messages written to the remote syslog collector.", nil, nil)
	logDropped = prometheus.NewDesc(Namespace+"_log_messages_dropped_total",
		"Log messages dropped because the shipping buffer was full (the console still had them).", nil, nil)
	logTruncated = prometheus.NewDesc(Namespace+"_log_messages_truncated_total",
		"Log messages shortened to the transport's size limit.", nil, nil)
	logQueued = prometheus.NewDesc(Namespace+"_log_queue_bytes",
		"Bytes of log messages waiting to be shipped.", nil, nil)
	logConnected = prometheus.NewDesc(Namespace+"_log_connected",
		"1 if the shipper holds a working connection (TCP) or socket (UDP) to the collector.", nil, nil)
)

type logShipping struct{ stats func() LogStats }

func (c *logShipping) collect(ch chan<- prometheus.Metric) error {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(logSent, prometheus.CounterValue, float64(s.Sent))
	ch <- prometheus.MustNewConstMetric(logDropped, prometheus.CounterValue, float64(s.Dropped))
	ch <- prometheus.MustNewConstMetric(logTruncated, prometheus.CounterValue, float64(s.Truncated))
	ch <- prometheus.MustNewConstMetric(logQueued, prometheus.GaugeValue, float64(s.QueuedBytes))
	ch <- prometheus.MustNewConstMetric(logConnected, prometheus.GaugeValue, b2f(s.Connected))
	return nil
}

// Timex is the kernel clock's discipline state, as adjtimex(2) reports it.
type Timex struct {
	Offset   time.Duration // estimated offset from true time
	MaxError time.Duration
	Synced   bool // STA_UNSYNC clear: something (chrony, NTP) disciplines the clock
}

var (
	timexOffset = prometheus.NewDesc(Namespace+"_clock_offset_seconds",
		"The kernel's estimate of the clock's offset (adjtimex offset).", nil, nil)
	timexMaxError = prometheus.NewDesc(Namespace+"_clock_maxerror_seconds",
		"The kernel's maximum error bound of the clock (adjtimex maxerror).", nil, nil)
	timexSynced = prometheus.NewDesc(Namespace+"_clock_synchronized",
		"1 if the clock is disciplined by a time service (adjtimex status without STA_UNSYNC).", nil, nil)
)

type timex struct{ read func() (Timex, error) }

func (c *timex) collect(ch chan<- prometheus.Metric) error {
	t, err := c.read()
	if err != nil {
		return err
	}
	ch <- prometheus.MustNewConstMetric(timexOffset, prometheus.GaugeValue, t.Offset.Seconds())
	ch <- prometheus.MustNewConstMetric(timexMaxError, prometheus.GaugeValue, t.MaxError.Seconds())
	ch <- prometheus.MustNewConstMetric(timexSynced, prometheus.GaugeValue, b2f(t.Synced))
	return nil
}
