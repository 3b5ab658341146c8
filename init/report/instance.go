package report

// Where a configuration key's effective value came from, weakest first
// (Report.Sources).
const (
	FromDefault  = "default"
	FromFile     = "init.conf"
	FromCmdline  = "cmdline"
	FromUserData = "user-data"
)

// User-data outcomes (UserData.Status).
const (
	UserDataNone     = "none"     // the instance has no user-data (404), or imds did not run
	UserDataApplied  = "applied"  // hotpath configuration, applied (Refused keys excepted)
	UserDataForeign  = "foreign"  // someone else's format (a script, cloud-config, MIME, gzip): ignored
	UserDataRejected = "rejected" // hotpath configuration with a problem: ignored whole, the baked configuration holds
	UserDataError    = "error"    // it could not be read from the metadata service
)

// UserData is what the init did with the instance's user-data.
type UserData struct {
	Status string `json:"status"`
	// Note says why the data was foreign, rejected or unreadable.
	Note string `json:"note,omitempty"`
	// Errors lists every problem of rejected data, one per line or key.
	Errors []string `json:"errors,omitempty"`
	Bytes  int      `json:"bytes"`
	SHA256 string   `json:"sha256,omitempty"`
	// Applied lists the keys set from user-data.
	Applied []string `json:"applied,omitempty"`
	// Refused maps a key that user-data may not change after boot (it acts
	// before the network that brought the user-data up) to the reason.
	Refused map[string]string `json:"refused,omitempty"`
	// Reapplied lists the boot steps run again for keys set from user-data.
	Reapplied []string `json:"reapplied,omitempty"`
}

// Instance is what the metadata service said about the machine.
type Instance struct {
	// IMDS says whether the metadata service was asked, and why.
	IMDS             string `json:"imds"`
	InstanceID       string `json:"instance_id,omitempty"`
	InstanceType     string `json:"instance_type,omitempty"`
	Region           string `json:"region,omitempty"`
	AvailabilityZone string `json:"availability_zone,omitempty"`
	AMIID            string `json:"ami_id,omitempty"`
	MAC              string `json:"mac,omitempty"`
	DeviceNumber     string `json:"device_number,omitempty"`
	Error            string `json:"error,omitempty"`
}

// TimeSync is the state of the NTP client, in the report and in
// EventTimeSync events.
type TimeSync struct {
	Server string `json:"server"`
	// OffsetMS is the last measured offset of the local clock against the
	// server (positive: the local clock was behind), before correction.
	OffsetMS float64 `json:"offset_ms"`
	RTTMS    float64 `json:"rtt_ms,omitempty"`
	Stratum  int     `json:"stratum,omitempty"`
	// Stepped is true when the last correction set the clock (a large
	// offset) rather than slewing it.
	Stepped bool `json:"stepped,omitempty"`
	// Steps counts the steps since boot.
	Steps int `json:"steps,omitempty"`
	// LastSync is the wall-clock time (RFC 3339, after correction) of the
	// last good answer; empty when there was none.
	LastSync string `json:"last_sync,omitempty"`
	Syncs    int    `json:"syncs"`
	Failures int    `json:"failures"`
	// Refused counts steps refused (not confirmed, or beyond the bound
	// after the first sync); Kiss is the last kiss-o'-death code.
	Refused int    `json:"refused_steps,omitempty"`
	Kiss    string `json:"kiss,omitempty"`
	Error   string `json:"error,omitempty"` // of the last query, if it failed
}

// Privileges is how the workload was started.
type Privileges struct {
	UID  int      `json:"uid"`
	GID  int      `json:"gid"`
	Caps []string `json:"caps"` // ambient capabilities; nil for a root workload (all)
	// NoNewPrivs is set when the workload cannot gain privileges through
	// execve (setuid files, file capabilities).
	NoNewPrivs bool `json:"no_new_privs"`
}

// EventTimeSync is an NTP event: the first sync, a step, a loss of the
// server or its return (Detail says which; Time holds the state).
const EventTimeSync = "time-sync"
