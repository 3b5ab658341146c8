package config

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/report"
)

func TestApplyUserData(t *testing.T) {
	baked := Default()
	baked.WorkloadPort = 8081 // as if from init.conf
	baked.Sysctls["net.core.somaxconn"] = "4096"
	for _, tc := range []struct {
		name    string
		data    []byte
		status  string
		note    string   // substring of the note
		errs    []string // substrings, one per error
		applied []string
		refused []string
		check   func(t *testing.T, c Config)
	}{
		{name: "none", data: nil, status: report.UserDataNone},
		{name: "empty", data: []byte{}, status: report.UserDataApplied},
		{name: "comments only", data: []byte("# nothing\n\n"), status: report.UserDataApplied},
		{
			name: "keys", data: []byte("# per instance\nworkload.port=9090\nworkload.args = -v -x\nsysctl.net.core.somaxconn=8192\ntime.ntp=10.0.0.1:123\n"),
			status: report.UserDataApplied, applied: []string{"sysctl.net.core.somaxconn", "time.ntp", "workload.args", "workload.port"},
			check: func(t *testing.T, c Config) {
				if c.WorkloadPort != 9090 || strings.Join(c.WorkloadArgs, " ") != "-v -x" || c.Sysctls["net.core.somaxconn"] != "8192" || c.NTP != "10.0.0.1:123" {
					t.Errorf("%+v", c)
				}
			},
		},
		{
			name: "refused keys, the rest applies", data: []byte("net.mode=static\nnic.gro=on\nimds=off\nworkload.port=9090\n"),
			status: report.UserDataApplied, applied: []string{"workload.port"}, refused: []string{"imds", "net.mode", "nic.gro"},
			check: func(t *testing.T, c Config) {
				if c.Net.Mode != "dhcp" || c.NIC.GRO || c.IMDS != "auto" || c.WorkloadPort != 9090 {
					t.Errorf("refused keys changed the configuration: %+v", c)
				}
			},
		},
		{
			// The NIC's queue IRQs and XPS are bound to the CPU list before
			// the network brings user-data: another list would give workers
			// connections steered to other CPUs.
			name: "workload.cpus refused", data: []byte("workload.cpus=0\nworkload.port=9090\n"),
			status: report.UserDataApplied, applied: []string{"workload.port"}, refused: []string{"workload.cpus"},
			check: func(t *testing.T, c Config) {
				if c.WorkloadCPUs != "all" {
					t.Errorf("workload.cpus from user-data took effect: %q", c.WorkloadCPUs)
				}
			},
		},
		{name: "unknown key", data: []byte("workload.port=9090\nworkload.prot=1\n"), status: report.UserDataRejected,
			errs: []string{"line 2: unknown key workload.prot"}},
		{name: "bad value", data: []byte("workload.port=99999\nworkload.user=x\n"), status: report.UserDataRejected,
			errs: []string{"line 1:", "line 2:"}},
		{name: "refused key with a bad value", data: []byte("net.mode=wifi\n"), status: report.UserDataRejected, errs: []string{"net.mode"}},
		{name: "not key=value", data: []byte("workload.port 9090\n"), status: report.UserDataRejected, errs: []string{"not key=value"}},
		{name: "contradiction", data: []byte("supervise.backoff_min=1m\nsupervise.backoff_max=1s\n"), status: report.UserDataRejected, errs: []string{"backoff_max"}},
		{name: "oversized", data: append([]byte("workload.port=9090\n"), bytes.Repeat([]byte("#\n"), MaxUserData/2)...), status: report.UserDataRejected, note: "more than the 16384"},
		{name: "exactly the limit", data: append([]byte("workload.port=9090\n"), bytes.Repeat([]byte("#"), MaxUserData-19)...), status: report.UserDataApplied, applied: []string{"workload.port"}},
		{name: "binary", data: []byte("workload.port=9090\n\x00\x01\x02"), status: report.UserDataRejected, note: "control byte 0x00"},
		{name: "not utf-8", data: []byte("workload.args=\xff\xfe\n"), status: report.UserDataRejected, note: "UTF-8"},
		{name: "script", data: []byte("#!/bin/bash\necho hi\n"), status: report.UserDataForeign, note: "script"},
		{name: "cloud-config", data: []byte("#cloud-config\npackages: [nginx]\n"), status: report.UserDataForeign, note: "#cloud-config"},
		{name: "mime", data: []byte("Content-Type: multipart/mixed; boundary=\"//\"\nMIME-Version: 1.0\n"), status: report.UserDataForeign, note: "MIME"},
		{name: "mime version first", data: []byte("MIME-Version: 1.0\n"), status: report.UserDataForeign, note: "MIME"},
		{name: "gzip", data: []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0}, status: report.UserDataForeign, note: "gzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := baked.Map()
			got, res := ApplyUserData(baked, tc.data)
			if res.Status != tc.status || !strings.Contains(res.Note, tc.note) {
				t.Fatalf("status %q note %q errors %q; want %q with note containing %q", res.Status, res.Note, res.Errors, tc.status, tc.note)
			}
			if len(res.Errors) != len(tc.errs) {
				t.Fatalf("errors %q, want %d containing %q", res.Errors, len(tc.errs), tc.errs)
			}
			for i, e := range tc.errs {
				if !strings.Contains(res.Errors[i], e) {
					t.Errorf("error %d %q does not contain %q", i, res.Errors[i], e)
				}
			}
			if !slices.Equal(res.Applied, tc.applied) {
				t.Errorf("applied %q, want %q", res.Applied, tc.applied)
			}
			var refused []string
			for k, why := range res.Refused {
				if why == "" {
					t.Errorf("refused %s without a reason", k)
				}
				refused = append(refused, k)
			}
			slices.Sort(refused)
			if !slices.Equal(refused, tc.refused) {
				t.Errorf("refused %q, want %q", refused, tc.refused)
			}
			if tc.data != nil && (res.Bytes != len(tc.data) || len(res.SHA256) != 64) {
				t.Errorf("bytes %d sha %q", res.Bytes, res.SHA256)
			}
			if res.Status != report.UserDataApplied {
				if !mapsEqual(got.Map(), before) {
					t.Errorf("a %s user-data changed the configuration", res.Status)
				}
			}
			if !mapsEqual(baked.Map(), before) {
				t.Errorf("ApplyUserData changed its input")
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestSources(t *testing.T) {
	file := []byte("workload.port=8081\nnic.gro=on\nsysctl.net.core.somaxconn=4096\nworkload.cpus=bogus\n")
	cmdline := `console=ttyS0 hotpath.nic.gro=off hotpath.workload.args="-v -x" hotpath.net.mtu=x`
	c, _ := Parse(bytes.NewReader(file))
	c.ApplyCmdline(cmdline)
	c, _ = ApplyUserData(c, []byte("workload.port=9090\n"))
	src := c.SourceMap(Sources(file, cmdline), []string{"workload.port"})
	for k, want := range map[string]string{
		"workload.port":             report.FromUserData,
		"nic.gro":                   report.FromCmdline,
		"workload.args":             report.FromCmdline,
		"sysctl.net.core.somaxconn": report.FromFile,
		"workload.cpus":             report.FromDefault, // its line was refused
		"net.mtu":                   report.FromDefault, // its word was refused
		"shutdown.grace":            report.FromDefault,
	} {
		if src[k] != want {
			t.Errorf("source of %s = %q, want %q", k, src[k], want)
		}
	}
	if len(src) != len(c.Map()) {
		t.Errorf("%d sources for %d keys", len(src), len(c.Map()))
	}
}

func TestInstanceKeys(t *testing.T) {
	c := Default()
	if c.IMDS != "auto" || c.NTP != NTPAuto || c.WorkloadUID != 65534 || c.WorkloadGID != 65534 || c.WorkloadCaps != "auto" {
		t.Fatalf("defaults %+v", c.Instance)
	}
	if caps := c.WorkloadCapList(); caps != nil {
		t.Errorf("auto caps on port 8080: %q, want none", caps)
	}
	c.WorkloadPort = 80
	if caps := c.WorkloadCapList(); !slices.Equal(caps, []string{"net_bind_service"}) {
		t.Errorf("auto caps on port 80: %q", caps)
	}
	if err := c.Set("workload.caps", "CAP_NET_ADMIN, net_bind_service net_admin"); err != nil {
		t.Fatal(err)
	}
	if c.WorkloadCaps != "net_admin,net_bind_service" {
		t.Errorf("caps %q", c.WorkloadCaps)
	}
	c.WorkloadUID = 0
	if caps := c.WorkloadCapList(); caps != nil {
		t.Errorf("root workload gets a list %q", caps)
	}
	for _, bad := range []struct{ k, v string }{
		{"workload.caps", "sys_admin"}, {"workload.caps", ","}, {"workload.user", "-1"}, {"workload.user", "nobody"},
		{"imds", "maybe"}, {"time.ntp", "pool.ntp.org"}, {"time.ntp", ""},
	} {
		if err := c.Set(bad.k, bad.v); err == nil {
			t.Errorf("%s=%q accepted", bad.k, bad.v)
		}
	}
	for _, good := range []struct{ k, v string }{
		{"time.ntp", "off"}, {"time.ntp", "auto"}, {"time.ntp", "on"}, {"time.ntp", "10.1.2.3"}, {"time.ntp", "[fd00::1]:123"}, {"time.ntp", "fd00::1"}, {"imds", "on"},
	} {
		if err := c.Set(good.k, good.v); err != nil {
			t.Errorf("%s=%q: %v", good.k, good.v, err)
		}
	}
}

// TestNTPServer: time.ntp=auto follows Amazon Time Sync on EC2 only, on
// forces it, off and an address mean what they say on any platform.
func TestNTPServer(t *testing.T) {
	for _, tc := range []struct {
		ntp       string
		ec2       bool
		server    string
		whySubstr string
	}{
		{NTPAuto, true, AmazonTimeSync, "auto on EC2"},
		{NTPAuto, false, "", "not EC2"},
		{NTPOn, false, AmazonTimeSync, "time.ntp=on"},
		{NTPOn, true, AmazonTimeSync, "time.ntp=on"},
		{NTPOff, true, "", "time.ntp=off"},
		{NTPOff, false, "", "time.ntp=off"},
		{"10.0.0.1:123", false, "10.0.0.1:123", "time.ntp=10.0.0.1:123"},
		{"10.0.0.1", true, "10.0.0.1", "time.ntp=10.0.0.1"},
	} {
		c := Default()
		if err := c.Set("time.ntp", tc.ntp); err != nil {
			t.Fatal(err)
		}
		server, why := c.NTPServer(tc.ec2)
		if server != tc.server || !strings.Contains(why, tc.whySubstr) {
			t.Errorf("time.ntp=%s ec2=%v: %q (%s), want %q (%s)", tc.ntp, tc.ec2, server, why, tc.server, tc.whySubstr)
		}
	}
	if d := Default(); d.NTP != NTPAuto {
		t.Errorf("default time.ntp=%s, want auto", d.NTP)
	}
}

// TestUserDataErrorsBounded: 8,000 bad lines are rejected with the count,
// MaxUserDataErrors of them listed and the rest counted.
func TestUserDataErrorsBounded(t *testing.T) {
	_, res := ApplyUserData(Default(), []byte(strings.Repeat("x\n", 8000)))
	if res.Status != report.UserDataRejected || !strings.HasPrefix(res.Note, "8000 problem(s)") ||
		len(res.Errors) != MaxUserDataErrors+1 || res.Errors[MaxUserDataErrors] != "and 7968 more problem(s)" {
		t.Errorf("%s %q: %d errors, last %q", res.Status, res.Note, len(res.Errors), res.Errors[len(res.Errors)-1])
	}
}
