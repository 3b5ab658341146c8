package kernelconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func loadFragment(t *testing.T, path string) []Requirement {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	frag, err := ParseFragment(filepath.Base(path), f)
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := Requirements([]*Fragment{frag})
	if err != nil {
		t.Fatal(err)
	}
	return reqs
}

func loadConfig(t *testing.T, path string) *Config {
	t.Helper()
	c, err := readConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCheckFixtures(t *testing.T) {
	reqs := loadFragment(t, "testdata/policy-small.config")
	tests := []struct {
		fixture string
		want    []struct {
			kind ViolationKind
			sym  string
			msg  string // must appear in Error()
		}
	}{
		{fixture: "clean.config"},
		{fixture: "forbidden.config", want: []struct {
			kind ViolationKind
			sym  string
			msg  string
		}{{Forbidden, "AUDIT", "CONFIG_AUDIT=y is set, but policy-small.config:4 requires it off"}}},
		{fixture: "missing.config", want: []struct {
			kind ViolationKind
			sym  string
			msg  string
		}{{Missing, "ENA_ETHERNET", "CONFIG_ENA_ETHERNET is not set, but policy-small.config:8 requires CONFIG_ENA_ETHERNET=y"}}},
		{fixture: "absent.config", want: []struct {
			kind ViolationKind
			sym  string
			msg  string
		}{{Missing, "NET_RX_BUSY_POLL", "CONFIG_NET_RX_BUSY_POLL is absent from .config"}}},
		{fixture: "mismatch.config", want: []struct {
			kind ViolationKind
			sym  string
			msg  string
		}{{Mismatch, "DEFAULT_TCP_CONG", `CONFIG_DEFAULT_TCP_CONG="cubic", but policy-small.config:12 requires CONFIG_DEFAULT_TCP_CONG="reno"`}}},
		// =m is on: a module is an option set (the policy's "off" means not
		// built at all), and a module is not the =y a requirement names.
		{fixture: "module-forbidden.config", want: []struct {
			kind ViolationKind
			sym  string
			msg  string
		}{{Forbidden, "NETFILTER", "CONFIG_NETFILTER=m is set, but policy-small.config:5 requires it off"}}},
		{fixture: "module-required.config", want: []struct {
			kind ViolationKind
			sym  string
			msg  string
		}{{Mismatch, "ENA_ETHERNET", "CONFIG_ENA_ETHERNET=m, but policy-small.config:8 requires CONFIG_ENA_ETHERNET=y"}}},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			vs := Check(reqs, loadConfig(t, filepath.Join("testdata", tc.fixture)))
			if len(vs) != len(tc.want) {
				t.Fatalf("got %d violations %v, want %d", len(vs), vs, len(tc.want))
			}
			for i, w := range tc.want {
				v := vs[i]
				if v.Kind != w.kind || v.Symbol != w.sym {
					t.Errorf("violation %d: got %v %s, want %v %s", i, v.Kind, v.Symbol, w.kind, w.sym)
				}
				if !strings.Contains(v.Error(), w.msg) {
					t.Errorf("violation %d: error %q does not contain %q", i, v.Error(), w.msg)
				}
			}
			if len(vs) > 0 {
				err := &PolicyError{Violations: vs, Config: tc.fixture}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), "CONFIG_"+w.sym) {
						t.Errorf("PolicyError %q does not name CONFIG_%s", err, w.sym)
					}
				}
			}
		})
	}
}

// The real policy against mutations of a config that satisfies it: each
// kind of violation is caught on the options the appliance depends on.
func TestCheckDefaultPolicy(t *testing.T) {
	frags, err := DefaultFragments()
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := Requirements(frags)
	if err != nil {
		t.Fatal(err)
	}
	clean := func() *Config {
		c := NewConfig()
		for _, r := range reqs {
			if r.Value != NotSet || len(r.Symbol)%2 == 0 {
				c.Set(r.Symbol, r.Value) // some "not set" symbols absent, as for invisible ones
			}
		}
		return c
	}
	if vs := Check(reqs, clean()); len(vs) != 0 {
		t.Fatalf("clean config: %v", vs)
	}
	tests := []struct {
		name   string
		mutate func(*Config)
		kind   ViolationKind
		sym    string
	}{
		{"mitigations on", func(c *Config) { c.Set("CPU_MITIGATIONS", "y") }, Forbidden, "CPU_MITIGATIONS"},
		{"old mitigations name on", func(c *Config) { c.Set("SPECULATION_MITIGATIONS", "y") }, Forbidden, "SPECULATION_MITIGATIONS"},
		{"retpoline", func(c *Config) { c.Set("RETPOLINE", "y") }, Forbidden, "RETPOLINE"},
		{"audit", func(c *Config) { c.Set("AUDIT", "y") }, Forbidden, "AUDIT"},
		{"auditsyscall", func(c *Config) { c.Set("AUDITSYSCALL", "y") }, Forbidden, "AUDITSYSCALL"},
		{"netfilter", func(c *Config) { c.Set("NETFILTER", "y") }, Forbidden, "NETFILTER"},
		{"netfilter as module", func(c *Config) { c.Set("NETFILTER", "m") }, Forbidden, "NETFILTER"},
		{"cubic as module", func(c *Config) { c.Set("TCP_CONG_CUBIC", "m") }, Forbidden, "TCP_CONG_CUBIC"},
		{"ena as module", func(c *Config) { c.Set("ENA_ETHERNET", "m") }, Mismatch, "ENA_ETHERNET"},
		{"seccomp", func(c *Config) { c.Set("SECCOMP", "y") }, Forbidden, "SECCOMP"},
		{"modules", func(c *Config) { c.Set("MODULES", "y") }, Forbidden, "MODULES"},
		{"ena missing", func(c *Config) { c.Set("ENA_ETHERNET", NotSet) }, Missing, "ENA_ETHERNET"},
		{"virtio-net as module", func(c *Config) { c.Set("VIRTIO_NET", "m") }, Mismatch, "VIRTIO_NET"},
		{"efi stub missing", func(c *Config) { c.Set("EFI_STUB", NotSet) }, Missing, "EFI_STUB"},
		{"power button missing", func(c *Config) { c.Set("ACPI_BUTTON", NotSet) }, Missing, "ACPI_BUTTON"},
		{"serial console missing", func(c *Config) { c.Set("SERIAL_8250_CONSOLE", NotSet) }, Missing, "SERIAL_8250_CONSOLE"},
		{"busy poll missing", func(c *Config) { c.Set("NET_RX_BUSY_POLL", NotSet) }, Missing, "NET_RX_BUSY_POLL"},
		{"xps missing", func(c *Config) { c.Set("XPS", NotSet) }, Missing, "XPS"},
		{"cubic default", func(c *Config) { c.Set("DEFAULT_TCP_CONG", `"cubic"`) }, Mismatch, "DEFAULT_TCP_CONG"},
		{"cmdline without mitigations=off", func(c *Config) { c.Set("CMDLINE", `"console=ttyS0"`) }, Overridden, "CMDLINE"},
		{"cmdline re-enabling mitigations", func(c *Config) {
			v, _ := c.Get("CMDLINE")
			c.Set("CMDLINE", Quote(Unquote(v)+" hotpath.workload.port=80 mitigations=auto"))
		}, Overridden, "CMDLINE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := clean()
			tc.mutate(c)
			vs := Check(reqs, c)
			if len(vs) != 1 {
				t.Fatalf("got %d violations %v, want 1", len(vs), vs)
			}
			if vs[0].Kind != tc.kind || vs[0].Symbol != tc.sym {
				t.Fatalf("got %v on %s, want %v on %s", vs[0].Kind, vs[0].Symbol, tc.kind, tc.sym)
			}
			if !strings.Contains(vs[0].Error(), "CONFIG_"+tc.sym) {
				t.Fatalf("error %q does not name the option", vs[0].Error())
			}
		})
	}
}

func TestSummary(t *testing.T) {
	frags, err := DefaultFragments()
	if err != nil {
		t.Fatal(err)
	}
	reqs, _ := Requirements(frags)
	s := Summary(reqs, nil)
	for _, want := range []string{"policy verified", "base.config", "policy.config", "AUDIT", "NETFILTER", "CPU_MITIGATIONS", `DEFAULT_TCP_CONG="reno"`} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}

// The summary's text, exactly, for a small set: the counts per fragment
// in their first-seen order, absent lines apart, the policy's lines
// sorted (off) or in order (on), and the absent symbols sorted.
func TestSummaryText(t *testing.T) {
	r := func(frag, sym, val string) Requirement { return Requirement{Symbol: sym, Value: val, Fragment: frag} }
	gone := r("policy.config", "RETPOLINE", NotSet)
	gone2 := r("policy.config", "PAGE_TABLE_ISOLATION", NotSet)
	reqs := []Requirement{
		r("base.config", "NET", "y"),
		r("policy.config", "SECCOMP", NotSet),
		gone,
		r("policy.config", "AUDIT", NotSet),
		r("policy.config", "CMDLINE", `"x"`),
		r("base.config", "MODULES", NotSet),
		gone2,
		r("arm64/policy.config", "HZ", "100"),
	}
	got := Summary(reqs, []Absent{{Requirement: gone}, {Requirement: gone2}})
	want := "policy verified: 6 requested options hold in the final .config (2 more name symbols this tree does not define; not counted)\n" +
		"  base.config      2 options hold (1 on/with value, 1 off)\n" +
		"  policy.config    3 options hold (1 on/with value, 2 off); 2 lines name symbols this tree lacks\n" +
		"  arm64/policy.config   1 options hold (1 on/with value, 0 off)\n" +
		"  policy off: AUDIT SECCOMP\n" +
		"  policy on:  CMDLINE=\"x\" HZ=100\n" +
		"  not in this tree (other trees', see fragments/other-trees.txt): PAGE_TABLE_ISOLATION RETPOLINE\n"
	if got != want {
		t.Errorf("Summary:\n%s\nwant:\n%s", got, want)
	}
	if got := Summary([]Requirement{r("base.config", "NET", "y")}, nil); got != "policy verified: 1 requested options hold in the final .config\n  base.config      1 options hold (1 on/with value, 0 off)\n" {
		t.Errorf("Summary without policy or absent lines:\n%q", got)
	}
}

func TestPolicyErrorText(t *testing.T) {
	v := Violation{Requirement: Requirement{Symbol: "AUDIT", Value: NotSet, Fragment: "policy.config", Line: 3}, Kind: Forbidden, Got: "y"}
	e := &PolicyError{Violations: []Violation{v, v}, Config: "/b/.config"}
	want := "kernel config: 2 requested option(s) did not stick (in /b/.config):\n  " + v.Error() + "\n  " + v.Error() +
		"\nfix the fragment (enable what the option depends on, or drop the option)"
	if e.Error() != want {
		t.Errorf("PolicyError:\n%s\nwant:\n%s", e.Error(), want)
	}
	if e.Config = ""; strings.Contains(e.Error(), "(in ") {
		t.Errorf("no .config, yet: %s", e.Error())
	}
}
