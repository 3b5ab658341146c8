package config

import (
	"fmt"
	"slices"
	"strings"
)

// Redacted stands for a value the boot report does not show.
const Redacted = "<redacted>"

// secretKeys are the keys whose values the boot report (on the serial
// console, at /report and in shipped logs) never shows unless
// report.secrets=show: the workload's environment and arguments are where
// tokens and passwords go. report.redact marks more keys.
var secretKeys = []string{"workload.env", "workload.args"}

// IsSecret reports whether the key name is always kept out of the report.
func IsSecret(name string) bool { return slices.Contains(secretKeys, name) }

// secret reports whether the report hides the value of key name.
func (c *Config) secret(name string) bool {
	if c.ReportSecrets {
		return false
	}
	return IsSecret(name) || slices.Contains(c.ReportRedact, name)
}

// RedactEnv returns NAME=value pairs as NAME=<redacted>: the names say
// what the workload was given, the values stay on the machine.
func RedactEnv(env []string) []string {
	out := make([]string, len(env))
	for i, e := range env {
		n, _, _ := strings.Cut(e, "=")
		out[i] = n + "=" + Redacted
	}
	return out
}

// RedactArgs returns the workload's arguments with every value hidden: a
// flag ("-v", "--port") is kept, a flag's attached value ("--token=x")
// and every word that is not a flag (a flag's separate value, a
// positional argument) become <redacted>; only an attached true or false
// (Go's boolean flags: "-prefer-busy-poll=false") stays, as it says
// nothing a reader could use.
func RedactArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		switch {
		case !strings.HasPrefix(a, "-") || a == "-":
			out[i] = Redacted
		case strings.Contains(a, "="):
			n, v, _ := strings.Cut(a, "=")
			if v != "true" && v != "false" {
				a = n + "=" + Redacted
			}
			out[i] = a
		default:
			out[i] = a
		}
	}
	return out
}

// redactValue is how the report shows the value v of a hidden key.
func redactValue(name, v string) string {
	switch {
	case v == "":
		return ""
	case name == "workload.env":
		return strings.Join(RedactEnv(strings.Fields(v)), " ")
	case name == "workload.args":
		return strings.Join(RedactArgs(strings.Fields(v)), " ")
	}
	return Redacted
}

// ReportMap is Map as the boot report shows it: the values of secret
// keys (IsSecret, report.redact) hidden unless report.secrets=show.
func (c *Config) ReportMap() map[string]string {
	m := c.Map()
	for k, v := range m {
		if c.secret(k) {
			m[k] = redactValue(k, v)
		}
	}
	return m
}

// ReportArgs are the workload's arguments as the report shows them.
func (c *Config) ReportArgs() []string {
	if !c.secret("workload.args") {
		return c.WorkloadArgs
	}
	return RedactArgs(c.WorkloadArgs)
}

// RedactCmdline returns a kernel command line (as /proc/cmdline holds it)
// with the values of hidden hotpath.<key>= words replaced. Unchanged when
// nothing is hidden (a test compares it with the built command line);
// else the words are joined by one space, a word with a space
// double-quoted again.
func (c *Config) RedactCmdline(cmdline string) string {
	words := SplitCmdline(cmdline)
	changed := false
	for i, w := range words {
		if rest, ok := strings.CutPrefix(w, CmdlinePrefix); ok {
			if k, v, ok := strings.Cut(rest, "="); ok && c.secret(k) {
				if r := redactValue(k, v); r != v {
					w, changed = CmdlinePrefix+k+"="+r, true
				}
			}
		}
		if strings.ContainsAny(w, " \t") {
			if k, v, ok := strings.Cut(w, "="); ok {
				w = k + `="` + v + `"`
			} else {
				w = `"` + w + `"`
			}
		}
		words[i] = w
	}
	if !changed {
		return cmdline
	}
	return strings.Join(words, " ")
}

// setReportRedact sets report.redact: keys (fixed or sysctl.<name>) whose
// values the report hides besides the secret ones.
func (c *Config) setReportRedact(v string) error {
	var keys []string
	for _, k := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
		// Whether it names a key is checked by Validate (Keys cannot be
		// read from a setter in Keys: an initialization cycle).
		if !validSysctl(k) {
			return fmt.Errorf("%q is not a key name", k)
		}
		keys = append(keys, k)
	}
	c.ReportRedact = keys
	return nil
}

// validateRedact checks that report.redact names keys.
func (c *Config) validateRedact() error {
	for _, k := range c.ReportRedact {
		name, sysctl := strings.CutPrefix(k, sysctlPrefix)
		if lookup(k) == nil && !(sysctl && validSysctl(name)) {
			return fmt.Errorf("config: report.redact: %q is not a configuration key", k)
		}
	}
	return nil
}
