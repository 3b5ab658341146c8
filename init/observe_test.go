package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/console"
)

// TestObserverConfigure: log.remote from user-data starts shipping when
// the baked configuration had none, and is refused on the console, not
// silently dropped, when shipping to another collector began at boot.
func TestObserverConfigure(t *testing.T) {
	for _, tc := range []struct {
		name, baked, userData string
		wantShip              bool
		wantRemote, wantLog   string
	}{
		{"none", "", "", false, "", ""},
		{"from user-data", "", "udp://192.0.2.1:514", true, "udp://192.0.2.1:514", "shipping logs to 192.0.2.1:514"},
		{"same as baked", "udp://192.0.2.1:514", "udp://192.0.2.1:514", true, "udp://192.0.2.1:514", ""},
		{"another one", "udp://192.0.2.1:514", "tcp://192.0.2.2:601", true, "udp://192.0.2.1:514", "log.remote=tcp://192.0.2.2:601 (user-data) refused"},
		{"bad baked, good user-data", "bogus", "tcp://192.0.2.2:601", true, "tcp://192.0.2.2:601", "shipping logs to 192.0.2.2:601"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			con := &console.Console{Out: &out}
			baked := config.Default()
			baked.LogRemote = tc.baked
			o := startObserver(con, baked, nil)
			out.Reset()
			next := baked
			next.LogRemote = tc.userData
			o.configure(next)
			if (o.ship != nil) != tc.wantShip {
				t.Errorf("shipping %v, want %v", o.ship != nil, tc.wantShip)
			}
			if o.cfg.LogRemote != tc.wantRemote {
				t.Errorf("log.remote %q, want %q", o.cfg.LogRemote, tc.wantRemote)
			}
			if tc.wantLog != "" && !strings.Contains(out.String(), tc.wantLog) {
				t.Errorf("console %q, want %q", out.String(), tc.wantLog)
			}
			if tc.wantLog == "" && out.Len() != 0 {
				t.Errorf("console %q, want nothing", out.String())
			}
		})
	}
}
