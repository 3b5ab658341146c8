package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/netconf6"
	"github.com/hotpath-dev/hotpath/init/nic"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/e2e"
)

// fakeClock is a CLOCK_BOOTTIME in milliseconds that moves 10 ms each
// time it is read.
type fakeClock struct {
	mu sync.Mutex
	ms float64
}

func (c *fakeClock) now() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ms += 10
	return c.ms
}

// syncBuffer is a console output the background goroutine and the test
// share.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBackgroundStep: the boot does not wait for a background step (the
// step after it runs while it blocks); the report lists it as background
// with an open phase; when it ends, its outcome is printed in a step-done
// event with its phase, and the timeline closes its phase.
func TestBackgroundStep(t *testing.T) {
	m, _ := testMachine(t, fakeSys(t, "0-1", "0-1"), nil)
	var out syncBuffer
	m.con.Out = &out
	clk := &fakeClock{ms: 1000}
	m.clock, m.initMillis = clk.now, 500
	release := make(chan struct{})
	after := make(chan struct{})
	steps := []boot.Step{
		{Name: "first", Apply: func(context.Context, boot.Detail) error { return nil }},
		{Name: "slow", Background: true, Apply: func(_ context.Context, d boot.Detail) error {
			<-release
			d["address"] = "fd00::2/128"
			return nil
		}},
		{Name: "after", Apply: func(context.Context, boot.Detail) error { close(after); return nil }},
	}
	done := make(chan struct{})
	go func() { m.runSteps(steps); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		close(release)
		t.Fatal("the boot waited for the background step")
	}
	<-after
	res := m.resultsNow()
	var got []string
	for _, r := range res {
		got = append(got, r.Name+"="+string(r.Status))
	}
	if strings.Join(got, " ") != "first=applied slow=background after=applied" {
		t.Errorf("results %v", got)
	}
	tl := m.timelineNow()
	if names := phaseNames(tl); names != "kernel init step first step slow step after" {
		t.Errorf("timeline %s", names)
	}
	if p := tl[3]; !p.Background || p.End != -1 {
		t.Errorf("background phase while it runs: %+v", p)
	}
	if tl[0].End != 500 || tl[1].Start != 500 || tl[1].End != tl[2].Start {
		t.Errorf("kernel and init phases %+v %+v, first step %+v", tl[0], tl[1], tl[2])
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), report.EventPrefix) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	_, evs, err := report.Parse(strings.NewReader(out.String()))
	if err != nil || len(evs) != 1 {
		t.Fatalf("events %+v, %v; console:\n%s", evs, err, out.String())
	}
	ev := evs[0]
	if ev.Kind != report.EventStepDone || len(ev.Steps) != 1 || ev.Steps[0].Status != report.Applied ||
		ev.Steps[0].Detail["address"] != "fd00::2/128" || ev.Phase == nil || ev.Phase.End <= ev.Phase.Start {
		t.Errorf("step-done event %+v (phase %+v)", ev, ev.Phase)
	}
	if p := m.timelineNow()[3]; p.End <= p.Start {
		t.Errorf("background phase after it ended: %+v", p)
	}
}

func phaseNames(tl []report.Phase) string {
	var names []string
	for _, p := range tl {
		names = append(names, p.Name)
	}
	return strings.Join(names, " ")
}

// TestIPv6StepsOffTheCriticalPath: with IPv4 the IPv6 step is a
// background step (the workload does not wait for it, whatever
// net.ipv6 is); with net.mode=off it is the address the workload needs,
// in the foreground, bounded by the network deadline.
func TestIPv6StepsOffTheCriticalPath(t *testing.T) {
	for _, tc := range []struct {
		set        map[string]string
		background bool
	}{
		{nil, true}, // net.mode=dhcp net.ipv6=auto: the default
		{map[string]string{"net.mode": "static", "net.address": "10.0.0.2/24", "net.ipv6": "dhcp"}, true},
		{map[string]string{"net.mode": "off", "net.ipv6": "dhcp"}, false},
	} {
		m, _ := testMachine(t, fakeSys(t, "0-1", "0-1"), tc.set)
		m.link = &nic.Link{Name: "eth0"}
		steps := ipv6Steps(m)
		if len(steps) != 1 || steps[0].Name != "net-ipv6" || steps[0].Background != tc.background {
			t.Errorf("%v: %d steps, background %v; want background %v", tc.set, len(steps), len(steps) > 0 && steps[0].Background, tc.background)
		}
		if !tc.background && m.netDeadline.IsZero() {
			t.Errorf("%v: the foreground IPv6 step has no network deadline", tc.set)
		}
	}
}

// TestBackgroundRAWait: in the background the IPv6 step waits at least
// backgroundRAWait for a router advertisement (a router that answers the
// kernel's late solicitation is not missed); a longer net.ipv6_ra_wait
// stays; in the foreground (net.mode=off) the configured wait bounds the
// boot.
func TestBackgroundRAWait(t *testing.T) {
	for _, tc := range []struct {
		wait, want time.Duration
	}{
		{2 * time.Second, backgroundRAWait},
		{10 * time.Second, 10 * time.Second},
	} {
		o := backgroundIPv6(netconf6.Options{RAWait: tc.wait, DHCPRetries: 5})
		if o.RAWait != tc.want || o.DHCPRetries != 0 || !o.FullRAWait {
			t.Errorf("net.ipv6_ra_wait %v in the background: wait %v (the whole of it: %v), retries %d; want %v, true, 0 (until a server answers)", tc.wait, o.RAWait, o.FullRAWait, o.DHCPRetries, tc.want)
		}
	}
	if backgroundRAWait < 3*time.Second {
		t.Errorf("backgroundRAWait %v: the kernel solicits up to 2 s after link-up, and a router may take 0.5 s to answer", backgroundRAWait)
	}
	m, _ := testMachine(t, fakeSys(t, "0-1", "0-1"), map[string]string{"net.mode": "off", "net.ipv6": "auto"})
	m.link = &nic.Link{Name: "eth0"}
	if o := ipv6Options(m); o.RAWait != 2*time.Second {
		t.Errorf("foreground IPv6 (net.mode=off): wait %v, want net.ipv6_ra_wait's 2s", o.RAWait)
	}
}

// TestIPv6Retry: an IPv6-only boot whose IPv6 step failed at the
// deadline goes on in the background; with IPv4, or a step that did not
// fail, nothing is retried.
func TestIPv6Retry(t *testing.T) {
	failedV6 := []report.Step{{Name: "net-ipv6", Status: report.Failed, Error: "network deadline reached"}}
	for _, tc := range []struct {
		set     map[string]string
		results []report.Step
		want    bool
	}{
		{map[string]string{"net.mode": "off", "net.ipv6": "dhcp"}, failedV6, true},
		{map[string]string{"net.mode": "off", "net.ipv6": "dhcp"}, []report.Step{{Name: "net-ipv6", Status: report.Applied}}, false},
		{map[string]string{"net.mode": "off", "net.ipv6": "static", "net.ipv6_address": "fd00::2/64"}, failedV6, false},
		{nil, failedV6, false},
	} {
		m, _ := testMachine(t, fakeSys(t, "0-1", "0-1"), tc.set)
		m.link = &nic.Link{Name: "eth0"}
		s := ipv6RetryStep(m, tc.results)
		if (s != nil) != tc.want || s != nil && (!s.Background || s.Name != "net-ipv6-retry") {
			t.Errorf("%v %v: retry %+v, want %v", tc.set, tc.results, s, tc.want)
		}
	}
}

// TestNetworkDeadlineShared: the DHCPv4 step and the IPv6 step share one
// deadline, set when the first of them is made.
func TestNetworkDeadlineShared(t *testing.T) {
	m, _ := testMachine(t, fakeSys(t, "0-1", "0-1"), map[string]string{"net.deadline": "3s"})
	before := time.Now()
	d := m.networkDeadline()
	if d.Before(before.Add(3*time.Second)) || d.After(time.Now().Add(3*time.Second)) {
		t.Errorf("deadline %v, want 3s after %v", d, before)
	}
	time.Sleep(10 * time.Millisecond)
	if m.networkDeadline() != d {
		t.Error("the second network step got a deadline of its own")
	}
}

// TestTimelinePassesE2ECheck: the timeline the init puts in its report
// (steps, a background step still running, the workload's exec and
// ready) is what the e2e report check accepts.
func TestTimelinePassesE2ECheck(t *testing.T) {
	m, _ := testMachine(t, fakeSys(t, "0-1", "0-1"), nil)
	var out syncBuffer
	m.con.Out = &out
	clk := &fakeClock{ms: 1000}
	m.clock, m.initMillis = clk.now, 900
	release := make(chan struct{})
	defer close(release)
	m.runSteps([]boot.Step{
		{Name: "mounts", Apply: func(context.Context, boot.Detail) error { return nil }},
		{Name: "net-ipv6", Background: true, Apply: func(context.Context, boot.Detail) error { <-release; return nil }},
		{Name: "mgmt-endpoint", Apply: func(context.Context, boot.Detail) error { return nil }},
	})
	b := &bootReport{execStart: m.now(), rep: report.Report{Workload: &report.Workload{}}}
	b.event(report.Event{Kind: report.EventStart, PID: 2, Millis: int64(clk.now())})
	b.rep.ReadyMillis = int64(clk.now())
	rep := b.rep
	rep.Steps, rep.Timeline = b.stepsAndTimeline(m, true)
	for _, err := range e2e.CheckTimeline(&rep) {
		t.Error(err)
	}
	if names := phaseNames(rep.Timeline); names != "kernel init step mounts step net-ipv6 step mgmt-endpoint workload-exec ready" {
		t.Errorf("timeline %s", names)
	}
}

// TestIPv6VerifyBesideDHCPRetry: the IPv6 step learns from the machine
// whether a DHCPv4 retry (with its packet socket) is running.
func TestIPv6VerifyBesideDHCPRetry(t *testing.T) {
	m, _ := testMachine(t, fakeSys(t, "0-1", "0-1"), nil)
	m.link = &nic.Link{Name: "eth0"}
	o := ipv6Options(m)
	if o.PacketSocketsElsewhere == nil || o.PacketSocketsElsewhere() {
		t.Fatal("a packet socket declared without a DHCPv4 retry")
	}
	m.dhcpRetrying.Store(true)
	if !o.PacketSocketsElsewhere() {
		t.Error("the DHCPv4 retry's packet socket is not declared to the IPv6 step")
	}
}
