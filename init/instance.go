package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/console"
	"github.com/hotpath-dev/hotpath/init/imds"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/init/supervise"
	"github.com/hotpath-dev/hotpath/init/sysctl"
	"github.com/hotpath-dev/hotpath/init/timesync"
)

// imdsBudget bounds everything the init asks the metadata service at boot.
// On EC2 the service answers in well under a millisecond; the budget only
// matters when imds=on where there is none.
const imdsBudget = 10 * time.Second

// instance is what the per-instance steps found; it goes into the boot
// report.
type instance struct {
	ec2      bool // the metadata service was asked (auto on EC2, or on)
	userData report.UserData
	info     *report.Instance
	sources  map[string]string
	settings []sysctl.Setting // the sysctls after user-data
	sync     *timesync.Syncer
	privs    *report.Privileges
}

// instanceSteps runs after the network step: the metadata service
// (decision, user-data, identity), user-data as configuration (applied
// whole or not at all, keys acting before the network refused, sysctls
// re-applied), then time sync. cfg is updated in place; settings are the
// sysctls already applied.
func instanceSteps(ctx context.Context, con *console.Console, runStep func(boot.Step) report.Step,
	cfg *config.Config, settings []sysctl.Setting) *instance {
	in := &instance{userData: report.UserData{Status: report.UserDataNone}, settings: settings}
	var data []byte
	runStep(boot.Step{Name: "imds", Apply: func(_ context.Context, d boot.Detail) error {
		on, why := imds.Decide(cfg.IMDS, "/")
		in.info = &report.Instance{IMDS: why}
		if !on {
			return boot.Skip("%s", why)
		}
		in.ec2 = true
		ictx, cancel := context.WithTimeout(ctx, imdsBudget)
		defer cancel()
		c := &imds.Client{}
		var err error
		data, err = c.UserData(ictx)
		if err != nil {
			in.userData = report.UserData{Status: report.UserDataError, Note: err.Error()}
			in.info.Error = err.Error()
			return fmt.Errorf("user-data: %w", err)
		}
		id, err := c.Identity(ictx)
		in.info.InstanceID, in.info.InstanceType, in.info.AvailabilityZone = id.InstanceID, id.InstanceType, id.AvailabilityZone
		in.info.AMIID, in.info.MAC, in.info.DeviceNumber = id.AMIID, id.MAC, id.DeviceNumber
		d["instance_id"], d["instance_type"], d["zone"] = id.InstanceID, id.InstanceType, id.AvailabilityZone
		d["user_data_bytes"] = fmt.Sprint(len(data))
		if err != nil {
			in.info.Error = err.Error()
			return fmt.Errorf("identity: %w", err)
		}
		return nil
	}})

	// User-data as configuration. Bad user-data never stops the boot: it
	// is reported and the baked configuration holds.
	if in.ec2 && in.userData.Status != report.UserDataError {
		runStep(boot.Step{Name: "user-data", Apply: func(_ context.Context, d boot.Detail) error {
			next, res := config.ApplyUserData(*cfg, data)
			in.userData = res
			d["status"] = res.Status
			switch res.Status {
			case report.UserDataNone:
				return boot.Skip("the instance has no user-data")
			case report.UserDataForeign:
				con.Logf("user-data: %s", res.Note)
				return boot.Skip("%s", res.Note)
			case report.UserDataRejected:
				con.Logf("user-data REJECTED (%s): %s", res.Note, strings.Join(res.Errors, "; "))
				return fmt.Errorf("rejected, booting with the baked configuration: %s: %s", res.Note, strings.Join(res.Errors, "; "))
			}
			*cfg = next
			d["applied"] = strings.Join(res.Applied, " ")
			for k, why := range res.Refused {
				con.Logf("user-data: %s refused: %s", k, why)
				d["refused "+k] = why
			}
			return nil
		}})
	}

	// Sysctls that user-data changed are applied again.
	if in.userData.Status == report.UserDataApplied {
		merged := sysctl.Merge(sysctl.Defaults(cfg.BusyPoll, cfg.BusyRead), cfg.SysctlNames(), cfg.Sysctls)
		for _, s := range changedSysctls(settings, merged) {
			st := sysctl.Step(procRoot, s)
			st.Name += " (user-data)"
			runStep(st)
			in.userData.Reapplied = append(in.userData.Reapplied, st.Name)
		}
		in.settings = merged
	}
	in.sources = cfg.SourceMap(config.Sources(readOr(config.Path), string(readOr(procRoot+"/cmdline"))), in.userData.Applied)

	// Time: the first query is waited for on EC2 (Amazon Time Sync answers
	// at once, and the workload should start with the right time); on
	// other platforms it runs in the background so that a server that is
	// not there costs the boot nothing.
	runStep(boot.Step{Name: "time-sync", Apply: func(_ context.Context, d boot.Detail) error {
		if cfg.NTP == "off" {
			return boot.Skip("time.ntp=off")
		}
		in.sync = timesync.New(timesync.Options{Server: cfg.NTP, Clock: timesync.System{},
			Log: func(f string, a ...any) { con.Logf("time-sync: "+f, a...) },
			Event: func(detail string, st report.TimeSync) {
				con.Line(report.EventPrefix, report.Event{Kind: report.EventTimeSync, Millis: bootMillis(), Detail: detail, Time: &st})
			}})
		d["server"] = cfg.NTP
		var err error
		if in.ec2 {
			sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			var st timesync.Status
			st, err = in.sync.Sync(sctx)
			cancel()
			if err == nil {
				d["offset"], d["stepped"] = st.Offset.String(), fmt.Sprint(st.Stepped)
			}
		} else {
			d["first_query"] = "in the background (not EC2)"
		}
		go func() {
			defer recoverLog(con, "time-sync")
			in.sync.Run(ctx)
		}()
		return err
	}})

	// Privileges of the workload.
	runStep(boot.Step{Name: "workload-privileges", Apply: func(_ context.Context, d boot.Detail) error {
		in.privs = &report.Privileges{UID: cfg.WorkloadUID, GID: cfg.WorkloadGID, Caps: cfg.WorkloadCapList()}
		d["uid"], d["gid"], d["caps"] = fmt.Sprint(cfg.WorkloadUID), fmt.Sprint(cfg.WorkloadGID), strings.Join(in.privs.Caps, ",")
		if cfg.WorkloadUID == 0 {
			return boot.Skip("workload.user=0: the workload runs as root with every capability")
		}
		if err := supervise.LockNoNewPrivs(); err != nil {
			return err
		}
		in.privs.NoNewPrivs = true
		return nil
	}})
	return in
}

// supervisePrivileges converts the report's form for the supervisor.
func (in *instance) supervisePrivileges() *supervise.Privileges {
	if in == nil || in.privs == nil || in.privs.UID == 0 {
		return nil
	}
	p := &supervise.Privileges{UID: in.privs.UID, GID: in.privs.GID}
	for _, n := range in.privs.Caps {
		p.Caps = append(p.Caps, uintptr(config.CapNames[n]))
	}
	return p
}

// fill puts what the instance steps found into the boot report.
func (in *instance) fill(rep *report.Report) {
	if in == nil {
		return
	}
	rep.Sources, rep.Instance, rep.Privileges = in.sources, in.info, in.privs
	ud := in.userData
	rep.UserData = &ud
	if in.sync != nil {
		st := in.sync.Status().Report()
		rep.Time = &st
	}
}

// changedSysctls returns the settings of next that are new or differ from
// prev.
func changedSysctls(prev, next []sysctl.Setting) []sysctl.Setting {
	old := map[string]string{}
	for _, s := range prev {
		old[s.Name] = s.Value
	}
	var out []sysctl.Setting
	for _, s := range next {
		if v, ok := old[s.Name]; !ok || v != s.Value {
			out = append(out, s)
		}
	}
	return out
}

// readOr returns the file's content, or nil when it cannot be read (the
// sources then say "default" for what it would have set).
func readOr(path string) []byte {
	b, _ := os.ReadFile(path)
	return b
}
