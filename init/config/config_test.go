package config

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDefault(t *testing.T) {
	c := Default()
	if c.WorkloadPath != "/workload" || c.WorkloadPort != 8080 || c.WorkloadCPUs != "all" ||
		c.Net.Mode != "dhcp" || c.NIC.GRO || c.BusyPoll != 50 || c.BusyRead != 50 ||
		c.Supervise.Grace != 10*time.Second || c.NIC.Coalesce != "adaptive" || c.NIC.Qdisc != "mq" {
		t.Errorf("Default() = %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Default().Validate() = %v", err)
	}
	m := c.Map()
	for _, k := range Keys {
		if m[k.Name] != k.Default {
			t.Errorf("Map()[%s] = %q, want default %q", k.Name, m[k.Name], k.Default)
		}
		if k.Doc == "" {
			t.Errorf("key %s has no doc", k.Name)
		}
	}
}

// TestKeysDocumented: the key table of the package documentation (doc.go)
// is the one KeyTable renders from Keys; after a change to Keys, run go
// generate. Every key, and the open-ended sysctl.<name>, has its row.
func TestKeysDocumented(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	for _, l := range strings.Split(string(b), "\n") {
		if row, ok := strings.CutPrefix(l, "//\t"); ok {
			table.WriteString(row + "\n")
		}
	}
	if got, want := table.String(), KeyTable(); got != want {
		t.Errorf("doc.go's key table differs from KeyTable() (run go generate ./init/config):\n%s\nwant:\n%s", got, want)
	}
	rows := "\n" + KeyTable()
	for _, k := range append(slices.Clone(Keys), sysctlRow) {
		if !strings.Contains(rows, "\n"+k.Name+" ") {
			t.Errorf("key %s has no row in KeyTable", k.Name)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		check   func(t *testing.T, c Config)
		unknown []string
		errSub  string
	}{
		{
			name: "values and comments",
			in: `# hotpath init
workload.path = /bin/server
workload.args=-v  -x
  # indented comment
workload.env=A=1 B=two
workload.port=9000
workload.cpus=2,0-1
net.mode=static
net.address=10.0.0.2/24
net.gateway=10.0.0.1
nic.gro=on
nic.coalesce=static
nic.rx_usecs=0
sysctl.busy_poll=0
sysctl.net.core.somaxconn=1024
shutdown.grace=3s
`,
			check: func(t *testing.T, c Config) {
				if c.WorkloadPath != "/bin/server" || !slices.Equal(c.WorkloadArgs, []string{"-v", "-x"}) ||
					!slices.Equal(c.WorkloadEnv, []string{"A=1", "B=two"}) || c.WorkloadPort != 9000 ||
					c.WorkloadCPUs != "2,0-1" || c.Net.Mode != "static" || c.Net.Address.String() != "10.0.0.2/24" ||
					c.Net.Gateway.String() != "10.0.0.1" || !c.NIC.GRO || c.NIC.Coalesce != "static" ||
					c.NIC.RxUsecs != 0 || c.BusyPoll != 0 || c.Sysctls["net.core.somaxconn"] != "1024" ||
					c.Supervise.Grace != 3*time.Second {
					t.Errorf("got %+v", c)
				}
			},
		},
		{
			name:    "unknown keys are named, valid lines kept",
			in:      "workload.port=81\nnic.groo=off\nworkload.port2=1\nsysctl.nodots=1\n",
			unknown: []string{"nic.groo", "workload.port2", "sysctl.nodots"},
			check: func(t *testing.T, c Config) {
				if c.WorkloadPort != 81 {
					t.Errorf("valid line lost: port %d", c.WorkloadPort)
				}
			},
		},
		{name: "bad value", in: "workload.port=http\n", errSub: "workload.port"},
		{name: "bad bool", in: "nic.gro=maybe\n", errSub: "nic.gro"},
		{name: "relative path", in: "workload.path=workload\n", errSub: "absolute"},
		{name: "not key=value", in: "just words\n", errSub: "line 1"},
		{name: "bad cidr", in: "net.address=10.0.0.2\n", errSub: "net.address"},
		{name: "bad mode", in: "net.mode=ppp\n", errSub: "dhcp, static, off"},
		{name: "carrier wait past its bound", in: "nic.carrier_wait=61s\n", errSub: "nic.carrier_wait"},
		{name: "carrier wait at its bound", in: "nic.carrier_wait=1m\nnic.tx_push_buf_len=0\npower.policy=on\npower.cpu_latency_us=0\n",
			check: func(t *testing.T, c Config) {
				if c.NIC.CarrierWait != time.Minute || c.NIC.TxPushBufLen != 0 || c.Power.Policy != PowerOn || c.Power.CPULatencyUs != 0 {
					t.Errorf("got %+v %+v", c.NIC, c.Power)
				}
			}},
		{name: "bad power policy", in: "power.policy=max\n", errSub: "auto, on, off"},
		{name: "negative latency", in: "power.cpu_latency_us=-1\n", errSub: "power.cpu_latency_us"},
		{name: "sysctl path escape", in: "sysctl.../../etc=1\n", unknown: []string{"sysctl.../../etc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(strings.NewReader(tc.in))
			if got := Unknown(err); !slices.Equal(got, tc.unknown) {
				t.Errorf("unknown = %v, want %v (err %v)", got, tc.unknown, err)
			}
			if tc.unknown != nil {
				for _, k := range tc.unknown {
					if !strings.Contains(err.Error(), k) {
						t.Errorf("error %q does not name %s", err, k)
					}
				}
			}
			if tc.errSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errSub) {
					t.Errorf("err = %v, want it to mention %q", err, tc.errSub)
				}
			} else if tc.unknown == nil && err != nil {
				t.Errorf("unexpected error: %v", err)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

func TestCmdline(t *testing.T) {
	c, err := Parse(strings.NewReader("workload.port=9000\nnet.mode=dhcp\n"))
	if err != nil {
		t.Fatal(err)
	}
	cmdline := `console=ttyS0 mitigations=off hotpath.net.mode=static hotpath.net.address=192.168.7.2/24 ` +
		`hotpath.workload.args="-a -b" hotpath.bogus=1 quiet hotpath.workload.port=bad hotpath.sysctl.net.ipv4.tcp_fastopen=3` + "\n"
	err = c.ApplyCmdline(cmdline)
	if got := Unknown(err); !slices.Equal(got, []string{"bogus"}) {
		t.Errorf("unknown = %v, want [bogus]", got)
	}
	if err == nil || !strings.Contains(err.Error(), "workload.port") {
		t.Errorf("bad port not reported: %v", err)
	}
	if c.Net.Mode != "static" || c.Net.Address.String() != "192.168.7.2/24" ||
		!slices.Equal(c.WorkloadArgs, []string{"-a", "-b"}) || c.WorkloadPort != 9000 ||
		c.Sysctls["net.ipv4.tcp_fastopen"] != "3" {
		t.Errorf("overrides not applied: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	m := c.Map()
	if m["net.mode"] != "static" || m["sysctl.net.ipv4.tcp_fastopen"] != "3" {
		t.Errorf("Map = %v", m)
	}
}

func TestSplitCmdline(t *testing.T) {
	got := SplitCmdline(` a  b="c d" "e f" g` + "\n")
	want := []string{"a", "b=c d", "e f", "g"}
	if !slices.Equal(got, want) {
		t.Errorf("SplitCmdline = %q, want %q", got, want)
	}
}

func TestValidate(t *testing.T) {
	c := Default()
	c.Net.Mode = "static"
	if err := c.Validate(); err == nil {
		t.Error("static without address accepted")
	}
	c = Default()
	c.Supervise.BackoffMax = time.Millisecond
	if err := c.Validate(); err == nil {
		t.Error("backoff_max < backoff_min accepted")
	}
	var uk *UnknownKeysError
	if errors.As(c.Validate(), &uk) {
		t.Error("Validate returned an unknown-keys error")
	}
}

func TestIssue11Keys(t *testing.T) {
	d := Default()
	if d.NIC.Spread != "rps" || d.Liveness.Probe != "off" || d.Liveness.Failures != 3 || d.Net.DHCPBackoffMax != time.Minute {
		t.Errorf("defaults: spread %s liveness %s/%d dhcp back-off %v", d.NIC.Spread, d.Liveness.Probe, d.Liveness.Failures, d.Net.DHCPBackoffMax)
	}
	for _, tc := range []struct {
		key, value string
		ok         bool
	}{
		{"nic.spread", "queues", true}, {"nic.spread", "rss", false},
		{"liveness.probe", "tcp", true}, {"liveness.probe", "/healthz", true}, {"liveness.probe", "off", true},
		{"liveness.probe", "healthz", false}, {"liveness.probe", "/a b", false},
		{"liveness.failures", "0", false}, {"liveness.interval", "500ms", true},
		{"net.dhcp_backoff_max", "5m", true}, {"net.dhcp_backoff_max", "x", false},
	} {
		c := Default()
		if err := c.Set(tc.key, tc.value); (err == nil) != tc.ok {
			t.Errorf("Set(%s, %q) = %v, want ok %v", tc.key, tc.value, err, tc.ok)
		}
	}
	c := Default()
	c.Set("liveness.probe", "tcp")
	c.Set("liveness.interval", "0s")
	if err := c.Validate(); err == nil {
		t.Error("liveness probe with a zero interval validated")
	}
}
