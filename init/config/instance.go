package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Instance holds the keys of one instance among many booted from the same
// image: whether to read the EC2 metadata service, which time server to
// follow, and with which credentials the workload runs. It is embedded in
// Config.
type Instance struct {
	IMDS string // imds: auto, on, off
	NTP  string // time.ntp: NTPAuto, NTPOn, NTPOff or an address (ip[:port]); see NTPServer

	WorkloadUID  int
	WorkloadGID  int
	WorkloadCaps string // workload.caps: "auto", "none" or a list of names
}

// AmazonTimeSync is the NTP address of Amazon Time Sync, reachable from
// every EC2 instance at a link-local address.
const AmazonTimeSync = "169.254.169.123"

// The keywords time.ntp takes besides a server address.
const (
	NTPAuto = "auto" // Amazon Time Sync on EC2, no time sync elsewhere
	NTPOn   = "on"   // Amazon Time Sync whatever the platform says
	NTPOff  = "off"  // no time sync
)

// NTPServer decides which NTP server the init follows, given whether the
// platform is EC2 (imds.Detect): "" for none, and why, for the report.
// Amazon Time Sync answers only inside EC2, so by default (auto) a boot
// elsewhere (QEMU, bare metal, another cloud) asks nothing and logs no
// failure; on forces it (an EC2 instance DMI does not recognise), and an
// address is followed on every platform.
func (in *Instance) NTPServer(ec2 bool) (server, why string) {
	switch in.NTP {
	case NTPOff:
		return "", "time.ntp=off"
	case NTPOn:
		return AmazonTimeSync, "time.ntp=on: Amazon Time Sync"
	case NTPAuto:
		if ec2 {
			return AmazonTimeSync, "time.ntp=auto on EC2: Amazon Time Sync"
		}
		return "", "time.ntp=auto and not EC2: Amazon Time Sync answers only there"
	}
	return in.NTP, "time.ntp=" + in.NTP
}

// CapNames maps the capability names workload.caps accepts (without the
// CAP_ prefix, lower case) to their numbers (linux/capability.h). Only
// capabilities a network workload may have a use for are listed: a typo
// must not silently grant nothing, and CAP_SYS_ADMIN & co. are what
// workload.user=0 is for.
var CapNames = map[string]int{
	"net_bind_service": 10, // bind a port below 1024
	"net_broadcast":    11,
	"net_admin":        12, // SO_BUSY_POLL above net.core.busy_read, SO_PREFER_BUSY_POLL, SO_RCVBUFFORCE
	"net_raw":          13,
	"ipc_lock":         14, // mlock beyond RLIMIT_MEMLOCK
	"sys_nice":         23, // real-time scheduling, nice < 0
	"sys_resource":     24, // raise limits beyond the hard limit
}

var instanceKeys = []Key{
	{"workload.user", "65534", "numeric uid of the workload; 0 = root with every capability",
		intSetter(func(c *Config) *int { return &c.WorkloadUID }, 0, 1<<31-1),
		func(c *Config) string { return strconv.Itoa(c.WorkloadUID) }},
	{"workload.group", "65534", "numeric gid of the workload",
		intSetter(func(c *Config) *int { return &c.WorkloadGID }, 0, 1<<31-1),
		func(c *Config) string { return strconv.Itoa(c.WorkloadGID) }},
	{"workload.caps", "auto", "ambient capabilities of an unprivileged workload: auto (net_bind_service for a " +
		"port below 1024), none, or a list such as net_bind_service,net_admin",
		func(c *Config, v string) error {
			if v == "auto" || v == "none" {
				c.WorkloadCaps = v
				return nil
			}
			names, err := parseCaps(v)
			if err != nil {
				return err
			}
			c.WorkloadCaps = strings.Join(names, ",")
			return nil
		}, func(c *Config) string { return c.WorkloadCaps }},
	{"imds", "auto", "read user-data and identity from the EC2 metadata service (IMDSv2): auto (only when DMI " +
		"says EC2), on, off",
		enum(func(c *Config) *string { return &c.IMDS }, "auto", "on", "off"),
		func(c *Config) string { return c.IMDS }},
	{"time.ntp", NTPAuto, "auto (Amazon Time Sync when DMI says EC2, else none), on (Amazon Time Sync " +
		"anywhere), off, or an NTP server (ip or ip:port) to follow anywhere",
		func(c *Config, v string) error {
			if v == NTPAuto || v == NTPOn || v == NTPOff {
				c.NTP = v
				return nil
			}
			if _, err := netip.ParseAddr(v); err != nil {
				if _, err := netip.ParseAddrPort(v); err != nil {
					return fmt.Errorf("not an IP address, ip:port or off")
				}
			}
			c.NTP = v
			return nil
		}, func(c *Config) string { return c.NTP }},
}

// parseCaps reads a comma- or space-separated list of capability names
// (case-insensitive, CAP_ prefix optional), sorted and without duplicates.
func parseCaps(v string) ([]string, error) {
	var names []string
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
		n := strings.TrimPrefix(strings.ToLower(f), "cap_")
		if _, ok := CapNames[n]; !ok {
			return nil, fmt.Errorf("unknown or not allowed capability %q", f)
		}
		names = append(names, n)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("empty capability list (use none)")
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// WorkloadCapList returns the capability names the workload gets: the
// list given, none, or for auto what the workload's configuration needs:
// net_bind_service when it listens below port 1024. The default workload
// needs nothing else for busy polling: net.core.busy_poll and busy_read
// are system-wide sysctls the init sets, and sockets inherit busy_read as
// their SO_BUSY_POLL without asking; only raising SO_BUSY_POLL above it or
// SO_PREFER_BUSY_POLL needs net_admin (net/core/sock.c, sk_setsockopt).
// A root workload (workload.user=0) keeps every capability and gets no
// list.
func (c *Config) WorkloadCapList() []string {
	switch {
	case c.WorkloadUID == 0, c.WorkloadCaps == "none":
		return nil
	case c.WorkloadCaps == "auto":
		if c.WorkloadPort < 1024 {
			return []string{"net_bind_service"}
		}
		return nil
	}
	names, _ := parseCaps(c.WorkloadCaps) // validated when set
	return names
}
