// Package sysctl writes kernel parameters under /proc/sys as boot steps.
//
// Each sysctl is its own step so the boot report says, per parameter,
// whether it was set, skipped (the kernel lacks it: the file is missing) or
// failed. The proc root is a parameter so tests run the steps against a fake
// tree.
package sysctl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hotpath-dev/hotpath/init/boot"
)

// Setting is one sysctl by dotted name.
type Setting struct {
	Name  string // net.core.busy_poll
	Value string
}

// Defaults are the sysctls the appliance sets (before configuration
// overrides), with why:
//   - busy_poll/busy_read: spin on the NIC queue in epoll/recv instead of
//     sleeping for the interrupt (case study step 6); values come from config.
//   - somaxconn/tcp_max_syn_backlog: a benchmark opens hundreds of
//     connections at once; the accept queue must not overflow.
//   - default_qdisc=pfifo_fast: the case study's step 8 (noqueue) decided
//     again on Linux 6.12, whose ENA and virtio_net run byte queue limits:
//     behind noqueue a queue that BQL or a full ring stops drops the packet
//     ("Virtual device eth0 asks to queue packet!"), behind pfifo_fast it
//     waits. 6.12's pfifo_fast takes no qdisc lock (TCQ_F_NOLOCK) and is
//     bypassed while empty (TCQ_F_CAN_BYPASS); one per tx queue under mq,
//     each used by one CPU (XPS). Measured in README "Step 8 on Linux
//     6.12". Must be set before the NIC comes up so mq gets these children.
//   - tcp_congestion_control=reno: cheapest per-ACK work (step 9).
//   - netdev_max_backlog: room for bursts between NAPI polls.
//   - tcp_slow_start_after_idle=0: keep-alive connections keep their window.
//   - fs.nr_open/file-max: one fd per connection, many connections.
func Defaults(busyPoll, busyRead int) []Setting {
	return []Setting{
		{"net.core.busy_poll", fmt.Sprint(busyPoll)},
		{"net.core.busy_read", fmt.Sprint(busyRead)},
		{"net.core.somaxconn", "65535"},
		{"net.ipv4.tcp_max_syn_backlog", "65535"},
		{"net.core.default_qdisc", "pfifo_fast"},
		{"net.ipv4.tcp_congestion_control", "reno"},
		{"net.core.netdev_max_backlog", "65536"},
		{"net.ipv4.tcp_slow_start_after_idle", "0"},
		{"fs.nr_open", "1048576"},
		{"fs.file-max", "1048576"},
	}
}

// Merge returns base with overrides applied: an override of a name in base
// replaces its value in place; other overrides are appended in the order of
// names (sorted by the caller).
func Merge(base []Setting, names []string, overrides map[string]string) []Setting {
	out := append([]Setting(nil), base...)
	for _, n := range names {
		v := overrides[n]
		found := false
		for i := range out {
			if out[i].Name == n {
				out[i].Value = v
				found = true
			}
		}
		if !found {
			out = append(out, Setting{n, v})
		}
	}
	return out
}

// Path returns the file of a dotted sysctl name under procRoot.
func Path(procRoot, name string) string {
	return filepath.Join(procRoot, "sys", strings.ReplaceAll(name, ".", "/"))
}

// Read returns the value of a sysctl with whitespace normalised.
func Read(procRoot, name string) (string, error) {
	b, err := os.ReadFile(Path(procRoot, name))
	if err != nil {
		return "", err
	}
	return strings.Join(strings.Fields(string(b)), " "), nil
}

// Step returns the boot step that sets one sysctl and reads it back.
func Step(procRoot string, s Setting) boot.Step {
	p := Path(procRoot, s.Name)
	want := strings.Join(strings.Fields(s.Value), " ")
	return boot.Step{
		Name: "sysctl " + s.Name,
		Apply: func(_ context.Context, d boot.Detail) error {
			if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
				return boot.Skip("%s does not exist (kernel without this feature)", p)
			}
			// No O_CREATE: a sysctl file is written, never created. O_TRUNC
			// is what a shell's ">" does; /proc/sys ignores it.
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				return fmt.Errorf("sysctl %s: %w", s.Name, err)
			}
			_, werr := f.WriteString(s.Value)
			cerr := f.Close()
			if err := errors.Join(werr, cerr); err != nil {
				return fmt.Errorf("sysctl %s=%s: %w", s.Name, s.Value, err)
			}
			d["value"] = want
			return nil
		},
		Verify: func(_ context.Context, d boot.Detail) error {
			got, err := Read(procRoot, s.Name)
			if err != nil {
				return fmt.Errorf("sysctl %s: %w", s.Name, err)
			}
			if got != want {
				return fmt.Errorf("sysctl %s reads %q, want %q", s.Name, got, want)
			}
			return nil
		},
	}
}

// Steps returns one step per setting.
func Steps(procRoot string, settings []Setting) []boot.Step {
	steps := make([]boot.Step, len(settings))
	for i, s := range settings {
		steps[i] = Step(procRoot, s)
	}
	return steps
}
