package e2e

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/image"
	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/vm"
)

var (
	bootCost     = flag.Bool("e2e.bootcost", false, "run TestBootCost (a measurement, not a check) on this tree's default image; -e2e.baseline adds a tree to compare with")
	baselineRoot = flag.String("e2e.baseline", "", "a hotpath source tree (e.g. `git archive` of an older commit) whose default image TestBootCost compares against (implies -e2e.bootcost)")
	bootCostN    = flag.Int("e2e.bootcost.n", 3, "boots per image and network in TestBootCost")
	bootCostLine = flag.String("e2e.bootcost.cmdline", "", "kernel command line words TestBootCost also boots the default image with (a second image, booted alternately with the default), e.g. quiet")
	bootCostNets = flag.String("e2e.bootcost.nets", "netns,usernet", "TestBootCost's networks: netns (the harness's namespace, an IPv4-only DHCP server, no router advertisements) and usernet (make run's QEMU user network with restrict=on: slirp's DHCP and router advertisements, no egress)")
)

// bootCostNet is one network TestBootCost boots the default image on.
type bootCostNet struct {
	name string
	// boot starts disk on this network and checks what the network
	// promises (an address, the workload answering on it).
	boot func(t *testing.T, disk string) *booted
}

var bootCostNetworks = []bootCostNet{
	{"netns", func(t *testing.T, disk string) *booted { return boot(t, disk, 2) }},
	{"usernet", bootUserNet},
}

// TestBootCost measures kernel-start-to-ready of the default image on a
// plain QEMU guest (not EC2: imds=auto must decide in microseconds and
// time sync must not wait), 2 vCPUs, -e2e.bootcost.n boots per network:
// the harness's IPv4-only namespace and `make run`'s user network (minus
// its egress, see bootUserNet). With -e2e.baseline it boots that tree's
// image too, alternately with this tree's, so that the shared machine's
// load falls on both. It is a measurement, run on request: it logs the
// medians of ready and of each timeline phase and asserts nothing about
// time; on the user network it checks that the IPv6 address still comes
// from slirp's router advertisement, in the background. With
// -e2e.bootcost.cmdline it also boots the default image with those
// kernel command line words, alternately with the default.
//
//	go test -v -run TestBootCost -e2e.bootcost ./tests/e2e/
//	go test -v -run TestBootCost -e2e.bootcost -e2e.bootcost.cmdline=quiet ./tests/e2e/
//	git archive BASE | tar -x -C /tmp/base
//	go test -v -run TestBootCost -e2e.baseline=/tmp/base ./tests/e2e/
func TestBootCost(t *testing.T) {
	if !*bootCost && *baselineRoot == "" {
		// Not a check: 2n boots per image (6-10 s each under TCG on a
		// quiet 2-core machine, a minute on a loaded one) to log
		// timings, so make test leaves it out and testsum lists it as
		// skipped.
		t.Skip("a measurement run on request, not a check: give -e2e.bootcost (and -e2e.baseline=DIR to compare with another tree)")
	}
	requireE2E(t)
	var nets []bootCostNet
	for _, name := range strings.Split(*bootCostNets, ",") {
		i := slices.IndexFunc(bootCostNetworks, func(n bootCostNet) bool { return n.name == name })
		if i < 0 {
			t.Fatalf("-e2e.bootcost.nets: unknown network %q (netns, usernet)", name)
		}
		nets = append(nets, bootCostNetworks[i])
	}
	disks := map[string]string{"this tree": buildImage(t, "")}
	images := []string{"this tree"}
	if *baselineRoot != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		base, err := image.Build(ctx, image.Options{Out: t.TempDir(), Root: *baselineRoot, Log: prefixWriter{os.Stderr, "e2e: base: "}})
		if err != nil {
			t.Fatal(err)
		}
		disks["baseline"] = base.Disk
		images = []string{"baseline", "this tree"}
	}
	if *bootCostLine != "" {
		name := "with " + *bootCostLine
		disks[name] = buildWith(t, image.Options{Cmdline: *bootCostLine}).Disk
		images = append(images, name)
	}
	costs := map[string]*bootCosts{}
	for i := range *bootCostN {
		for _, n := range nets {
			for _, name := range images {
				key := name + " on " + n.name
				t.Run(fmt.Sprintf("%s-%s-%d", strings.Join(strings.Fields(name), "-"), n.name, i), func(t *testing.T) {
					b := n.boot(t, disks[name])
					if costs[key] == nil {
						costs[key] = &bootCosts{}
					}
					costs[key].add(b.rep)
				})
			}
		}
	}
	for _, n := range nets {
		for _, name := range images {
			if c := costs[name+" on "+n.name]; c != nil {
				t.Logf("%s on %s:\n%s", name, n.name, c)
			}
		}
	}
}

// bootUserNet boots disk on `make run`'s network: QEMU's user network
// (slirp) with the workload's port forwarded, as hotpath-image run
// starts it, plus restrict=on, which keeps slirp's DHCP server and router
// advertisements but drops whatever the guest sends anywhere else (the
// NTP, metadata and DNS queries make run would forward off the host);
// and QEMU runs in a namespace of the test's own, whose loopback the
// forward listens on. Its checks: the report and timeline, the IPv6
// address autoconfigured from slirp's advertisement by the background
// net-ipv6 step, and /json through the forward.
func bootUserNet(t *testing.T, disk string) *booted {
	t.Helper()
	ns := vm.NewNetns(t)
	port := config.Default().WorkloadPort
	cfg := vm.Config{Disk: disk, CPUs: 2, Accel: vm.Accel(), Netns: ns, Dir: shortDir(t), UserNet: &vm.UserNet{
		Restrict: true,
		HostFwd:  []string{fmt.Sprintf("tcp:127.0.0.1:%d-:%d", port, port)},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), bootTimeout(cfg.Accel))
	defer cancel()
	v, err := vm.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		v.Close()
		if t.Failed() {
			t.Logf("console log: %s\n--- console tail ---\n%s\n--- qemu stderr ---\n%s", filepath.Join(v.Dir, "console.log"), v.Console.Tail(60), v.Stderr())
		}
	})
	rep, err := v.Console.WaitReport(ctx)
	if err != nil {
		t.Fatalf("no boot report: %v", err)
	}
	fmt.Fprintf(os.Stderr, "e2e: user network (restrict=on), 2 vCPUs under %s: boot report after %v wall time, kernel start to workload ready %d ms (guest clock)\n",
		v.Accel, time.Since(v.Started).Round(time.Millisecond), rep.ReadyMillis)
	fmt.Fprintf(os.Stderr, "e2e: timeline: %s\n", TimelineSummary(rep))
	b := &booted{Guest: &vm.Guest{VM: v, Netns: ns, Addr: "127.0.0.1"}, rep: rep, cpus: 2, port: fmt.Sprint(port)}
	reportErrs(t, CheckReport(rep, 2))
	if s := stepsOf(rep)["net-dhcp"]; s.Status != report.Applied || s.Detail["address"] != vm.UserNetGuestAddr+"/24" {
		t.Errorf("net-dhcp on the user network: %+v, want slirp's lease %s/24", s, vm.UserNetGuestAddr)
	}
	if s := stepsOf(rep)["net-ipv6"]; s.Status != report.Background {
		t.Errorf("net-ipv6 in the report: %+v, want background (IPv4 is on: the workload does not wait for it)", s)
	}
	s6 := waitStepDone(ctx, t, b, "net-ipv6")
	if err := checkSLAAC(s6, vm.UserNetPrefix6); err != nil {
		t.Error(err)
	}
	if err := CheckGet(ctx, b.dial, JSON); err != nil {
		t.Errorf("/json through the user network's forward: %v", err)
	}
	return b
}

// checkSLAAC checks that net-ipv6's outcome is an address autoconfigured
// in prefix from an advertisement without the managed flag.
func checkSLAAC(s report.Step, prefix string) error {
	p := netip.MustParsePrefix(prefix)
	if ra := s.Detail["ra"]; s.Status != report.Applied || ra == "" || ra == "none" || strings.HasPrefix(ra, "managed") {
		return fmt.Errorf("net-ipv6: %+v, want applied after a router advertisement without the managed flag", s)
	}
	var in []string
	for _, a := range strings.Split(s.Detail["slaac"], ",") {
		if ap, err := netip.ParsePrefix(a); err == nil && p.Contains(ap.Addr()) {
			in = append(in, a)
		}
	}
	if len(in) == 0 {
		return fmt.Errorf("net-ipv6: no autoconfigured address in %s (slaac %q, ra %q)", prefix, s.Detail["slaac"], s.Detail["ra"])
	}
	return nil
}

// bootCosts are the ready times and timeline phases of a set of boots.
type bootCosts struct {
	ready  []float64
	phases map[string][]float64 // kernel, init, steps, each step, workload-exec, ready
	order  []string
}

func (c *bootCosts) add(r *report.Report) {
	if c.phases == nil {
		c.phases = map[string][]float64{}
	}
	put := func(name string, ms float64) {
		if _, ok := c.phases[name]; !ok {
			c.order = append(c.order, name)
		}
		c.phases[name] = append(c.phases[name], ms)
	}
	c.ready = append(c.ready, float64(r.ReadyMillis))
	var steps float64
	for _, p := range r.Timeline {
		if p.Background {
			continue
		}
		d := p.End - p.Start
		if name, ok := strings.CutPrefix(p.Name, "step "); ok {
			steps += d
			put(name, d)
			continue
		}
		if p.Name == report.PhaseExec {
			put("steps (all)", steps)
		}
		put(p.Name, d)
	}
}

// String is the ready times and their median, then the median and values
// of each phase: the kernel's, the init's, the steps together, each step
// whose median is at least minStepMillis (the others summed), the
// workload's exec and ready (exec to first accept); one a line.
func (c *bootCosts) String() string {
	const minStepMillis = 5
	var b strings.Builder
	fmt.Fprintf(&b, "  kernel start to ready (ms): %v, median %.0f\n", c.ready, median(c.ready))
	line := func(name string, v []float64) {
		fmt.Fprintf(&b, "  %-24s median %7.1f ms  %v\n", name, median(v), rounded(v))
	}
	var small int
	var rest []float64
	for _, name := range c.order {
		if v := c.phases[name]; isStep(name) && median(v) < minStepMillis {
			small++
			if rest == nil {
				rest = make([]float64, len(v))
			}
			for i := range min(len(v), len(rest)) {
				rest[i] += v[i]
			}
		}
	}
	for _, name := range c.order {
		v := c.phases[name]
		switch {
		case name == "steps (all)":
			if small > 0 {
				line(fmt.Sprintf("  %d other steps", small), rest)
			}
			line(name, v)
		case !isStep(name):
			line(name, v)
		case median(v) >= minStepMillis:
			line("  step "+name, v)
		}
	}
	return b.String()
}

// isStep says whether a bootCosts phase is one step's.
func isStep(name string) bool {
	switch name {
	case report.PhaseKernel, report.PhaseInit, report.PhaseExec, report.PhaseReady, "steps (all)":
		return false
	}
	return true
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func rounded(v []float64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x + 0.5)
	}
	return out
}

// The SLAAC check of the user-network boot, and the medians it logs.
func TestCheckSLAAC(t *testing.T) {
	ok := report.Step{Name: "net-ipv6", Status: report.Applied, Detail: map[string]string{"ra": "unmanaged", "slaac": "fd68:7074:6800:0:5054:ff:fe12:3456/64"}}
	for _, tc := range []struct {
		name string
		edit func(*report.Step)
		ok   bool
	}{
		{"slirp's advertisement", func(*report.Step) {}, true},
		{"two addresses, one in the prefix", func(s *report.Step) { s.Detail["slaac"] = "2001:db8::1/64,fd68:7074:6800::1/64" }, true},
		{"skipped", func(s *report.Step) { s.Status = report.Skipped }, false},
		{"no advertisement", func(s *report.Step) { s.Detail["ra"] = "none" }, false},
		{"managed: DHCPv6, not SLAAC", func(s *report.Step) { s.Detail["ra"] = "managed" }, false},
		{"address outside the prefix", func(s *report.Step) { s.Detail["slaac"] = "2001:db8::1/64" }, false},
		{"no address", func(s *report.Step) { delete(s.Detail, "slaac") }, false},
	} {
		s := ok
		s.Detail = maps.Clone(ok.Detail)
		tc.edit(&s)
		if err := checkSLAAC(s, vm.UserNetPrefix6); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median of 3 = %v", m)
	}
	if m := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median of 4 = %v", m)
	}
}

// The cost table: every phase's median, the small steps summed before
// the steps' total.
func TestBootCostsTable(t *testing.T) {
	var c bootCosts
	for _, ms := range []float64{10, 30, 20} {
		c.add(&report.Report{ReadyMillis: int64(1000 + ms), Timeline: []report.Phase{
			{Name: report.PhaseKernel, Start: 0, End: 900},
			{Name: report.PhaseInit, Start: 900, End: 905},
			{Name: "step mounts", Start: 905, End: 905 + ms},
			{Name: "step vlan", Start: 905 + ms, End: 906 + ms},
			{Name: "step net-ipv6", Start: 906 + ms, End: -1, Background: true},
			{Name: "step tpm", Start: 906 + ms, End: 908 + ms},
			{Name: report.PhaseExec, Start: 908 + ms, End: 920 + ms},
			{Name: report.PhaseReady, Start: 920 + ms, End: 1000 + ms},
		}})
	}
	want := `  kernel start to ready (ms): [1010 1030 1020], median 1020
  kernel                   median   900.0 ms  [900 900 900]
  init                     median     5.0 ms  [5 5 5]
    step mounts            median    20.0 ms  [10 30 20]
    2 other steps          median     3.0 ms  [3 3 3]
  steps (all)              median    23.0 ms  [13 33 23]
  workload-exec            median    12.0 ms  [12 12 12]
  ready                    median    80.0 ms  [80 80 80]
`
	if got := c.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
