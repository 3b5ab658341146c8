package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/txload"
	"github.com/hotpath-dev/hotpath/tests/vm"
)

// The boot tests are slow by nature (an image build, which is a cold kernel
// build of ~30 min on a fresh machine, then TCG boots), so each
// configuration boots once and runs its checks as subtests against that
// one guest; shutdown comes last because it ends the guest.

var cpuCounts = flag.String("e2e.cpus", "2,4", "vCPU counts to boot the appliance with")

// bootTimeout bounds one boot from QEMU start to the boot report: firmware,
// kernel and init under TCG on a small shared machine.
func bootTimeout(accel string) time.Duration {
	if accel == "kvm" {
		return 2 * time.Minute
	}
	return 6 * time.Minute
}

func requireE2E(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("boots QEMU guests; skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root (network namespaces, tap devices): run as root, or with -short to skip")
	}
	for _, f := range []string{vm.DefaultOVMFCode, vm.DefaultOVMFVars} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%v: install the test dependencies (image/deps.sh test)", err)
		}
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Fatalf("%v: install the test dependencies (image/deps.sh test)", err)
	}
}

// booted is one guest and what it reported at boot.
type booted struct {
	*vm.Guest
	rep  *report.Report
	cpus int
	port string
}

// metrics is the management endpoint's /metrics, read from the test's
// namespace on the port the boot report names.
func (b *booted) metrics() (string, error) {
	resp, err := b.Netns.HTTPClient(time.Minute).Get("http://" + net.JoinHostPort(b.Addr, b.rep.Config["mgmt.port"]) + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

func (b *booted) dial(ctx context.Context) (net.Conn, error) {
	return b.Netns.DialContext(ctx, "tcp", net.JoinHostPort(b.Addr, b.port))
}

// boot starts disk with cpus vCPUs and waits for the boot report.
func boot(t *testing.T, disk string, cpus int) *booted {
	t.Helper()
	return bootConfig(t, vm.Config{Disk: disk, CPUs: cpus}, 0)
}

// bootConfig boots cfg and waits up to timeout for the boot report. An
// empty cfg.Accel is vm.Accel(); a zero timeout is bootTimeout's.
func bootConfig(t *testing.T, cfg vm.Config, timeout time.Duration) *booted {
	t.Helper()
	if cfg.Accel == "" {
		cfg.Accel = vm.Accel()
	}
	if timeout == 0 {
		timeout = bootTimeout(cfg.Accel)
	}
	cpus := cfg.CPUs
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	g := vm.Boot(ctx, t, cfg)
	rep, err := g.Console.WaitReport(ctx)
	if err != nil {
		t.Fatalf("no boot report within %v: %v", timeout, err)
	}
	arch := cfg.Arch
	if arch == "" {
		arch = "amd64"
	}
	fmt.Fprintf(os.Stderr, "e2e: %s, %d vCPUs under %s: boot report after %v wall time (QEMU start to report), "+
		"kernel start to workload ready %d ms (guest clock)\n",
		arch, cpus, g.Accel, time.Since(g.Started).Round(time.Millisecond), rep.ReadyMillis)
	fmt.Fprintf(os.Stderr, "e2e: timeline: %s\n", TimelineSummary(rep))
	port := "8080"
	if rep.Workload != nil && rep.Workload.Port > 0 {
		port = fmt.Sprint(rep.Workload.Port)
	}
	return &booted{Guest: g, rep: rep, cpus: cpus, port: port}
}

func reportErrs(t *testing.T, errs []error) {
	t.Helper()
	for _, err := range errs {
		t.Error(err)
	}
}

// TestAppliance boots the default image (the hotpath JSON server) with 2
// and 4 vCPUs and checks, from outside the guest: the boot report, HTTP,
// the kernel policy, locality, and an orderly power off.
func TestAppliance(t *testing.T) {
	requireE2E(t)
	disk := buildImage(t, "")
	for _, cpus := range cpuCountList(t) {
		t.Run(fmt.Sprintf("%dvcpu", cpus), func(t *testing.T) { checkAppliance(t, boot(t, disk, cpus)) })
	}
}

// cpuCountList is -e2e.cpus parsed.
func cpuCountList(t *testing.T) []int {
	t.Helper()
	var out []int
	for _, s := range strings.Split(*cpuCounts, ",") {
		var cpus int
		if _, err := fmt.Sscan(s, &cpus); err != nil || cpus < 1 {
			t.Fatalf("-e2e.cpus: bad count %q", s)
		}
		out = append(out, cpus)
	}
	return out
}

// checkAppliance runs the appliance's checks on a booted default image,
// every architecture alike: the boot report, HTTP, the kernel policy,
// locality, and an orderly power off (last: it ends the guest).
func checkAppliance(t *testing.T, b *booted) {
	t.Run("report", func(t *testing.T) { reportErrs(t, CheckReport(b.rep, b.cpus)) })
	t.Run("http", func(t *testing.T) { checkHTTP(t, b) })
	t.Run("policy", func(t *testing.T) { reportErrs(t, CheckPolicy(&b.rep.Facts)) })
	t.Run("locality", func(t *testing.T) {
		reportErrs(t, CheckLocality(&b.rep.Facts, b.cpus, Network{
			Addr: vm.GuestAddr + "/24", Gateway: vm.HostAddr, MTU: vm.GuestMTU,
		}))
	})
	t.Run("dhcp", func(t *testing.T) {
		// One exchange, one lease. Whether the client renews is not
		// judged here: with the hour-long lease of these boots, T1 (30
		// min) never comes inside the test. TestInspect (DHCPv4) and
		// TestIPv6DualStack (both families) give 30 s leases and wait
		// past them for that.
		if l := b.DHCP.Config().Lease; l > time.Minute {
			t.Logf("lease %v: only the first exchange is checked (renewal: TestInspect, TestIPv6DualStack)", l)
		}
		reportErrs(t, CheckLeaseLog(b.DHCP.Log(), b.DHCP.Leases(), b.DHCP.Errors(), vm.GuestMAC, b.Addr))
	})
	// Step 10's workload half, as the server read it back from the kernel
	// and logged it (the kernel half is read from sysfs in TestInspect).
	t.Run("step10", func(t *testing.T) {
		d := config.Default()
		want, err := Step10FromConfig(d.Map())
		if err != nil {
			t.Fatal(err)
		}
		reportErrs(t, CheckBusyPollLine(want, b.Console.String()))
	})
	t.Run("txdrops", func(t *testing.T) { checkTxDrops(t, b) })
	t.Run("shutdown", func(t *testing.T) { checkShutdown(t, b, "") })
}

// applianceTxLoad is the load the txdrops check drives: the one that
// dropped packets under noqueue with 6.12's BQL (README "Step 8").
var applianceTxLoad = txload.Load{Conns: 256, Depth: 8, Path: "/large", BodyLen: 32 << 10, Duration: 8 * time.Second}

// checkTxDrops drives applianceTxLoad and then reads, from outside, the
// guest's /metrics (tx_dropped, the root qdisc's drops) and its console:
// with the default qdisc nothing is dropped on transmit.
func checkTxDrops(t *testing.T, b *booted) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := applianceTxLoad.Run(ctx, b.dial)
	reportErrs(t, r.Errors)
	if r.Answers == 0 {
		t.Fatal("the load got no answer")
	}
	t.Logf("%d answers of %d bytes on %d connections, %d pipelined, in %v; batch p99 %v", r.Answers, applianceTxLoad.BodyLen,
		applianceTxLoad.Conns, applianceTxLoad.Depth, applianceTxLoad.Duration, r.Percentile(99))
	body, err := b.metrics()
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	d, err := ParseTxDrops(strings.NewReader(body), b.rep.Facts.NIC.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("root qdisc %s: tx_dropped %v, qdisc drops %v", d.Qdisc, d.TxDropped, d.QdiscDrops)
	reportErrs(t, CheckNoTxDrops(d, b.Console.String()))
}

func checkHTTP(t *testing.T, b *booted) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, e := range []Expect{JSON, Plaintext} {
		if err := CheckGet(ctx, b.dial, e); err != nil {
			t.Error(err)
		}
	}
	pipe := []Expect{JSON, Plaintext, JSON, JSON, Plaintext, JSON, JSON, JSON, Plaintext, JSON, JSON, JSON, Plaintext, JSON, JSON, JSON}
	if err := CheckPipelined(ctx, b.dial, pipe); err != nil {
		t.Error(err)
	}
	for _, tc := range []struct {
		raw   string
		code  int
		close bool
	}{
		{"GARBAGE\r\n\r\n", 400, true},
		{"GET /json HTTP/1.1\r\nHost: x\r\nBroken header line\r\n\r\n", 400, true},
		{"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", 404, false},
		{"GET /json HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 16<<10) + "\r\n\r\n", 431, true},
	} {
		if err := CheckStatus(ctx, b.dial, tc.raw, tc.code, tc.close); err != nil {
			t.Error(shorten(err))
		}
	}
	// The guest still serves after the bad requests.
	if err := CheckGet(ctx, b.dial, JSON); err != nil {
		t.Errorf("after bad requests: %v", err)
	}
}

func shorten(err error) error {
	s := err.Error()
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return errors.New(s)
}

// checkShutdown presses the ACPI power button over QMP and checks the
// orderly shutdown: the shutdown event, the workload's exit (a clean exit
// after SIGTERM, not a kill), sigtermLine on the console if given, the
// poweroff event, and QEMU exiting on its own within the grace period.
func checkShutdown(t *testing.T, b *booted, sigtermLine string) {
	grace := 10 * time.Second
	if v, ok := b.rep.Config["shutdown.grace"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("shutdown.grace %q: %v", v, err)
		}
		grace = d
	}
	// Under TCG the guest runs many times slower than real time; the
	// margin covers the kernel's power-off path, not the workload.
	margin := 60 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), grace+margin)
	defer cancel()
	mark := b.Console.Len()
	start := time.Now()
	if err := b.QMP.SystemPowerdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Console.WaitEvent(ctx, mark, report.EventShutdown); err != nil {
		t.Fatal(err)
	}
	exit, _, err := b.Console.WaitEvent(ctx, mark, report.EventExit)
	if err != nil {
		t.Fatal(err)
	}
	// Both workloads drain and exit 0 on SIGTERM (the workload contract);
	// anything else means a kill or a crash.
	if exit.Detail != "exit status 0" {
		t.Errorf("workload exit at shutdown: %q, want exit status 0 after SIGTERM", exit.Detail)
	}
	if sigtermLine != "" {
		if _, err := b.Console.WaitString(ctx, mark, sigtermLine); err != nil {
			t.Errorf("the workload did not report SIGTERM: %v", err)
		}
	}
	if _, _, err := b.Console.WaitEvent(ctx, mark, report.EventPowerOff); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(ctx); err != nil {
		t.Fatalf("QEMU did not exit on its own within %v after system_powerdown: %v", grace+margin, err)
	}
	took := time.Since(start)
	fmt.Fprintf(os.Stderr, "e2e: %d vCPUs: system_powerdown to QEMU exit %v (grace %v)\n", b.cpus, took.Round(time.Millisecond), grace)
	// No restart among the events since the mark, which must hold the
	// power-off waited for above (else the list read is not the one
	// judged: an absence check over nothing passes).
	evs, err := b.Console.Events(mark)
	if err != nil {
		t.Errorf("the console's events since the shutdown began: %v", err)
	}
	if !slices.ContainsFunc(evs, func(ev report.Event) bool { return ev.Kind == report.EventPowerOff }) {
		t.Errorf("the console's events since the shutdown began lack the power-off: %+v", evs)
	}
	for _, ev := range evs {
		if ev.Kind == report.EventRestart || ev.Kind == report.EventStart {
			t.Errorf("the workload was restarted during shutdown: %+v", ev)
		}
	}
}
