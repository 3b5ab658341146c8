package config

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

const (
	token = "s3cr3t-T0KEN"
	pass  = "hunter2-PASS"
)

// secretConfig has secrets in every place a key can carry them.
func secretConfig(t *testing.T, extra ...string) Config {
	t.Helper()
	c, err := Parse(strings.NewReader(strings.Join(append([]string{
		"workload.env=API_TOKEN=" + token + " DB_PASSWORD=" + pass + " MODE=fast",
		"workload.args=-v --token=" + token + " -password " + pass + " " + token,
		"sysctl.net.ipv4.tcp_fastopen=3",
	}, extra...), "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func noSecret(t *testing.T, what, s string) {
	t.Helper()
	if strings.Contains(s, token) || strings.Contains(s, pass) {
		t.Errorf("%s carries a secret: %q", what, s)
	}
}

func TestRedaction(t *testing.T) {
	cmdline := `console=ttyS0 hotpath.workload.env="API_TOKEN=` + token + ` X=1" hotpath.workload.args=--token=` + token + ` hotpath.nic.gro=off`
	c := secretConfig(t)
	m := c.ReportMap()
	noSecret(t, "ReportMap", strings.Join(slices.Collect(maps.Values(m)), " "))
	noSecret(t, "ReportArgs", strings.Join(c.ReportArgs(), " "))
	noSecret(t, "RedactCmdline", c.RedactCmdline(cmdline))
	for _, tt := range []struct{ got, want string }{
		{m["workload.env"], "API_TOKEN=<redacted> DB_PASSWORD=<redacted> MODE=<redacted>"},
		{m["workload.args"], "-v --token=<redacted> -password <redacted> <redacted>"},
		{m["sysctl.net.ipv4.tcp_fastopen"], "3"},
		{m["report.secrets"], "redact"},
		{strings.Join(RedactArgs([]string{"-prefer-busy-poll=false", "-n=3", "-x=true", "-", "pos"}), " "),
			"-prefer-busy-poll=false -n=<redacted> -x=true <redacted> <redacted>"},
		// Nothing hidden: the command line as it was, quotes and spaces.
		{c.RedactCmdline(`a  hotpath.x="-v" hotpath.workload.args=-v`), `a  hotpath.x="-v" hotpath.workload.args=-v`},
		{c.RedactCmdline(cmdline), `console=ttyS0 hotpath.workload.env="API_TOKEN=<redacted> X=<redacted>" hotpath.workload.args=--token=<redacted> hotpath.nic.gro=off`},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	// report.redact hides more keys; report.secrets=show is the opt-in.
	c = secretConfig(t, "report.redact=sysctl.net.ipv4.tcp_fastopen,log.remote")
	if v := c.ReportMap()["sysctl.net.ipv4.tcp_fastopen"]; v != Redacted {
		t.Errorf("report.redact: %q", v)
	}
	if v := c.ReportMap()["log.remote"]; v != "" {
		t.Errorf("an empty hidden value: %q, want empty", v)
	}
	c = secretConfig(t, "report.secrets=show")
	if m := c.ReportMap(); !strings.Contains(m["workload.env"], token) || !strings.Contains(m["workload.args"], pass) {
		t.Errorf("report.secrets=show hides the values: %q", m)
	}
	if !strings.Contains(strings.Join(c.ReportArgs(), " "), token) || !strings.Contains(c.RedactCmdline(cmdline), token) {
		t.Errorf("report.secrets=show hides the args or the command line")
	}
}

// A bad value of a secret key, or a line that lost its key, is reported
// without the value: the error goes to the console and the report.
func TestSecretErrors(t *testing.T) {
	_, err := Parse(strings.NewReader("workload.env=API_TOKEN=x " + token + "\n" + pass + "\n"))
	if err == nil {
		t.Fatal("no error")
	}
	noSecret(t, "Parse error", err.Error())
	var c Config
	cmdErr := c.ApplyCmdline(`hotpath.workload.env="` + token + `"`)
	if cmdErr == nil {
		t.Fatal("no error")
	}
	noSecret(t, "cmdline error", cmdErr.Error())
	// User-data: the report's user_data.errors.
	_, ud := ApplyUserData(Default(), []byte("workload.env=API_TOKEN=x "+token+"\n"+pass+"\n"))
	if len(ud.Errors) != 2 {
		t.Errorf("user-data errors %q, want 2", ud.Errors)
	}
	noSecret(t, "user-data errors", strings.Join(ud.Errors, "\n"))
	if err := c.Set("report.redact", "workload.nope"); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "workload.nope") {
		t.Errorf("report.redact of an unknown key: %v", err)
	}
	if err := c.Set("report.secrets", "yes"); err == nil {
		t.Errorf("report.secrets=yes accepted")
	}
}
