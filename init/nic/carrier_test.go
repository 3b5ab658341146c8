package nic

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/report"
	"golang.org/x/sys/unix"
)

// fakePHY is a copper PHY behind a NIC, as sysfs shows it: before the
// interface is up, carrier, speed and duplex answer EINVAL
// (net/core/net-sysfs.c: !netif_running); once up, carrier reads 0 until
// autonegotiation ends linkAfter later (never when linkAfter < 0), speed
// -1 (SPEED_UNKNOWN) and duplex "unknown" until then, and the negotiated
// values after. It is the Netlink, Files and Clock of a Tuner; time moves
// only when the step sleeps.
type fakePHY struct {
	fakeNetlink
	now       time.Time
	upAt      time.Time
	linkAfter time.Duration
	sleeps    int
	speed     string
}

func (p *fakePHY) LinkSetUp(string) error { p.up, p.upAt = true, p.now; return nil }

func (p *fakePHY) Now() time.Time { return p.now }
func (p *fakePHY) Sleep(ctx context.Context, d time.Duration) error {
	p.sleeps++
	p.now = p.now.Add(d)
	return ctx.Err()
}

func (p *fakePHY) linked() bool {
	return p.up && p.linkAfter >= 0 && p.now.Sub(p.upAt) >= p.linkAfter
}

func (p *fakePHY) ReadFile(name string) ([]byte, error) {
	attr := filepath.Base(name)
	if attr != "carrier" && attr != "speed" && attr != "duplex" {
		return os.ReadFile(name)
	}
	if !p.up {
		return nil, &fs.PathError{Op: "read", Path: name, Err: unix.EINVAL}
	}
	v := map[string][2]string{"carrier": {"0", "1"}, "speed": {"-1", p.speed}, "duplex": {"unknown", "full"}}[attr]
	if p.linked() {
		return []byte(v[1] + "\n"), nil
	}
	return []byte(v[0] + "\n"), nil
}

func (p *fakePHY) WriteFile(name string, data []byte) error { return os.WriteFile(name, data, 0o644) }

func linkUpStep(t *testing.T, linkAfter, wait time.Duration) (report.Step, *fakePHY) {
	t.Helper()
	ft := newTree(t)
	ft.addNIC(t, "eno1", 2, "0000:00:1f.6", "e1000e", 1, false)
	p := &fakePHY{now: time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC), linkAfter: linkAfter, speed: "1000"}
	opt := defaultOpts()
	opt.CarrierWait = wait
	tu := &Tuner{SysRoot: ft.sys, ProcRoot: ft.proc, Link: Link{Name: "eno1", Driver: "e1000e"}, CPUs: []int{0},
		NrCPUs: 1, Netlink: p, Files: p, Clock: p, Opt: opt}
	return boot.RunOne(context.Background(), stepNamed(t, tu.Steps(), "nic-link-up")), p
}

// TestLinkUpWaitsForCarrier: autonegotiation of 1000BASE-T takes seconds;
// nic-link-up waits for the carrier, not just the admin state, and reports
// when it came and at what speed and duplex.
func TestLinkUpWaitsForCarrier(t *testing.T) {
	for _, tc := range []struct {
		after time.Duration
		want  string
	}{
		{0, "0s"},
		{2900 * time.Millisecond, "2.9s"},
		{10 * time.Second, "10s"}, // at the bound exactly: still in time
	} {
		r, p := linkUpStep(t, tc.after, 10*time.Second)
		d := r.Detail
		if r.Status != report.Applied || d["carrier"] != "up" || d["carrier_after"] != tc.want ||
			d["speed"] != "1000Mb/s" || d["duplex"] != "full" {
			t.Errorf("carrier after %v: %+v, want applied, carrier up after %s, 1000Mb/s full", tc.after, r, tc.want)
		}
		if max := int(tc.after/carrierPoll) + 1; p.sleeps > max {
			t.Errorf("carrier after %v: %d sleeps, want at most %d (polled every %v)", tc.after, p.sleeps, max, carrierPoll)
		}
	}
}

// TestLinkUpNoCarrier: a dead link fails nic-link-up with a reason that
// names it, after exactly the bound, and not a moment of wall time.
func TestLinkUpNoCarrier(t *testing.T) {
	for _, after := range []time.Duration{-1, 10*time.Second + time.Millisecond} {
		r, p := linkUpStep(t, after, 10*time.Second)
		if r.Status != report.Failed || !strings.Contains(r.Error, "no carrier on eno1 after 10s: the link is dead") ||
			r.Detail["carrier"] != "down" {
			t.Errorf("carrier after %v: %+v, want failed naming the dead link", after, r)
		}
		if waited := p.now.Sub(p.upAt); waited != 10*time.Second {
			t.Errorf("carrier after %v: waited %v, want the bound, 10s", after, waited)
		}
	}
}

// TestLinkUpNoWait: nic.carrier_wait=0s checks the admin state only, as
// before, and says so.
func TestLinkUpNoWait(t *testing.T) {
	r, p := linkUpStep(t, -1, 0)
	if r.Status != report.Applied || !strings.Contains(r.Detail["carrier"], "not waited for") || p.sleeps != 0 {
		t.Errorf("%+v, %d sleeps", r, p.sleeps)
	}
}

// TestLinkUpCancelled: the boot's context ends the wait.
func TestLinkUpCancelled(t *testing.T) {
	ft := newTree(t)
	ft.addNIC(t, "eno1", 2, "", "", 1, false)
	p := &fakePHY{linkAfter: -1}
	opt := defaultOpts()
	tu := &Tuner{SysRoot: ft.sys, Link: Link{Name: "eno1"}, Netlink: p, Files: p, Clock: p, Opt: opt}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := tu.applyLinkUp(ctx, boot.Detail{}); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("applyLinkUp with a cancelled context: %v", err)
	}
}
