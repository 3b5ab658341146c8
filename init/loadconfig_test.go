package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/console"
	"github.com/hotpath-dev/hotpath/init/report"
)

// TestLoadConfig: the boot's configuration is the baked file with the
// kernel command line's hotpath.<key>= words on top; unknown keys of either
// are named (the command line's with its prefix), each key's source is the
// layer that set it last, and a static mode without an address falls back
// to DHCP.
func TestLoadConfig(t *testing.T) {
	for _, tc := range []struct {
		name, file, cmdline string // file "" = no init.conf
		want                map[string]string
		sources             map[string]string
		unknown             []string
	}{
		{
			name:    "cmdline over file",
			file:    "workload.port=9000\nnic.coalesce=static\nnic.gro=on\n",
			cmdline: "console=ttyS0 hotpath.workload.port=9100 hotpath.nic.coalesce=adaptive quiet hotpath.sysctl.net.core.somaxconn=512\n",
			want: map[string]string{"workload.port": "9100", "nic.coalesce": "adaptive", "nic.gro": "on",
				"sysctl.net.core.somaxconn": "512", "net.mode": "dhcp"},
			sources: map[string]string{"workload.port": report.FromCmdline, "nic.coalesce": report.FromCmdline,
				"nic.gro": report.FromFile, "sysctl.net.core.somaxconn": report.FromCmdline},
		},
		{
			name:    "no file, cmdline only",
			cmdline: `hotpath.workload.args="-a -b" hotpath.nic.spread=queues hotpath.time.ntp=off`,
			want:    map[string]string{"workload.args": "-a -b", "nic.spread": "queues", "time.ntp": "off", "workload.port": "8080"},
			sources: map[string]string{"workload.args": report.FromCmdline, "nic.spread": report.FromCmdline},
		},
		{
			name:    "unknown keys named, the rest applied",
			file:    "workload.prot=1\n",
			cmdline: "hotpath.bogus=1 hotpath.mgmt.port=9200",
			want:    map[string]string{"mgmt.port": "9200"},
			sources: map[string]string{"mgmt.port": report.FromCmdline},
			unknown: []string{"workload.prot", "hotpath.bogus"},
		},
		{
			name:    "static without address falls back to dhcp",
			cmdline: "hotpath.net.mode=static",
			want:    map[string]string{"net.mode": "dhcp"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			conf, cmdline := filepath.Join(dir, "init.conf"), filepath.Join(dir, "cmdline")
			if tc.file != "" {
				os.WriteFile(conf, []byte(tc.file), 0o644)
			}
			os.WriteFile(cmdline, []byte(tc.cmdline), 0o644)
			var out bytes.Buffer
			cfg, unknown, layers := loadConfig(&console.Console{Out: &out}, conf, cmdline)
			m := cfg.Map()
			for k, v := range tc.want {
				if m[k] != v {
					t.Errorf("%s = %q, want %q", k, m[k], v)
				}
			}
			for k, v := range tc.sources {
				if layers[k] != v {
					t.Errorf("source of %s = %q, want %q", k, layers[k], v)
				}
			}
			if !slices.Equal(unknown, tc.unknown) {
				t.Errorf("unknown %v, want %v", unknown, tc.unknown)
			}
			if len(tc.unknown) > 0 && !strings.Contains(out.String(), "UNKNOWN configuration keys") {
				t.Errorf("unknown keys not logged:\n%s", out.String())
			}
		})
	}
}
