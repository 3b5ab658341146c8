package config

import "time"

// Supervise is how the workload is restarted and stopped (the supervise.*
// keys and shutdown.grace). Package supervise takes it as its Policy, so a
// key added here reaches the supervisor without a copy in between.
type Supervise struct {
	BackoffMin     time.Duration // supervise.backoff_min: the first restart's wait
	BackoffMax     time.Duration // supervise.backoff_max: the wait doubles up to it
	CrashLoopExits int           // supervise.crashloop_exits: exits within the window that make a crash loop
	// CrashLoopWindow is supervise.crashloop_window; a run this long also
	// resets the back-off.
	CrashLoopWindow time.Duration
	Grace           time.Duration // shutdown.grace: SIGTERM to SIGKILL
}

// Liveness is the liveness.* keys: how the supervisor probes a workload
// that became ready. The supervisor's own probe (supervise.Liveness) is
// made from it by the init, since "off" and "tcp" are words of the key, not
// of the probe.
type Liveness struct {
	Probe    string        // liveness.probe: off, tcp, or an HTTP path
	Interval time.Duration // liveness.interval
	Timeout  time.Duration // liveness.timeout
	Failures int           // liveness.failures: misses in a row that kill the workload
}
