package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/config"
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
// report. The machine always has one, so that the steps need not check.
type instance struct {
	root     string   // where the platform's DMI is read (imds.Detect): "/", a temporary tree in tests
	bases    []string // the metadata service's endpoints; nil: imdsBases (tests: a fake on loopback)
	ec2      bool     // the metadata service was asked (auto on EC2, or on)
	data     []byte   // the user-data, as the metadata service returned it
	tooLarge string   // why the user-data was refused unread (imds.ErrTooLarge), or ""
	userData report.UserData
	info     *report.Instance
	layers   map[string]string // where the baked keys came from (config.Sources)
	sources  map[string]string
	sync     *timesync.Syncer
	privs    *report.Privileges
}

func newInstance(layers map[string]string) *instance {
	return &instance{root: "/", userData: report.UserData{Status: report.UserDataNone}, layers: layers}
}

// imdsSteps ask the metadata service, after the network step, for the
// user-data and the instance's identity: on EC2 (imds=auto), or always
// (imds=on).
func imdsSteps(m *machine) []boot.Step {
	in := m.inst
	return []boot.Step{{Name: "imds", Apply: func(_ context.Context, d boot.Detail) error {
		on, why := imds.Decide(m.cfg.IMDS, in.root)
		in.info = &report.Instance{IMDS: why}
		if !on {
			return boot.Skip("%s", why)
		}
		in.ec2 = true
		ictx, cancel := context.WithTimeout(m.ctx, imdsBudget)
		defer cancel()
		c := &imds.Client{}
		bases := in.bases
		if bases == nil {
			bases = imdsBases(m.cfg)
		}
		base, err := c.Choose(ictx, bases)
		d["endpoint"] = base
		if err != nil {
			in.userData = report.UserData{Status: report.UserDataError, Note: err.Error()}
			in.info.Error = err.Error()
			return err
		}
		in.data, err = c.UserData(ictx)
		switch {
		case errors.Is(err, imds.ErrTooLarge):
			// Not EC2's (it stores 16 KiB at most): refused, the baked
			// configuration holds, and the identity is still read.
			in.data, in.tooLarge = nil, err.Error()
		case err != nil:
			in.userData = report.UserData{Status: report.UserDataError, Note: err.Error()}
			in.info.Error = err.Error()
			return fmt.Errorf("user-data: %w", err)
		}
		id, err := c.Identity(ictx)
		in.info.InstanceID, in.info.InstanceType = id.InstanceID.String(), id.InstanceType.String()
		in.info.Region, in.info.AvailabilityZone = id.Region.String(), id.AvailabilityZone.String()
		in.info.AMIID, in.info.MAC, in.info.DeviceNumber = id.AMIID.String(), id.MAC.String(), id.DeviceNumber.String()
		d["instance_id"], d["instance_type"], d["zone"] = in.info.InstanceID, in.info.InstanceType, in.info.AvailabilityZone
		d["user_data_bytes"] = fmt.Sprint(len(in.data))
		if in.tooLarge != "" {
			d["user_data_bytes"] = "more than " + fmt.Sprint(imds.MaxUserData)
		}
		if err != nil {
			in.info.Error = err.Error()
			return fmt.Errorf("identity: %w", err)
		}
		return nil
	}}}
}

// userDataSteps take user-data as configuration, applied whole or not at
// all, keys acting before the network refused one by one (config.
// ApplyUserData). Bad user-data never stops the boot: it is reported and
// the baked configuration holds. No step without the metadata service.
func userDataSteps(m *machine) []boot.Step {
	in := m.inst
	if !in.ec2 || in.userData.Status == report.UserDataError {
		return nil
	}
	return []boot.Step{{Name: "user-data", Apply: func(_ context.Context, d boot.Detail) error {
		if in.tooLarge != "" {
			in.userData = report.UserData{Status: report.UserDataRejected, Note: in.tooLarge}
			d["status"] = report.UserDataRejected
			m.con.Logf("user-data REJECTED: %s", in.tooLarge)
			return fmt.Errorf("rejected, booting with the baked configuration: %s", in.tooLarge)
		}
		next, res := config.ApplyUserData(m.cfg, in.data)
		in.userData = res
		d["status"] = res.Status
		switch res.Status {
		case report.UserDataNone:
			return boot.Skip("the instance has no user-data")
		case report.UserDataForeign:
			m.con.Logf("user-data: %s", res.Note)
			return boot.Skip("%s", res.Note)
		case report.UserDataRejected:
			m.con.Logf("user-data REJECTED (%s): %s", res.Note, strings.Join(res.Errors, "; "))
			return fmt.Errorf("rejected, booting with the baked configuration: %s: %s", res.Note, strings.Join(res.Errors, "; "))
		}
		m.cfg = next
		d["applied"] = strings.Join(res.Applied, " ")
		for k, why := range res.Refused {
			m.con.Logf("user-data: %s refused: %s", k, why)
			d["refused "+k] = why
		}
		return nil
	}}}
}

// userDataSysctlSteps apply again the sysctls that user-data changed
// (sysctlSteps' merge of the configuration as user-data left it), and
// settle where each key of the configuration came from.
func userDataSysctlSteps(m *machine) []boot.Step {
	in := m.inst
	in.sources = m.cfg.SourceMap(in.layers, in.userData.Applied)
	if in.userData.Status != report.UserDataApplied {
		return nil
	}
	prev := m.settings
	steps := sysctlSteps(m)
	var out []boot.Step
	for i, s := range m.settings {
		if changed(prev, s) {
			st := steps[i]
			st.Name += " (user-data)"
			in.userData.Reapplied = append(in.userData.Reapplied, st.Name)
			out = append(out, st)
		}
	}
	return out
}

// timeSyncSteps keep the clock in sync with the server time.ntp decides
// on for this platform (config.NTPServer: by default Amazon Time Sync on
// EC2 and nothing elsewhere, so that a boot outside EC2 logs no failure).
// The first query is waited for when the metadata service was asked
// (Amazon Time Sync answers at once, and the workload should start with
// the right time); otherwise it runs in the background so that a server
// that is not there costs the boot nothing.
func timeSyncSteps(m *machine) []boot.Step {
	in, cfg, con := m.inst, &m.cfg, m.con
	return []boot.Step{{Name: "time-sync", Apply: func(_ context.Context, d boot.Detail) error {
		var platform imds.Platform
		if cfg.NTP == config.NTPAuto {
			platform = imds.Detect(in.root)
		}
		server, why := cfg.NTPServer(platform.EC2)
		if server == "" {
			if cfg.NTP == config.NTPAuto {
				why += " (" + platform.Why + ")"
			}
			return boot.Skip("%s", why)
		}
		if server == config.AmazonTimeSync {
			if server = chooseTimeSync(m, in.ec2); server == "" {
				return boot.Skip("no address family to reach Amazon Time Sync (net.mode=off, net.ipv6=off)")
			}
		}
		in.sync = timesync.New(timesync.Options{Server: server, Clock: timesync.System{},
			Log: func(f string, a ...any) { con.Logf("time-sync: "+f, a...) },
			Event: func(detail string, st report.TimeSync) {
				con.Line(report.EventPrefix, report.Event{Kind: report.EventTimeSync, Millis: bootMillis(), Detail: detail, Time: &st})
			}})
		d["server"] = server
		var err error
		if in.ec2 {
			sctx, cancel := context.WithTimeout(m.ctx, 3*time.Second)
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
			in.sync.Run(m.ctx)
		}()
		return err
	}}}
}

// privilegeSteps settle the workload's uid, gid and capabilities, and lock
// no_new_privs on the init (inherited across fork and execve) unless the
// workload runs as root.
func privilegeSteps(m *machine) []boot.Step {
	in, cfg := m.inst, &m.cfg
	return []boot.Step{{Name: "workload-privileges", Apply: func(_ context.Context, d boot.Detail) error {
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
	}}}
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

// changed reports whether s is new in prev or has another value there.
func changed(prev []sysctl.Setting, s sysctl.Setting) bool {
	for _, p := range prev {
		if p.Name == s.Name {
			return p.Value != s.Value
		}
	}
	return true
}
