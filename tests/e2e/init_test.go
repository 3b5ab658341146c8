package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/vm"
)

// probePkg is the init tests' workload: /cpu, /signal, /panic, -exit-now.
const probePkg = "github.com/hotpath-dev/hotpath/tests/workloads/probe"

// probeRoot runs the probe as root: signalling PID 1 and writing to
// /proc/sysrq-trigger are what these tests need a privileged workload for
// (the default is an unprivileged one, issue 12).
const probeRoot = "workload.user=0\nworkload.group=0\n"

// get sends one request on a new connection and returns the body.
func (b *booted) get(ctx context.Context, path string) (string, error) {
	c, err := b.dial(ctx)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: guest\r\nConnection: close\r\n\r\n", path)
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", path, err)
	}
	if !strings.Contains(status, " 200 ") {
		return "", fmt.Errorf("GET %s: %q", path, strings.TrimSpace(status))
	}
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			return "", err
		}
		if l == "\r\n" {
			break
		}
	}
	body, err := io.ReadAll(br)
	return string(body), err
}

func stepsOf(r *report.Report) map[string]report.Step {
	m := map[string]report.Step{}
	for _, s := range r.Steps {
		m[s.Name] = s
	}
	return m
}

// TestInitHolds boots 4 vCPUs on a NIC with 2 queues and checks that the
// init holds: every worker receives connections (the workload keeps its 4
// CPUs and RPS spreads each queue over two), every catchable signal that
// is not a shutdown request leaves PID 1 running, and the power button
// still powers off.
func TestInitHolds(t *testing.T) {
	requireE2E(t)
	disk := buildImageConfig(t, probePkg, []byte(probeRoot))
	b := bootConfig(t, vm.Config{Disk: disk, CPUs: 4, Queues: 2}, 0)
	fmt.Fprintf(os.Stderr, "e2e: 4 vCPUs, 2 queues: kernel start to ready %d ms\n", b.rep.ReadyMillis)
	steps := stepsOf(b.rep)
	for _, s := range b.rep.Steps {
		if s.Status == report.Failed {
			t.Errorf("step %s failed: %s", s.Name, s.Error)
		}
	}
	if sp := steps["nic-spread"]; sp.Detail["mode"] != "rps" || sp.Detail["rx_queues"] != "2" {
		t.Errorf("nic-spread %+v, want rps over 2 queues", sp)
	}
	if b.rep.Workload.CPUs != "0-3" {
		t.Errorf("workload cpus %q, want 0-3", b.rep.Workload.CPUs)
	}
	if x := steps["nic-xps"]; x.Status != report.Applied {
		t.Errorf("nic-xps %+v", x)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	t.Run("every-worker-accepts", func(t *testing.T) {
		// Each connection accepted by the worker of the CPU that RPS
		// delivered it to, and no accept counted foreign by the server.
		const conns = 200
		perWorker := checkLocality(ctx, t, b, conns, -1)
		fmt.Fprintf(os.Stderr, "e2e: accepts per worker over %d connections (4 vCPUs, 2 queues, nic.spread=rps): %v\n", conns, perWorker)
		for cpu := 0; cpu < 4; cpu++ {
			if perWorker[cpu] == 0 {
				t.Errorf("the worker on cpu %d received none of %d connections: %v", cpu, conns, perWorker)
			}
		}
		// Since the boot (logged only: a connection whose handshake
		// straddled the init's RPS or IRQ settings may count here).
		if all, err := b.accepts(ctx); err == nil {
			fmt.Fprintf(os.Stderr, "e2e: accepts since the boot by worker cpu: %+v\n", all)
		}
	})

	t.Run("signals", func(t *testing.T) {
		mark := b.Console.Len()
		body, err := b.get(ctx, "/signal")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(body, "sent 59 signals") {
			t.Fatalf("/signal: %q, want 59 signals sent (1-64 but KILL, STOP, TERM, USR2, INT)", body)
		}
		// The ignored signals are logged; SIGHUP and SIGQUIT are the ones
		// Go's defaults would have died of.
		for _, s := range []string{"signal hangup", "signal quit", "signal broken pipe", "signal user defined signal 1"} {
			if _, err := b.Console.WaitString(ctx, mark, s); err != nil {
				t.Errorf("no log of %q: %v", s, err)
			}
		}
		time.Sleep(2 * time.Second)
		tail := b.Console.String()[mark:]
		for _, bad := range []string{"Kernel panic", "Attempted to kill init", "PANIC", "fallback mode"} {
			if strings.Contains(tail, bad) {
				t.Errorf("console after the signals has %q", bad)
			}
		}
		if evs, _ := b.Console.Events(mark); len(evs) > 0 {
			for _, e := range evs {
				if e.Kind == report.EventShutdown || e.Kind == report.EventExit {
					t.Errorf("event after the signals: %+v", e)
				}
			}
		}
		if _, err := b.get(ctx, "/cpu"); err != nil {
			t.Errorf("not serving after the signals: %v", err)
		}
	})
	t.Run("link-reset", func(t *testing.T) {
		// Carrier off and on, as an ENA device reset looks to the guest:
		// the init re-runs the NIC steps a reset undoes, with their
		// results in one event, and the workload keeps serving.
		mark := b.Console.Len()
		for _, up := range []bool{false, true} {
			if _, err := b.QMP.Execute(ctx, "set_link", map[string]any{"name": "net0", "up": up}); err != nil {
				t.Fatal(err)
			}
			if !up {
				if _, _, err := b.Console.WaitEvent(ctx, mark, report.EventLink); err != nil {
					t.Fatal(err)
				}
			}
		}
		ev, _, err := b.Console.WaitEvent(ctx, mark, report.EventNICReapply)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]report.Status{}
		for _, s := range ev.Steps {
			names[s.Name] = s.Status
			if s.Status == report.Failed {
				t.Errorf("re-applied %s failed: %s", s.Name, s.Error)
			}
		}
		for _, n := range []string{"nic-coalesce", "nic-irq-affinity", "nic-xps", "nic-rps"} {
			if _, ok := names[n]; !ok {
				t.Errorf("nic-reapply without %s: %+v", n, ev)
			}
		}
		fmt.Fprintf(os.Stderr, "e2e: link off/on: %s\n", ev.Detail)
		if _, err := b.get(ctx, "/cpu"); err != nil {
			t.Errorf("not serving after the link reset: %v", err)
		}
	})
	t.Run("shutdown", func(t *testing.T) { checkShutdown(t, b, "probe: SIGTERM") })
}

// allSteps are the steps every boot report lists, whatever the workload
// does.
var allSteps = []string{"mounts", "loopback", "rlimit-nofile", "workload-cpus", "cpu-governor", "cpu-latency",
	"nic-discover", "nic-channels", "nic-tx-push-buf", "nic-spread", "nic-gro", "nic-link-up", "nic-coalesce", "nic-qdisc", "nic-irq-affinity", "nic-xps", "nic-rps",
	"nic-bql", "nic-napi-defer", "net-dhcp", "power-button"}

// TestInitWorkloadExitsAtOnce: a workload that exits at every start still
// gets exactly one full boot report, at the ready deadline, with every
// step; the crash loop is reported; power off still works.
func TestInitWorkloadExitsAtOnce(t *testing.T) {
	requireE2E(t)
	disk := buildImageConfig(t, probePkg, []byte("workload.args=-exit-now\nready.timeout=20s\nsupervise.backoff_max=2s\n"))
	b := bootConfig(t, vm.Config{Disk: disk, CPUs: 2}, 0)
	if b.rep.ReadyError == "" || b.rep.ReadyMillis != -1 || !strings.Contains(b.rep.ReadyError, "exit status 1") {
		t.Errorf("report ready_ms %d error %q, want the deadline error naming the exits", b.rep.ReadyMillis, b.rep.ReadyError)
	}
	steps := stepsOf(b.rep)
	for _, n := range allSteps {
		if _, ok := steps[n]; !ok {
			t.Errorf("step %s missing from the report", n)
		}
	}
	for _, s := range b.rep.Steps {
		if s.Status == report.Failed {
			t.Errorf("step %s failed: %s", s.Name, s.Error)
		}
	}
	if len(b.rep.Facts.Sysctls) == 0 || b.rep.Facts.NIC == nil {
		t.Errorf("report without facts: %+v", b.rep.Facts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, _, err := b.Console.WaitEvent(ctx, 0, report.EventCrashLoop); err != nil {
		t.Error(err)
	}
	// More restarts, and still one report.
	mark := b.Console.Len()
	for i := 0; i < 3; i++ {
		if _, _, err := b.Console.WaitEvent(ctx, mark, report.EventStart); err != nil {
			t.Fatal(err)
		}
		mark = b.Console.Len()
	}
	reps, _, err := report.Parse(strings.NewReader(b.Console.String()))
	if err != nil {
		t.Fatal(err)
	}
	full := 0
	for _, r := range reps {
		if !r.Compact {
			full++
		}
	}
	if full != 1 {
		t.Errorf("%d full boot reports in a crash loop, want exactly 1", full)
	}
	mark = b.Console.Len()
	if err := b.QMP.SystemPowerdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Console.WaitEvent(ctx, mark, report.EventPowerOff); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(ctx); err != nil {
		t.Fatalf("QEMU did not exit after power off: %v", err)
	}
}

// TestInitCRNG boots the default image on a CPU without RDRAND (qemu64)
// and no virtio-rng, then with -cpu max: both take their DHCP lease at
// boot and serve. The times are printed to compare; the only bound is a
// generous one that catches the old two-minute wait for the CRNG.
func TestInitCRNG(t *testing.T) {
	requireE2E(t)
	disk := buildImageConfig(t, "", []byte(""))
	for _, model := range []string{"qemu64", "max"} {
		t.Run(model, func(t *testing.T) {
			start := time.Now()
			b := bootConfig(t, vm.Config{Disk: disk, CPUs: 2, CPUModel: model}, 0)
			wall := time.Since(start)
			dhcp := stepsOf(b.rep)["net-dhcp"]
			if dhcp.Status != report.Applied {
				t.Errorf("net-dhcp %s: %s", dhcp.Status, dhcp.Error)
			}
			if dhcp.Millis > 60000 {
				t.Errorf("net-dhcp took %.0f ms: waiting for the CRNG?", dhcp.Millis)
			}
			crng := "none"
			if b.rep.CRNG != nil {
				crng = fmt.Sprintf("ready at init %v, ready_ms %d", b.rep.CRNG.ReadyAtInit, b.rep.CRNG.ReadyMillis)
			} else {
				t.Error("report without crng")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := CheckGet(ctx, b.dial, JSON); err != nil {
				t.Error(err)
			}
			fmt.Fprintf(os.Stderr, "e2e: -cpu %s, no virtio-rng: QEMU start to report %v, kernel start to ready %d ms, net-dhcp %.0f ms, crng: %s\n",
				model, wall.Round(time.Millisecond), b.rep.ReadyMillis, dhcp.Millis, crng)
		})
	}
}

// TestInitPanicReboots: a kernel panic (the workload writes "c" to
// /proc/sysrq-trigger) reboots the machine after panic=10 seconds instead
// of hanging it: the second boot shows on the console.
func TestInitPanicReboots(t *testing.T) {
	requireE2E(t)
	disk := buildImageConfig(t, probePkg, []byte(probeRoot))
	// An Intel vendor (TCG's max is AMD) for the machine check at the end:
	// Linux's AMD severity rules panic on any uncorrected error that hits
	// kernel code, and an idle guest is in its idle loop.
	b := bootConfig(t, vm.Config{Disk: disk, CPUs: 2, AllowReboot: true, CPUModel: "max,vendor=GenuineIntel"}, 0)
	if !strings.Contains(b.rep.Facts.Cmdline, "panic=10") {
		t.Errorf("cmdline %q without panic=10", b.rep.Facts.Cmdline)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Before the panic, this 2-vCPU boot's flows are steered from outside.
	t.Run("locality", func(t *testing.T) { checkSteeredLocality(ctx, t, b) })
	mark := b.Console.Len()
	if body, err := b.get(ctx, "/panic"); err != nil || !strings.Contains(body, "panicking") {
		t.Fatalf("/panic: %q, %v", body, err)
	}
	at, err := b.Console.WaitString(ctx, mark, "Kernel panic")
	if err != nil {
		t.Fatal(err)
	}
	panicked := time.Now()
	if _, err := b.Console.WaitString(ctx, at, "Rebooting in 10 seconds"); err != nil {
		t.Error(err)
	}
	// The reset: the firmware's boot manager speaks again, then the
	// kernel and the init.
	if _, err := b.Console.WaitString(ctx, at, "BdsDxe"); err != nil {
		t.Fatalf("no reset after the panic: %v", err)
	}
	// QEMU stamps its RESET event when the guest resets; QMP delivers
	// events with the next command's answer.
	if _, err := b.QMP.Status(ctx); err != nil {
		t.Fatal(err)
	}
	var reset time.Duration
	for _, e := range b.QMP.Events() {
		if e.Event == "RESET" {
			at := time.Unix(e.Timestamp.Seconds, e.Timestamp.Microseconds*1000)
			reset = at.Sub(panicked)
		}
	}
	if reset == 0 {
		t.Fatalf("no RESET event from QEMU: %+v", b.QMP.Events())
	}
	if _, err := b.Console.WaitString(ctx, at, "Linux version"); err != nil {
		t.Fatalf("no second boot after the panic: %v", err)
	}
	kernel := time.Since(panicked)
	fmt.Fprintf(os.Stderr, "e2e: kernel panic seen to QEMU's RESET event %v, to the second kernel start %v (panic=10, TCG)\n",
		reset.Round(time.Millisecond), kernel.Round(time.Millisecond))
	// panic() waits its 10 s in mdelay steps, which on x86 are TSC
	// delays (delay_tsc): under TCG the guest's TSC follows the host's
	// clock, and it was calibrated against the PIT, which does too, so
	// the wait is not shorter than 10 s of the host's time; a loaded host
	// only makes it longer (the vCPU thread waits for a CPU between
	// steps). The console line is seen a little after it was printed,
	// which shortens the figure: 1 s allowed for that. So at least 9 s (a
	// reset that does not wait, or panic=1, fails) and at most 40 (a
	// hang, on a host loaded enough to stretch the wait).
	if reset < 9*time.Second || reset > 40*time.Second {
		t.Errorf("reset %v after the panic, want about 10 s (panic=10): between 9 and 40 s", reset)
	}
	if _, err := b.Console.WaitString(ctx, at, "hotpath-init: starting"); err != nil {
		t.Errorf("the init did not start again: %v", err)
	}
	// Crash capture (nitro_test.go): the first boot found nothing to
	// report; the second names the panic and its last kernel lines.
	checkPanicCaptured(ctx, t, b, at)
	// Last, on the second boot (its report checked above, so that the
	// error the kernel finds in the banks at a later boot reaches no
	// checked report): a machine check the kernel survives, counted from
	// outside.
	checkMachineCheckCounted(ctx, t, b)
}
