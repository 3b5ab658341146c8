package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/image"
	"github.com/hotpath-dev/hotpath/init/napi"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/inspector"
	"github.com/hotpath-dev/hotpath/tests/vm"
	"github.com/insomniacslk/dhcp/dhcpv6"
)

// TestIPv6DualStack boots the inspector in a dual-stack subnet as EC2
// makes one: a DHCPv4 server, router advertisements with the managed flag
// and a DHCPv6 server on the tap. One boot; its checks: the guest took
// its IPv6 address by DHCPv6 (report and server log: one exchange per
// family, no renewal), the workload answers over both families from
// outside, no AF_PACKET socket is open after the leases (the inspector
// reads /proc/net/packet), and an IPv6 flow is received and served on
// the same CPU (RPS/XPS/IRQ tuning is family-neutral). Its image also
// turns step 10's deferral on (TestInspect's runs the defaults), so that
// the inspector reads the values the kernel took from sysfs itself.
func TestIPv6DualStack(t *testing.T) {
	requireE2E(t)
	// net.ipv6=auto, the default.
	disk := buildImageConfig(t, inspectorPkg, []byte(image.DefaultInitConfig+step10Config))
	const cpus = 2
	// Both leases short (T1 at 15 s, T2 at 24 s, the end at 30 s), so
	// that the lease-log check, made after they ran out, could see a
	// renewal: with the default hour none could happen inside the test.
	const lease = 30 * time.Second
	var ra *vm.RouterAdvertiser
	var d6 *vm.DHCP6Server
	b := bootConfig(t, vm.Config{Disk: disk, CPUs: cpus, DHCPLease: lease, Prepare: func(ns *vm.Netns) error {
		var err error
		ra, d6, err = ns.StartDualStackValid(lease)
		if err != nil {
			return err
		}
		t.Cleanup(func() { d6.Close(); ra.Close() })
		return nil
	}}, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: b.Netns.DialContext, DisableKeepAlives: true}}
	v4 := "http://" + net.JoinHostPort(b.Addr, b.port)
	v6 := "http://" + net.JoinHostPort(vm.GuestAddr6, b.port)

	// With IPv4 the workload does not wait for IPv6 (a background step);
	// its outcome comes in a step-done event, and its address serves
	// from then on.
	s6 := waitStepDone(ctx, t, b, "net-ipv6")
	t.Run("report", func(t *testing.T) {
		steps := stepsOf(b.rep)
		s4 := steps["net-dhcp"]
		if s4.Status != report.Applied {
			t.Errorf("net-dhcp: %+v", s4)
		}
		if s := steps["net-ipv6"]; s.Status != report.Background {
			t.Errorf("net-ipv6 in the report: %+v, want background (the workload does not wait for it)", s)
		}
		d := s6.Detail
		if s6.Status != report.Applied || d["address"] != vm.GuestAddr6+"/128" || d["ra"] != "managed" ||
			d["valid_lft"] != "forever" || d["exchange"] != "solicit,advertise,request,reply" {
			t.Errorf("net-ipv6: %+v", s6)
		}
		// The advertisement's configuration is frozen (init/netconf6
		// racap.go): the router and the /64 kept, nothing of a benign
		// advertisement refused (the kernel's own local routes are
		// not the advertisement's).
		if !strings.HasPrefix(d["ra_frozen"], "routers [fe80::") || !strings.Contains(d["ra_frozen"], vm.Prefix6) || d["ra_refused"] != "" {
			t.Errorf("net-ipv6: ra_frozen %q, ra_refused %q", d["ra_frozen"], d["ra_refused"])
		}
		t.Logf("net-ipv6 %v (router advertisements sent %d, solicitations %d)", d, ra.Sent(), ra.Solicitations())
	})
	t.Run("both-families", func(t *testing.T) {
		for _, base := range []string{v4, v6} {
			var snap inspector.Snapshot
			if err := getJSON(ctx, client, base+"/inspect", &snap); err != nil {
				t.Errorf("%s: %v", base, err)
				continue
			}
			// The witness of case study step 7, for both clients.
			if n := inspector.TableRows(snap.Files["/proc/net/packet"]); n != 0 {
				t.Errorf("%d AF_PACKET sockets open after the DHCPv4 and DHCPv6 leases:\n%s", n, snap.Files["/proc/net/packet"])
			}
			// The appliance's answer, over this family.
			resp, err := client.Get(base + "/json")
			if err != nil {
				t.Errorf("%s/json: %v", base, err)
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != `{"message":"Hello, World!"}` {
				t.Errorf("%s/json: %s %q", base, resp.Status, body)
			}
		}
	})
	t.Run("mgmt", func(t *testing.T) {
		// The management port (default 9100) listens on both families:
		// a dual-stack NLB's health check may come over either.
		for _, host := range []string{b.Addr, vm.GuestAddr6} {
			resp, err := client.Get("http://" + net.JoinHostPort(host, "9100") + "/healthz")
			if err != nil {
				t.Errorf("/healthz on %s: %v", host, err)
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("/healthz on %s: %s", host, resp.Status)
			}
		}
	})
	t.Run("v6-flow", func(t *testing.T) { checkV6Flow(ctx, t, client, v6, cpus) })
	// Step 10 on, as the report claims it and sysfs holds it (read by the
	// inspector, over IPv4).
	t.Run("step10", func(t *testing.T) {
		var snap inspector.Snapshot
		if err := getJSON(ctx, client, v4+"/inspect", &snap); err != nil {
			t.Fatal(err)
		}
		// The address as the test's DHCP server leased it (TestInspect's
		// Expectation.Addr).
		dc := b.DHCP.Config()
		ones, _ := dc.Mask.Size()
		truth, err := FactsFromSnapshot(&snap, fmt.Sprintf("%s/%d", dc.ClientIP, ones))
		if err != nil || truth.NIC == nil {
			t.Fatalf("inspector: no primary NIC: %v", err)
		}
		reportErrs(t, CheckStep10(step10Want, b.rep, &snap, truth.NIC.Name))
		step, _ := b.rep.Step(napi.StepName)
		t.Logf("%s %s: %v", napi.StepName, step.Status, step.Detail)
	})
	t.Run("lease-log", func(t *testing.T) {
		// Past both leases' T1, T2 and end: a client that renews or
		// rebinds has done so by now.
		var last time.Time
		if ls := b.DHCP.Leases(); len(ls) > 0 {
			last = ls[0].At
		}
		for _, m := range d6.Log() {
			if m.At.After(last) {
				last = m.At
			}
		}
		if wait := time.Until(last.Add(lease + 5*time.Second)); wait > 0 {
			t.Logf("waiting %v for the leases to run out", wait.Round(time.Second))
			time.Sleep(wait)
		}
		reportErrs(t, CheckLeaseLog(b.DHCP.Log(), b.DHCP.Leases(), b.DHCP.Errors(), vm.GuestMAC, b.Addr))
		reportErrs(t, CheckLease6Log(d6.Log(), d6.Leases(), d6.Errors()))
		// And the guest still serves on both addresses (kept forever).
		for _, base := range []string{v4, v6} {
			resp, err := client.Get(base + "/json")
			if err != nil {
				t.Errorf("%s/json after the leases ran out: %v", base, err)
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("%s/json after the leases ran out: %s", base, resp.Status)
			}
		}
	})
	t.Run("shutdown", func(t *testing.T) { checkShutdown(t, b, "inspector: SIGTERM") })
}

// waitStepDone waits for the step-done event of the background step
// name and returns its outcome.
func waitStepDone(ctx context.Context, t *testing.T, b *booted, name string) report.Step {
	t.Helper()
	for {
		evs, err := b.Console.Events(0)
		if err != nil {
			t.Fatalf("background step %s: %v", name, err)
		}
		for _, ev := range evs {
			if ev.Kind != report.EventStepDone || len(ev.Steps) != 1 || ev.Steps[0].Name != name {
				continue
			}
			if ev.Phase == nil || ev.Phase.End < ev.Phase.Start {
				t.Errorf("step-done %s: phase %+v", name, ev.Phase)
			} else {
				t.Logf("background step %s %s at %.0f ms after kernel start (%.0f ms in the background; ready at %d ms)",
					name, ev.Steps[0].Status, ev.Phase.End, ev.Phase.End-ev.Phase.Start, b.rep.ReadyMillis)
			}
			return ev.Steps[0]
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no step-done event for %s: %v\n--- console tail ---\n%s", name, ctx.Err(), b.Console.Tail(30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkV6Flow is the IPv4 inspection's flow check over IPv6: each
// connection is received in the softirq of a CPU that has an RX queue
// interrupt (queue i's IRQ on CPU i, RPS off; nothing there looks at the
// family). Which worker accepts it is the server's CBPF steering, tested
// over ::1 in package server; the inspector itself is not pinned.
func checkV6Flow(ctx context.Context, t *testing.T, client *http.Client, v6 string, cpus int) {
	var snap inspector.Snapshot
	if err := getJSON(ctx, client, v6+"/inspect", &snap); err != nil {
		t.Fatal(err)
	}
	irqs := queueIRQs(&snap) // the inspector's reading, not the report's
	rx := map[int]bool{}
	for _, q := range irqs {
		if strings.Contains(q.Name, "input") {
			rx[atoiOr(q.Affinity, -1)] = true
		}
	}
	seen := map[int]int{}
	for range 4 * cpus {
		var c inspector.Conn
		if err := getJSON(ctx, client, v6+"/conn", &c); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(c.Remote, "["+vm.HostAddr6+"]:") {
			t.Errorf("connection from %s, want the host's IPv6 address %s", c.Remote, vm.HostAddr6)
		}
		if !rx[c.IncomingCPU] {
			t.Errorf("IPv6 connection received on cpu %d, which has no RX queue interrupt (%v)", c.IncomingCPU, irqs)
		}
		seen[c.IncomingCPU]++
	}
	t.Logf("IPv6 connections by receiving CPU: %v", seen)
}

// CheckLease6Log checks the test's DHCPv6 server's log of one boot: one
// SOLICIT, one REQUEST, one lease, no RENEW, REBIND or second exchange.
func CheckLease6Log(log []vm.Message6, leases int, errs []error) []error {
	var out []error
	out = append(out, errs...)
	if len(log) != 2 || log[0].Type != dhcpv6.MessageTypeSolicit || log[1].Type != dhcpv6.MessageTypeRequest {
		out = append(out, fmt.Errorf("DHCPv6 log %v, want one SOLICIT then one REQUEST", log))
	}
	if leases != 1 {
		out = append(out, fmt.Errorf("%d DHCPv6 leases, want 1", leases))
	}
	return out
}

// TestIPv6Only boots the default workload as an EC2 instance in an
// IPv6-only subnet: no DHCPv4 server at all, router advertisements with
// the managed flag and a DHCPv6 server on the tap, the strict fake IMDS
// at [fd00:ec2::254] and the NTP responder at [fd00:ec2::123] inside the
// namespace, the RTC six years behind. The image says net.mode=off (no
// IPv4: the decision is that not even a DHCPv4 DISCOVER is sent, since an
// IPv6-only subnet has no server to answer it and the background retries
// would broadcast forever) and net.ipv6=dhcp. One boot; its checks: the
// IPv6 lease, user-data over the IPv6 endpoint applied (the workload
// answers /json on its port), the clock synced, and not one IPv4 or ARP
// frame from the guest, counted from the host's side of the tap with a
// packet socket of the test from before QEMU starts to the end.
func TestIPv6Only(t *testing.T) {
	requireE2E(t)
	// This boot also carries step 10 (off by default, init/config NIC):
	// the NAPI deferral, and with it the server's epoll preference.
	disk := buildImageConfig(t, "", []byte("net.mode=off\nnet.ipv6=dhcp\n"+step10Config))
	b, fake, ntpSrv, frames, d6 := bootIPv6Only(t, disk)
	r := b.rep
	steps := stepsOf(r)

	t.Run("report", func(t *testing.T) {
		if s := steps["net"]; s.Status != report.Skipped {
			t.Errorf("IPv4 step: %+v, want skipped (net.mode=off)", s)
		}
		if s := steps["net-ipv6"]; s.Status != report.Applied || s.Detail["address"] != vm.GuestAddr6+"/128" {
			t.Errorf("net-ipv6: %+v", s)
		}
		if s := steps["imds"]; s.Status != report.Applied || s.Detail["endpoint"] != "http://["+vm.IMDSAddr6+"]" {
			t.Errorf("imds: %+v, want applied over the IPv6 endpoint", s)
		}
		if r.UserData == nil || r.UserData.Status != report.UserDataApplied {
			t.Errorf("user-data %+v, want applied", r.UserData)
		}
		if r.Time == nil || r.Time.Steps != 1 || r.Time.Server != "["+vm.TimeSyncAddr6+"]" {
			t.Errorf("report time %+v: want one step, synced with [%s]", r.Time, vm.TimeSyncAddr6)
		}
		reportErrs(t, CheckLease6Log(d6.Log(), d6.Leases(), d6.Errors()))
	})
	t.Run("step10", func(t *testing.T) {
		reportErrs(t, CheckStep10Report(step10Want, r))
		// The workload's line may come after the report (the init holds
		// the console while it writes the report): wait for it, bounded.
		wctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		b.Console.WaitString(wctx, 0, "hotpath: epoll busy polling:")
		reportErrs(t, CheckBusyPollLine(step10Want, b.Console.String()))
	})
	t.Run("json-v6", func(t *testing.T) {
		// user-data moved the workload to 9090; the clock is the host's.
		c := b.Netns.HTTPClient(time.Minute)
		resp, err := c.Get("http://" + net.JoinHostPort(vm.GuestAddr6, "9090") + "/json")
		if err != nil {
			t.Fatalf("/json over IPv6 on the user-data port: %v", err)
		}
		at := time.Now()
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != `{"message":"Hello, World!"}` {
			t.Errorf("/json: %s %q", resp.Status, body)
		}
		date, err := http.ParseTime(resp.Header.Get("Date"))
		if err != nil || at.Sub(date).Abs() > 2*time.Second {
			t.Errorf("guest Date %q (%v) vs host %v: the clock was not synced over IPv6", resp.Header.Get("Date"), err, at)
		}
		if ntpSrv.Answers() < 1 || fake.Count("PUT", 200) < 1 {
			t.Errorf("NTP answers %d, IMDS tokens %d: the IPv6 endpoints were not used", ntpSrv.Answers(), fake.Count("PUT", 200))
		}
	})
	t.Run("no-ipv4", func(t *testing.T) {
		// A few seconds more after the checks, so that anything periodic
		// (a DHCPv4 retry, ARP) would show.
		time.Sleep(5 * time.Second)
		all := frames.Since(time.Time{})
		t.Logf("frames from the guest by EtherType over the whole boot: %v", all)
		if all[0x0800] != 0 || all[0x0806] != 0 {
			t.Errorf("the IPv6-only guest sent %d IPv4 and %d ARP frames", all[0x0800], all[0x0806])
		}
		if all[0x86dd] == 0 {
			t.Error("no IPv6 frame counted either: the counter saw nothing")
		}
	})
}

// bootIPv6Only boots disk as an EC2 instance in an IPv6-only subnet (see
// TestIPv6Only) and returns the guest, the fake IMDS, the NTP server, the
// frame counter (started before QEMU) and the DHCPv6 server.
func bootIPv6Only(t *testing.T, disk string) (*booted, *vm.FakeIMDS, *vm.NTPServer, *vm.FrameCounter, *vm.DHCP6Server) {
	t.Helper()
	fake := vm.NewFakeIMDS(vm.GuestMAC, []byte("workload.port=9090\n"))
	var (
		ntpSrv *vm.NTPServer
		frames *vm.FrameCounter
		d6     *vm.DHCP6Server
	)
	mac, _ := net.ParseMAC(vm.GuestMAC)
	b := bootConfig(t, vm.Config{Disk: disk, CPUs: 2, RTCBase: "2020-01-01T00:00:00", SMBIOS: []string{ec2SMBIOS}, NoDHCPv4: true,
		Prepare: func(ns *vm.Netns) error {
			var err error
			if frames, err = ns.CountFrames(vm.TapName, mac); err != nil {
				return err
			}
			t.Cleanup(func() { frames.Close() })
			ra, dd, err := ns.StartDualStack()
			if err != nil {
				return err
			}
			d6 = dd
			t.Cleanup(func() { d6.Close(); ra.Close() })
			hs, err := ns.StartIMDS6(fake)
			if err != nil {
				return err
			}
			t.Cleanup(func() { hs.Close() })
			if ntpSrv, err = ns.StartNTP6(); err != nil {
				return err
			}
			t.Cleanup(func() { ntpSrv.Close() })
			return nil
		}}, 0)
	return b, fake, ntpSrv, frames, d6
}

// atoiOr is strconv.Atoi with a default for what is not a number (an IRQ
// affinity list of more than one CPU).
func atoiOr(s string, def int) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return def
	}
	return n
}

// TestIPv6AutoCostIPv4 is what the default net.ipv6=auto costs an IPv4-only
// boot, against net.ipv6=off, in the same run: the default workload in
// the harness's IPv4-only namespace (no router advertisements), booted
// once with each. With IPv4 the IPv6 step is a background step: the
// boot's cost is its phase on the way to ready, none (it is not on it);
// its own outcome (auto: skipped after net.ipv6_ra_wait) comes later in
// a step-done event. ready_ms is logged beside it, but it varies by more
// than that under TCG. Before IPv6 left the critical path (TCG, 2 vCPUs,
// a loaded 2-core host): auto 2171 ms on the way to ready (skipped, no
// RA within 2 s), off 15 ms.
func TestIPv6AutoCostIPv4(t *testing.T) {
	requireE2E(t)
	for _, tc := range []struct {
		mode   string
		status report.Status // in the step-done event
	}{
		{"auto", report.Skipped}, // no RA within net.ipv6_ra_wait
		{"off", report.Applied},  // one sysctl write
	} {
		t.Run(tc.mode, func(t *testing.T) {
			// Each guest ends with its subtest (vm.Boot's cleanup).
			disk := buildImageConfig(t, "", []byte("net.ipv6="+tc.mode+"\n"))
			b := bootConfig(t, vm.Config{Disk: disk, CPUs: 2}, 0)
			s := stepsOf(b.rep)["net-ipv6"]
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done := waitStepDone(ctx, t, b, "net-ipv6")
			t.Logf("net.ipv6=%s on an IPv4-only subnet: %s in the report (%.1f ms on the way to ready), then %s in %.0f ms (%s); ready %d ms after kernel start",
				tc.mode, s.Status, s.Millis, done.Status, done.Millis, done.Reason, b.rep.ReadyMillis)
			if s.Status != report.Background || s.Millis > 0 {
				t.Errorf("net.ipv6=%s: %+v in the report, want background and nothing on the way to ready", tc.mode, s)
			}
			if done.Status != tc.status {
				t.Errorf("net.ipv6=%s: background outcome %+v, want %s", tc.mode, done, tc.status)
			}
			if err := CheckGet(context.Background(), b.dial, JSON); err != nil {
				t.Errorf("net.ipv6=%s: /json over IPv4: %v", tc.mode, err)
			}
		})
	}
}
