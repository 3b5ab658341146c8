package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/vm"
)

// whoamiPkg is the test workload that reports its credentials.
const whoamiPkg = "github.com/hotpath-dev/hotpath/tests/workloads/whoami"

// ec2SMBIOS makes the guest's DMI say EC2, so that the init's imds=auto
// decides for the metadata service the way it does on a Nitro instance.
const ec2SMBIOS = "type=1,manufacturer=Amazon EC2,product=c5n.xlarge"

// creds mirrors tests/workloads/whoami's answer.
type creds struct {
	UID, GID, Groups              string
	CapEff, CapAmb                string
	NoNewPrivs                    string
	Nofile                        uint64
	BusyPoll                      int
	RaiseBusyPoll, PreferBusyPoll string
}

// bootEC2 boots disk as an EC2 instance: DMI says "Amazon EC2", a strict
// fake IMDS serves userData (nil: none) at 169.254.169.254 and an NTP
// server answers from the host's clock at 169.254.169.123, both inside the
// guest's namespace; rtc, if set, is the guest's wrong RTC.
func bootEC2(t *testing.T, disk string, userData []byte, rtc string) (*booted, *vm.FakeIMDS, *vm.NTPServer) {
	t.Helper()
	fake := vm.NewFakeIMDS(vm.GuestMAC, userData)
	var ntpSrv *vm.NTPServer
	b := bootConfig(t, vm.Config{Disk: disk, CPUs: 2, RTCBase: rtc, SMBIOS: []string{ec2SMBIOS},
		Prepare: func(ns *vm.Netns) error {
			hs, err := ns.StartIMDS(fake)
			if err != nil {
				return err
			}
			t.Cleanup(func() { hs.Close() })
			ntpSrv, err = ns.StartNTP()
			if err != nil {
				return err
			}
			t.Cleanup(func() { ntpSrv.Close() })
			return nil
		}}, 0)
	return b, fake, ntpSrv
}

// whoami asks the workload at port who it runs as; it also returns the
// response's Date header and when the answer arrived.
func whoami(t *testing.T, b *booted, port string) (creds, time.Time, time.Time) {
	t.Helper()
	c := b.Netns.HTTPClient(30 * time.Second)
	resp, err := c.Get("http://" + net.JoinHostPort(b.Addr, port) + "/whoami")
	if err != nil {
		t.Fatalf("GET /whoami on port %s: %v", port, err)
	}
	at := time.Now()
	defer resp.Body.Close()
	var cr creds
	if err := json.NewDecoder(resp.Body).Decode(&cr); err != nil {
		t.Fatalf("/whoami: %v", err)
	}
	date, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		t.Errorf("Date header %q: %v", resp.Header.Get("Date"), err)
	}
	return cr, date, at
}

// refused checks nothing listens on port in the guest.
func refused(t *testing.T, b *booted, port string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := b.Netns.DialContext(ctx, "tcp", net.JoinHostPort(b.Addr, port))
	if err == nil {
		c.Close()
		t.Errorf("the guest accepts on port %s too", port)
	}
}

// TestIMDS boots an image with the whoami workload as an EC2 instance whose
// RTC is six years behind, with user-data that moves the workload to port
// 9090, raises a sysctl and tries a key it may not change; then the same
// image with bad user-data.
func TestIMDS(t *testing.T) {
	requireE2E(t)
	disk := buildImage(t, whoamiPkg)

	t.Run("user-data", func(t *testing.T) {
		ud := []byte("# per instance\nworkload.port=9090\nsysctl.net.core.somaxconn=8192\nnet.mode=static\n")
		b, fake, ntpSrv := bootEC2(t, disk, ud, "2020-01-01T00:00:00")
		r := b.rep

		t.Run("behaviour", func(t *testing.T) {
			// The workload answers where user-data says, and only there.
			cr, date, at := whoami(t, b, "9090")
			refused(t, b, "8080")
			t.Run("clock", func(t *testing.T) {
				if d := at.Sub(date); d.Abs() > 2*time.Second {
					t.Errorf("guest Date %v is %v from the host clock (%v); booted with its RTC at 2020", date, d, at)
				}
				if r.Time == nil || r.Time.Steps != 1 || r.Time.Syncs < 1 || r.Time.Server != vm.TimeSyncAddr || r.Time.LastSync == "" {
					t.Errorf("report time %+v: want one step, synced with %s", r.Time, vm.TimeSyncAddr)
				}
				if ntpSrv.Answers() < 1 {
					t.Error("the NTP server was never asked")
				}
				// The first sync stepped the clock by the six years the
				// RTC was behind.
				ev, _, err := b.Console.WaitEvent(context.Background(), 0, report.EventTimeSync)
				if years := 5 * 365 * 24 * time.Hour; err != nil || ev.Time == nil || !ev.Time.Stepped || ev.Time.OffsetMS < float64(years/time.Millisecond) {
					t.Errorf("first time-sync event %+v (%v): want a step of years", ev.Time, err)
				}
			})
			t.Run("privileges", func(t *testing.T) {
				want := creds{UID: "65534 65534 65534 65534", GID: "65534 65534 65534 65534", Groups: "",
					CapEff: "0000000000000000", CapAmb: "0000000000000000", NoNewPrivs: "1", Nofile: 1 << 20,
					// Busy polling holds unprivileged: every socket gets
					// net.core.busy_read (50 µs) as its SO_BUSY_POLL. On
					// Linux 6.12 raising it needs no privilege any more
					// (net/core/sock.c sk_setsockopt, SO_BUSY_POLL: only
					// val < 0 is refused; 6.1 asked CAP_NET_ADMIN);
					// SO_PREFER_BUSY_POLL still needs CAP_NET_ADMIN, which
					// is why the server's preference is set on its epoll
					// instances (EPIOCSPARAMS needs none).
					BusyPoll: 50, RaiseBusyPoll: "ok", PreferBusyPoll: "EPERM"}
				if cr != want {
					t.Errorf("workload credentials\n got %+v\nwant %+v", cr, want)
				}
				if p := r.Privileges; p == nil || p.UID != 65534 || p.GID != 65534 || len(p.Caps) != 0 || !p.NoNewPrivs {
					t.Errorf("report privileges %+v", p)
				}
			})
		})
		t.Run("report", func(t *testing.T) {
			ud := r.UserData
			if ud == nil || ud.Status != report.UserDataApplied {
				t.Fatalf("user-data %+v, want applied", ud)
			}
			if !slices.Equal(ud.Applied, []string{"sysctl.net.core.somaxconn", "workload.port"}) {
				t.Errorf("applied %q", ud.Applied)
			}
			if why := ud.Refused["net.mode"]; why == "" || len(ud.Refused) != 1 {
				t.Errorf("refused %v, want net.mode with its reason", ud.Refused)
			}
			for k, want := range map[string]string{"workload.port": report.FromUserData, "sysctl.net.core.somaxconn": report.FromUserData,
				"net.mode": report.FromDefault, "imds": report.FromDefault} {
				if got := r.Sources[k]; got != want {
					t.Errorf("source of %s: %q, want %q", k, got, want)
				}
			}
			if r.Config["workload.port"] != "9090" || r.Config["net.mode"] != "dhcp" {
				t.Errorf("config workload.port=%s net.mode=%s", r.Config["workload.port"], r.Config["net.mode"])
			}
			if s, ok := r.Step("sysctl net.core.somaxconn (user-data)"); !ok || s.Status != report.Applied {
				t.Errorf("sysctl re-applied from user-data: %+v", s)
			}
			if r.Facts.Sysctls["net.core.somaxconn"] != "8192" {
				t.Errorf("net.core.somaxconn reads %q, want 8192", r.Facts.Sysctls["net.core.somaxconn"])
			}
		})
		t.Run("identity", func(t *testing.T) {
			in := r.Instance
			it := fake.Items
			if in == nil || in.InstanceID != it["/latest/meta-data/instance-id"] || in.InstanceType != it["/latest/meta-data/instance-type"] ||
				in.AvailabilityZone != it["/latest/meta-data/placement/availability-zone"] || in.AMIID != it["/latest/meta-data/ami-id"] ||
				in.MAC != vm.GuestMAC || in.DeviceNumber != "0" || in.Error != "" {
				t.Errorf("identity in the report %+v does not match what the fake served %v", in, it)
			}
			if in != nil && !strings.Contains(in.IMDS, "Amazon EC2") {
				t.Errorf("imds decision %q: want auto mode deciding on the DMI vendor", in.IMDS)
			}
		})
		t.Run("imdsv2 only", func(t *testing.T) {
			reqs := fake.Requests()
			if len(reqs) == 0 {
				t.Fatal("the fake IMDS saw no request")
			}
			for _, q := range reqs {
				if q.Method == "GET" && !q.Token || q.Status == 401 || q.Method == "PUT" && q.TTL == "" {
					t.Errorf("request %+v: the guest must only send token PUTs with a TTL and GETs with the token", q)
				}
			}
		})
	})

	t.Run("bad user-data", func(t *testing.T) {
		b, _, _ := bootEC2(t, disk, []byte("workload.port=9090\nworkload.prot=1\n"), "")
		r := b.rep
		if ud := r.UserData; ud == nil || ud.Status != report.UserDataRejected ||
			!strings.Contains(strings.Join(ud.Errors, " "), "workload.prot") {
			t.Errorf("user-data %+v: want rejected, naming workload.prot", ud)
		}
		if s, ok := r.Step("user-data"); !ok || s.Status != report.Failed || !strings.Contains(s.Error, "workload.prot") {
			t.Errorf("user-data step %+v", s)
		}
		if !strings.Contains(b.Console.String(), "user-data REJECTED") {
			t.Error("the console does not say the user-data was rejected")
		}
		// The baked configuration holds: the workload is on 8080.
		if r.Config["workload.port"] != "8080" || r.Sources["workload.port"] != report.FromDefault {
			t.Errorf("workload.port %s from %s, want the baked 8080", r.Config["workload.port"], r.Sources["workload.port"])
		}
		whoami(t, b, "8080")
		refused(t, b, "9090")
	})
}
