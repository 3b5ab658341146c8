package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/console"
	"github.com/hotpath-dev/hotpath/init/metrics"
	"github.com/hotpath-dev/hotpath/init/supervise"
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

// TestWorkloadState: what /healthz and the metrics see of the supervisor's
// state. A process failing its liveness probe is running and not ready; a
// stale Ready of a process gone is not ready.
func TestWorkloadState(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		name string
		st   supervise.State
		want metrics.WorkloadState
	}{
		{"ready", supervise.State{State: supervise.StateReady, PID: 2, Ready: true, Starts: 1, Started: t0},
			metrics.WorkloadState{State: "ready", Running: true, Ready: true, PID: 2, Starts: 1, Started: t0, Uptime: 5 * time.Second}},
		{"probe failing", supervise.State{State: supervise.StateRunning, PID: 2, Starts: 2, Restarts: 1, Exits: 1, Unresponsive: 1, Started: t0},
			metrics.WorkloadState{State: "running", Running: true, PID: 2, Starts: 2, Restarts: 1, Exits: 1, Unresponsive: 1, Started: t0, Uptime: 5 * time.Second}},
		{"down", supervise.State{State: supervise.StateCrashLoop, Ready: true, Starts: 3, Restarts: 2, CrashLoop: true, Started: t0},
			metrics.WorkloadState{State: "crash-loop", Starts: 3, Restarts: 2, CrashLoop: true, Started: t0}},
		{"stopping", supervise.State{State: supervise.StateReady, PID: 2, Ready: true, Stopping: true, Started: t0},
			metrics.WorkloadState{State: "ready", Running: true, Ready: true, PID: 2, Stopping: true, Started: t0, Uptime: 5 * time.Second}},
	} {
		if got := workloadState(c.st, t0.Add(5*time.Second)); got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
	for _, o := range []*observer{{}, nil} {
		if s := o.Snapshot(); s.Running || s.State != supervise.StateDown {
			t.Errorf("before the supervisor (observer %p): %+v", o, s)
		}
	}
}

// TestServeWiring: the init's management endpoint (observer.serve) binds
// mgmt.addr, answers /healthz, and exposes the guard's metrics.
func TestServeWiring(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	m, out := testMachine(t, t.TempDir(), map[string]string{"mgmt.addr": "127.0.0.1", "mgmt.port": strconv.Itoa(port)})
	o := startObserver(m.con, m.cfg, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := boot.Detail{}
	if err := o.serve(ctx, nil, nil, d); err != nil {
		t.Fatalf("serve: %v (%s)", err, out)
	}
	base := "http://" + d["addr"]
	if d["addr"] != net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) {
		t.Errorf("bound %q", d["addr"])
	}
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 { // no workload started
		t.Errorf("/healthz %d", resp.StatusCode)
	}
	resp, err = c.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, name := range []string{"hotpath_mgmt_connections_accepted_total ", "hotpath_mgmt_connections_refused_total 0"} {
		if !strings.Contains(string(body), name) {
			t.Errorf("/metrics lacks %q", name)
		}
	}
}
