// The package documentation, with the key table, is in doc.go, generated
// from Keys (go generate).

package config

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hotpath-dev/hotpath/init/cpuset"
	"github.com/hotpath-dev/hotpath/init/logship"
)

// Path is where the image bakes the configuration file.
const Path = "/etc/hotpath/init.conf"

// CmdlinePrefix marks init configuration on the kernel command line.
const CmdlinePrefix = "hotpath."

// Config is the effective init configuration.
type Config struct {
	WorkloadPath string
	WorkloadArgs []string
	WorkloadEnv  []string // NAME=value
	WorkloadPort int
	WorkloadCPUs string // "all" or a CPU list
	ReadyTimeout time.Duration
	Instance     // imds, time.ntp, workload.user/group/caps (instance.go)

	Liveness Liveness // liveness.* (supervise.go)

	Net Net // net.*
	NIC NIC // nic.* (nic.go)
	// Link is nic.match, bond.*, vlan.* (link.go).
	Link Link
	// Power is power.* (power.go).
	Power Power

	BusyPoll int
	BusyRead int
	// Sysctls are the sysctl.<name> overrides other than busy_poll and
	// busy_read, keyed by dotted name.
	Sysctls map[string]string

	Supervise Supervise // supervise.*, shutdown.grace (supervise.go)

	MgmtPort  int    // 0: no management endpoint
	MgmtAddr  string // "" = all addresses
	LogRemote string // "" or udp://host:port or tcp://host:port

	// ReportSecrets (report.secrets=show) puts the values of secret keys
	// in the boot report; ReportRedact (report.redact) names more keys
	// whose values it hides (secret.go).
	ReportSecrets bool
	ReportRedact  []string
}

// Key describes one configuration key.
type Key struct {
	Name    string
	Default string
	Doc     string
	set     func(c *Config, v string) error
	get     func(c *Config) string
}

// Keys is the table of every fixed key (sysctl.<name> keys are open-ended
// and handled beside it), grouped by the part of the init that uses them.
// It is the single source for parsing, defaults, the effective-config map
// in the boot report, and the package documentation (KeyTable, doc.go).
var Keys = slices.Concat(workloadKeys, instanceKeys, netKeys, ipv6Keys, nicKeys, linkKeys, powerKeys, systemKeys)

// workloadKeys configure the workload's process and its probes.
var workloadKeys = []Key{
	{"workload.path", "/workload", "absolute path of the workload binary",
		func(c *Config, v string) error {
			if !path.IsAbs(v) {
				return fmt.Errorf("not an absolute path")
			}
			c.WorkloadPath = path.Clean(v)
			return nil
		}, func(c *Config) string { return c.WorkloadPath }},
	{"workload.args", "", "arguments, split on spaces",
		func(c *Config, v string) error { c.WorkloadArgs = strings.Fields(v); return nil },
		func(c *Config) string { return strings.Join(c.WorkloadArgs, " ") }},
	{"workload.env", "", "extra environment, space-separated NAME=value pairs",
		func(c *Config, v string) error {
			env := strings.Fields(v)
			for i, e := range env {
				// The word itself is not quoted: it may be a secret.
				if n, _, ok := strings.Cut(e, "="); !ok || n == "" {
					return fmt.Errorf("word %d is not NAME=value", i+1)
				}
			}
			c.WorkloadEnv = env
			return nil
		}, func(c *Config) string { return strings.Join(c.WorkloadEnv, " ") }},
	{"workload.port", "8080", "TCP port; HOTPATH_PORT, and what readiness probes",
		intSetter(func(c *Config) *int { return &c.WorkloadPort }, 1, 65535),
		func(c *Config) string { return strconv.Itoa(c.WorkloadPort) }},
	{"workload.cpus", "all", "CPU list (\"0-3\", \"0,2\") or \"all\" (every online CPU); HOTPATH_CPUS",
		func(c *Config, v string) error {
			if v == "all" {
				c.WorkloadCPUs = v
				return nil
			}
			cpus, err := cpuset.ParseList(v)
			if err != nil {
				return err
			}
			if len(cpus) == 0 {
				return fmt.Errorf("empty cpu list")
			}
			c.WorkloadCPUs = cpuset.FormatList(cpus)
			return nil
		}, func(c *Config) string { return c.WorkloadCPUs }},
	{"ready.timeout", "30s", "how long after the workload's first start to wait for it to accept on " +
		"127.0.0.1:port; the boot report is printed then, accepting or not",
		durSetter(func(c *Config) *time.Duration { return &c.ReadyTimeout }),
		func(c *Config) string { return c.ReadyTimeout.String() }},
	{"liveness.probe", "off", "off, tcp (connect to the port), or an HTTP path (\"/healthz\": GET, any status " +
		"below 500 is alive) probed once the workload is ready",
		func(c *Config, v string) error {
			if v != "off" && v != "tcp" && (!strings.HasPrefix(v, "/") || strings.ContainsAny(v, " \t\r\n")) {
				return fmt.Errorf("want off, tcp or an absolute HTTP path")
			}
			c.Liveness.Probe = v
			return nil
		}, func(c *Config) string { return c.Liveness.Probe }},
	{"liveness.interval", "10s", "time between liveness probes",
		durSetter(func(c *Config) *time.Duration { return &c.Liveness.Interval }),
		func(c *Config) string { return c.Liveness.Interval.String() }},
	{"liveness.timeout", "2s", "timeout of one liveness probe",
		durSetter(func(c *Config) *time.Duration { return &c.Liveness.Timeout }),
		func(c *Config) string { return c.Liveness.Timeout.String() }},
	{"liveness.failures", "3", "consecutive failed probes that make the init kill and restart the workload",
		intSetter(func(c *Config) *int { return &c.Liveness.Failures }, 1, 1000),
		func(c *Config) string { return strconv.Itoa(c.Liveness.Failures) }},
}

// Net is the primary interface's addressing (the net.* keys), as the
// network steps use it.
type Net struct {
	Mode           NetMode       // net.mode
	Interface      string        // net.interface: "" picks the first NIC
	Address        netip.Prefix  // net.address (static)
	Gateway        netip.Addr    // net.gateway (static)
	MTU            int           // net.mtu: 0 keeps the driver's or the lease's
	DHCPTimeout    time.Duration // net.dhcp_timeout: the first exchange's timeout
	DHCPRetries    int           // net.dhcp_retries
	DHCPBackoffMax time.Duration // net.dhcp_backoff_max: caps each exchange's timeout and the wait between background attempts
	// Deadline (net.deadline) bounds the boot's network steps together:
	// past it the step fails with its reason, the workload starts, and
	// DHCP goes on in the background.
	Deadline time.Duration
	IPv6     IPv6 // net.ipv6* (ipv6.go)
}

// NetMode is net.mode: how the primary interface gets its address.
type NetMode string

// The values of net.mode.
const (
	NetDHCP   NetMode = "dhcp"   // DHCP, retried in the background after boot
	NetStatic NetMode = "static" // net.address and net.gateway
	NetOff    NetMode = "off"    // no address
)

// netKeys configure the address (package netconf).
var netKeys = []Key{
	{"net.mode", "dhcp", "dhcp, static or off",
		enum(func(c *Config) *NetMode { return &c.Net.Mode }, NetDHCP, NetStatic, NetOff),
		func(c *Config) string { return string(c.Net.Mode) }},
	{"net.interface", "", "primary interface; empty = first non-loopback Ethernet device",
		func(c *Config, v string) error {
			if len(v) > 15 || strings.ContainsAny(v, "/ ") {
				return fmt.Errorf("not an interface name")
			}
			c.Net.Interface = v
			return nil
		}, func(c *Config) string { return c.Net.Interface }},
	{"net.address", "", "static mode: address in CIDR form, e.g. 10.0.0.2/24",
		func(c *Config, v string) error {
			if v == "" {
				c.Net.Address = netip.Prefix{}
				return nil
			}
			p, err := netip.ParsePrefix(v)
			if err != nil || !p.Addr().Is4() {
				return fmt.Errorf("not an IPv4 CIDR address")
			}
			c.Net.Address = p
			return nil
		}, func(c *Config) string {
			if !c.Net.Address.IsValid() {
				return ""
			}
			return c.Net.Address.String()
		}},
	{"net.gateway", "", "static mode: default gateway (optional)",
		func(c *Config, v string) error {
			if v == "" {
				c.Net.Gateway = netip.Addr{}
				return nil
			}
			a, err := netip.ParseAddr(v)
			if err != nil || !a.Is4() {
				return fmt.Errorf("not an IPv4 address")
			}
			c.Net.Gateway = a
			return nil
		}, func(c *Config) string {
			if !c.Net.Gateway.IsValid() {
				return ""
			}
			return c.Net.Gateway.String()
		}},
	{"net.mtu", "0", "MTU to set, 576-65535; 0 = from the DHCP lease (option 26) or unchanged",
		setMTU,
		func(c *Config) string { return strconv.Itoa(c.Net.MTU) }},
	{"net.dhcp_timeout", "2s", "timeout of the first DHCP exchange (DHCPv4 and DHCPv6); each next one doubles it up to net.dhcp_backoff_max",
		durSetter(func(c *Config) *time.Duration { return &c.Net.DHCPTimeout }),
		func(c *Config) string { return c.Net.DHCPTimeout.String() }},
	{"net.dhcp_retries", "5", "DHCP attempts before the step fails (then retried in the background)",
		intSetter(func(c *Config) *int { return &c.Net.DHCPRetries }, 1, 1000),
		func(c *Config) string { return strconv.Itoa(c.Net.DHCPRetries) }},
	{"net.dhcp_backoff_max", "1m0s", "cap of a DHCP exchange's timeout (DHCPv4 and DHCPv6) and of the wait between background attempts after boot",
		durSetter(func(c *Config) *time.Duration { return &c.Net.DHCPBackoffMax }),
		func(c *Config) string { return c.Net.DHCPBackoffMax.String() }},
	{"net.deadline", "30s", "bound of the boot's network steps together (the IPv4 address, or IPv6's when net.mode=off); past it the step fails, the workload starts and DHCP goes on in the background",
		durSetter(func(c *Config) *time.Duration { return &c.Net.Deadline }),
		func(c *Config) string { return c.Net.Deadline.String() }},
}

// systemKeys configure the sysctls, the supervisor, shutdown and the
// management endpoint.
var systemKeys = []Key{
	{"sysctl.busy_poll", "50", "net.core.busy_poll (µs)",
		intSetter(func(c *Config) *int { return &c.BusyPoll }, 0, 1000000),
		func(c *Config) string { return strconv.Itoa(c.BusyPoll) }},
	{"sysctl.busy_read", "50", "net.core.busy_read (µs)",
		intSetter(func(c *Config) *int { return &c.BusyRead }, 0, 1000000),
		func(c *Config) string { return strconv.Itoa(c.BusyRead) }},
	{"supervise.backoff_min", "100ms", "first restart delay; doubles per consecutive exit",
		durSetter(func(c *Config) *time.Duration { return &c.Supervise.BackoffMin }),
		func(c *Config) string { return c.Supervise.BackoffMin.String() }},
	{"supervise.backoff_max", "30s", "restart delay cap",
		durSetter(func(c *Config) *time.Duration { return &c.Supervise.BackoffMax }),
		func(c *Config) string { return c.Supervise.BackoffMax.String() }},
	{"supervise.crashloop_exits", "5", "exits within the window that make a crash loop",
		intSetter(func(c *Config) *int { return &c.Supervise.CrashLoopExits }, 1, 1000000),
		func(c *Config) string { return strconv.Itoa(c.Supervise.CrashLoopExits) }},
	{"supervise.crashloop_window", "1m0s", "crash-loop window; a run longer than this resets the back-off",
		durSetter(func(c *Config) *time.Duration { return &c.Supervise.CrashLoopWindow }),
		func(c *Config) string { return c.Supervise.CrashLoopWindow.String() }},
	{"shutdown.grace", "10s", "time between SIGTERM and SIGKILL at shutdown",
		durSetter(func(c *Config) *time.Duration { return &c.Supervise.Grace }),
		func(c *Config) string { return c.Supervise.Grace.String() }},
	{"mgmt.port", "9100", "management endpoint (/metrics /healthz /report); 0 = off",
		intSetter(func(c *Config) *int { return &c.MgmtPort }, 0, 65535),
		func(c *Config) string { return strconv.Itoa(c.MgmtPort) }},
	{"mgmt.addr", "", "address the management endpoint binds; empty = all addresses",
		func(c *Config, v string) error {
			if v != "" {
				if _, err := netip.ParseAddr(v); err != nil {
					return fmt.Errorf("not an IP address")
				}
			}
			c.MgmtAddr = v
			return nil
		}, func(c *Config) string { return c.MgmtAddr }},
	{"report.secrets", "redact", "redact: the boot report (serial console, /report, shipped logs) shows " +
		"the names in workload.env, the flags in workload.args and no value of them or of the report.redact " +
		"keys; show: the values too (anyone who reaches the management port reads them)",
		func(c *Config, v string) error {
			switch v {
			case "redact":
				c.ReportSecrets = false
			case "show":
				c.ReportSecrets = true
			default:
				return fmt.Errorf("want redact or show")
			}
			return nil
		}, func(c *Config) string {
			if c.ReportSecrets {
				return "show"
			}
			return "redact"
		}},
	{"report.redact", "", "more keys whose values the boot report hides, comma-separated (e.g. " +
		"log.remote,sysctl.net.ipv4.tcp_fastopen)",
		func(c *Config, v string) error { return c.setReportRedact(v) },
		func(c *Config) string { return strings.Join(c.ReportRedact, ",") }},
	{"log.remote", "", "syslog collector, udp://host:port or tcp://host:port; empty = console only",
		func(c *Config, v string) error {
			if v != "" {
				if _, err := logship.ParseRemote(v); err != nil {
					return err
				}
			}
			c.LogRemote = v
			return nil
		}, func(c *Config) string { return c.LogRemote }},
}

const sysctlPrefix = "sysctl."

func lookup(name string) *Key {
	for i := range Keys {
		if Keys[i].Name == name {
			return &Keys[i]
		}
	}
	return nil
}

// Default returns the configuration with every key at its default.
func Default() Config {
	var c Config
	for _, k := range Keys {
		if err := k.set(&c, k.Default); err != nil {
			panic(fmt.Sprintf("config: default of %s: %v", k.Name, err)) // a bug in the table
		}
	}
	c.Sysctls = map[string]string{}
	return c
}

// UnknownKeysError lists keys that are not configuration keys.
type UnknownKeysError struct{ Keys []string }

func (e *UnknownKeysError) Error() string {
	return "config: unknown keys: " + strings.Join(e.Keys, ", ")
}

// Set sets one key. It returns an *UnknownKeysError for an unknown key.
func (c *Config) Set(key, value string) error {
	key, value = strings.TrimSpace(key), strings.TrimSpace(value)
	if k := lookup(key); k != nil {
		if err := k.set(c, value); err != nil {
			if IsSecret(key) {
				// The console and the report carry this error: no value.
				return fmt.Errorf("config: %s: %w", key, err)
			}
			return fmt.Errorf("config: %s=%q: %w", key, value, err)
		}
		return nil
	}
	if name, ok := strings.CutPrefix(key, sysctlPrefix); ok && validSysctl(name) {
		if value == "" {
			return fmt.Errorf("config: %s: empty value", key)
		}
		if c.Sysctls == nil {
			c.Sysctls = map[string]string{}
		}
		c.Sysctls[name] = value
		return nil
	}
	return &UnknownKeysError{Keys: []string{key}}
}

// validSysctl accepts dotted names of at least two components made of the
// characters /proc/sys file names use, so that a value can never name a path
// outside /proc/sys.
func validSysctl(name string) bool {
	parts := strings.Split(name, ".")
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if p == "" {
			return false
		}
		for _, r := range p {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
				return false
			}
		}
	}
	return true
}

// Parse reads a configuration file on top of Default. It always returns a
// usable Config holding every valid line; the error (if any) joins every
// problem, and an unknown key is reported through an *UnknownKeysError
// (use errors.As; Unknown extracts the names) naming all unknown keys.
func Parse(r io.Reader) (Config, error) {
	c := Default()
	var errs []error
	var unknown []string
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			// Not the line itself: it may be a secret missing its key.
			errs = append(errs, fmt.Errorf("config: line %d is not key=value (%d bytes)", n, len(line)))
			continue
		}
		if err := c.setCollect(k, v, &unknown); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", n, err))
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("config: read: %w", err))
	}
	if len(unknown) > 0 {
		errs = append(errs, &UnknownKeysError{Keys: unknown})
	}
	return c, errors.Join(errs...)
}

// setCollect sets k to v; an unknown key is added to unknown instead of
// being returned, so that Parse and ApplyCmdline name every unknown key in
// one error rather than the first.
func (c *Config) setCollect(k, v string, unknown *[]string) error {
	err := c.Set(k, v)
	var uk *UnknownKeysError
	if errors.As(err, &uk) {
		*unknown = append(*unknown, uk.Keys...)
		return nil
	}
	return err
}

// Unknown returns the unknown key names carried by err (from Parse or
// ApplyCmdline), or nil.
func Unknown(err error) []string {
	var uk *UnknownKeysError
	if errors.As(err, &uk) {
		return uk.Keys
	}
	return nil
}

// ApplyCmdline applies every hotpath.<key>=<value> word of a kernel command
// line (as read from /proc/cmdline) on top of c. Values may be double-quoted
// to hold spaces: hotpath.workload.args="-v -x". Words without the prefix
// belong to the kernel and are ignored. Like Parse, it applies every valid
// override and returns the problems joined, unknown keys as an
// *UnknownKeysError.
func (c *Config) ApplyCmdline(cmdline string) error {
	var errs []error
	var unknown []string
	for _, w := range SplitCmdline(cmdline) {
		rest, ok := strings.CutPrefix(w, CmdlinePrefix)
		if !ok {
			continue
		}
		k, v, ok := strings.Cut(rest, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("config: cmdline %q: not %s<key>=<value>", w, CmdlinePrefix))
			continue
		}
		if err := c.setCollect(k, v, &unknown); err != nil {
			errs = append(errs, fmt.Errorf("cmdline: %w", err))
		}
	}
	if len(unknown) > 0 {
		errs = append(errs, &UnknownKeysError{Keys: unknown})
	}
	return errors.Join(errs...)
}

// SplitCmdline splits a kernel command line into words the way the kernel's
// next_arg does: on spaces, except inside double quotes, which are removed.
func SplitCmdline(s string) []string {
	var words []string
	var b strings.Builder
	inQuote, inWord := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
			inWord = true
		case !inQuote && (r == ' ' || r == '\t' || r == '\n'):
			if inWord {
				words = append(words, b.String())
				b.Reset()
				inWord = false
			}
		default:
			b.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, b.String())
	}
	return words
}

// Map returns the effective configuration as key -> value, every fixed key
// included, for the boot report.
func (c *Config) Map() map[string]string {
	m := make(map[string]string, len(Keys)+len(c.Sysctls))
	for _, k := range Keys {
		m[k.Name] = k.get(c)
	}
	for n, v := range c.Sysctls {
		m[sysctlPrefix+n] = v
	}
	return m
}

// SysctlNames returns the dotted names of the sysctl overrides, sorted.
func (c *Config) SysctlNames() []string {
	return slices.Sorted(maps.Keys(c.Sysctls))
}

func intSetter(f func(*Config) *int, lo, hi int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		if n < lo || n > hi {
			return fmt.Errorf("out of range [%d, %d]", lo, hi)
		}
		*f(c) = n
		return nil
	}
}

func durSetter(f func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("not a duration (e.g. 100ms, 10s)")
		}
		if d < 0 {
			return fmt.Errorf("negative duration")
		}
		*f(c) = d
		return nil
	}
}

func boolSetter(f func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		switch strings.ToLower(v) {
		case "on", "true", "1", "yes":
			*f(c) = true
		case "off", "false", "0", "no":
			*f(c) = false
		default:
			return fmt.Errorf("not on/off")
		}
		return nil
	}
}

// enum sets a key whose values are the typed constants allowed, so that
// the parser and the package that acts on the value share one list.
func enum[T ~string](f func(*Config) *T, allowed ...T) func(*Config, string) error {
	return func(c *Config, v string) error {
		if !slices.Contains(allowed, T(v)) {
			names := make([]string, len(allowed))
			for i, a := range allowed {
				names[i] = string(a)
			}
			return fmt.Errorf("want one of %s", strings.Join(names, ", "))
		}
		*f(c) = T(v)
		return nil
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// Validate checks relations between keys that no single key can check.
func (c *Config) Validate() error {
	var errs []error
	if c.Net.Mode == NetStatic && !c.Net.Address.IsValid() {
		errs = append(errs, fmt.Errorf("config: net.mode=static needs net.address"))
	}
	if c.Supervise.BackoffMax < c.Supervise.BackoffMin {
		errs = append(errs, fmt.Errorf("config: supervise.backoff_max %v < backoff_min %v", c.Supervise.BackoffMax, c.Supervise.BackoffMin))
	}
	if c.Liveness.Probe != "off" && (c.Liveness.Interval <= 0 || c.Liveness.Timeout <= 0) {
		errs = append(errs, fmt.Errorf("config: liveness.probe needs a positive liveness.interval and liveness.timeout"))
	}
	if err := c.validateIPv6(); err != nil {
		errs = append(errs, err)
	}
	if c.Net.DHCPBackoffMax <= 0 {
		errs = append(errs, fmt.Errorf("config: net.dhcp_backoff_max must be positive"))
	}
	if c.Net.Deadline <= 0 {
		errs = append(errs, fmt.Errorf("config: net.deadline must be positive"))
	}
	if c.Net.DHCPTimeout <= 0 {
		errs = append(errs, fmt.Errorf("config: net.dhcp_timeout must be positive"))
	}
	if c.Supervise.BackoffMin <= 0 {
		errs = append(errs, fmt.Errorf("config: supervise.backoff_min must be positive"))
	}
	if c.NIC.DeferHardIRQs > 0 && c.NIC.GROFlushTimeout <= 0 {
		errs = append(errs, fmt.Errorf("config: nic.defer_hard_irqs %d needs a positive nic.gro_flush_timeout "+
			"(a deferred interrupt with no timer waits for the workload alone)", c.NIC.DeferHardIRQs))
	}
	if c.NIC.PreferBusyPoll && c.NIC.DeferHardIRQs == 0 {
		errs = append(errs, fmt.Errorf("config: nic.prefer_busy_poll=on needs nic.defer_hard_irqs "+
			"(without a deferral every preferred busy poll re-arms the interrupt: nothing is gained)"))
	}
	if c.Link.Bond != BondNone && c.Link.BondMiimon < time.Millisecond {
		errs = append(errs, fmt.Errorf("config: bond.mode=%s needs bond.miimon of at least 1ms", c.Link.Bond))
	}
	if c.MgmtPort != 0 && c.MgmtPort == c.WorkloadPort {
		errs = append(errs, fmt.Errorf("config: mgmt.port %d is the workload's port", c.MgmtPort))
	}
	if err := c.validateRedact(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
