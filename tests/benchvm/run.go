package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hotpath-dev/hotpath/init/napi"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/txload"
	"github.com/hotpath-dev/hotpath/tests/vm"
)

// guest is one booted guest and its runs.
type guest struct {
	spec
	cfg    vm.Config
	kernel string // the appliance manifest's kernel version; the stock kernel's release once booted
	*vm.Guest
	// notes are what the guest said of itself at boot: the NAPI step's
	// outcome, the workload's epoll busy-poll line.
	notes   []string
	samples []sample
	failed  int // runs that did not complete (wrk or a scrape failed)
}

// sample is one run: wrk's figures and the guest's counters around it.
type sample struct {
	RPS      float64
	Requests int64
	P99      time.Duration // wrk --latency's 99th percentile
	Delta    counters
	// DropLines counts the console's "asks to queue packet" lines during
	// the run (net_crit_ratelimited: at most 10 per 5 s are printed).
	DropLines int
	// Stalls counts the scrapes of the management port around the run
	// that got no answer in time and were tried again.
	Stalls int
}

func (s sample) perRequest(v float64) float64 { return v / float64(s.Requests) }

// boot starts the guest and waits until it serves: the boot report for the
// appliance (whose NAPI step it notes), gpinit's ready line for the stock
// kernel.
func (g *guest) boot(ctx context.Context) error {
	log.Printf("%s: booting %d vCPUs under %s", g.Name, g.cfg.CPUs, g.cfg.Accel)
	vg, err := vm.StartGuest(ctx, g.cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", g.Name, err)
	}
	g.Guest = vg
	bctx, cancel := context.WithTimeout(ctx, *bootWait)
	defer cancel()
	if g.Stock {
		if _, err := g.Console.WaitString(bctx, 0, "GPINIT-READY"); err != nil {
			return fmt.Errorf("%s: %w\n%s", g.Name, err, g.Console.Tail(20))
		}
		g.kernel = stockRelease(g.Console.String())
	} else {
		rep, err := g.Console.WaitReport(bctx)
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", g.Name, err, g.Console.Tail(20))
		}
		g.kernel = rep.Kernel
		g.notes = append(g.notes, napiNote(rep))
	}
	// The server writes its busy-poll line just before "ready".
	if line := consoleLine(g.Console.String(), "epoll busy polling:"); line != "" {
		g.notes = append(g.notes, line)
	}
	log.Printf("%s: ready after %v, kernel %s", g.Name, time.Since(g.Started).Round(time.Millisecond), g.kernel)
	return nil
}

// napiNote is the boot report's line for the NAPI deferral step.
func napiNote(rep *report.Report) string {
	for _, s := range rep.Steps {
		if s.Name != napi.StepName {
			continue
		}
		var kv []string
		for k, v := range s.Detail {
			kv = append(kv, k+"="+v)
		}
		slices.Sort(kv)
		why := s.Reason + s.Error
		return fmt.Sprintf("%s %s %s %s", s.Name, s.Status, strings.Join(kv, " "), why)
	}
	return napi.StepName + " not in the boot report"
}

func stockRelease(console string) string {
	if l := consoleLine(console, "gpinit: kernel "); l != "" {
		return strings.TrimPrefix(l[strings.Index(l, "gpinit: kernel "):], "gpinit: kernel ")
	}
	return "?"
}

// consoleLine is the first console line containing s, trimmed.
func consoleLine(console, s string) string {
	for _, l := range strings.Split(console, "\n") {
		if strings.Contains(l, s) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// run drives wrk for d against the guest, reading its counters before and
// after.
func (g *guest) run(ctx context.Context, d time.Duration) (sample, error) {
	before, stalls, err := readCounters(ctx, g.Netns.DialContext, g.Addr)
	if err != nil {
		return sample{}, fmt.Errorf("%s: before the run: %w", g.Name, err)
	}
	lines := dropLines(g.Console.String())
	var (
		rps float64
		n   int64
		p99 time.Duration
	)
	if *pipeline > 1 {
		l := txload.Load{Conns: *conns, Depth: *pipeline, Path: *path, BodyLen: *bodyLen, Duration: d}
		r := l.Run(ctx, func(ctx context.Context) (net.Conn, error) {
			return g.Netns.DialContext(ctx, "tcp", net.JoinHostPort(g.Addr, "8080"))
		})
		for _, err := range r.Errors {
			log.Printf("%s: %v", g.Name, err)
		}
		if r.Answers == 0 || len(r.Batches) == 0 {
			return sample{}, fmt.Errorf("%s: no answer (%d errors)", g.Name, len(r.Errors))
		}
		rps, n, p99 = float64(r.Answers)/d.Seconds(), int64(r.Answers), r.Percentile(99)
	} else {
		url := "http://" + net.JoinHostPort(g.Addr, "8080") + *path
		args := []string{"--latency", "--timeout", wrkTimeout.String(), "-t", strconv.Itoa(*threads), "-c", strconv.Itoa(*conns), "-d", d.String(), url}
		out, err := g.Netns.Command(ctx, "wrk", args...).CombinedOutput()
		if err != nil {
			return sample{}, fmt.Errorf("%s: wrk: %v\n%s", g.Name, err, out)
		}
		if rps, n, err = parseWrk(out); err != nil {
			return sample{}, fmt.Errorf("%s: %w\n%s", g.Name, err, out)
		}
		if n == 0 {
			return sample{}, fmt.Errorf("%s: wrk completed no request\n%s", g.Name, out)
		}
		if p99, err = parseP99(out); err != nil {
			return sample{}, fmt.Errorf("%s: %w\n%s", g.Name, err, out)
		}
	}
	after, stalls2, err := readCounters(ctx, g.Netns.DialContext, g.Addr)
	if err != nil {
		return sample{}, fmt.Errorf("%s: after the run: %w", g.Name, err)
	}
	return sample{RPS: rps, Requests: n, P99: p99, Delta: after.sub(before), Stalls: stalls + stalls2,
		DropLines: dropLines(g.Console.String()) - lines}, nil
}

// DropLine is what 6.12's __dev_queue_xmit logs when a noqueue device's
// queue is stopped: the packet is dropped.
const DropLine = "asks to queue packet!"

func dropLines(console string) int { return strings.Count(console, DropLine) }

// rounds warms every guest up, then runs *runs rounds, each guest once per
// round, the order rotated by one each round.
func rounds(ctx context.Context, gs []*guest) error {
	if *warmup > 0 {
		for _, g := range gs {
			if _, err := g.run(ctx, *warmup); err != nil {
				return fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	for r := 0; r < *runs; r++ {
		for i := range gs {
			g := gs[(i+r)%len(gs)]
			s, err := g.run(ctx, *duration)
			if err != nil {
				// A guest that stops serving is a result, not the end of
				// the comparison: the table counts its failed runs.
				log.Printf("round %d: %v", r+1, err)
				g.failed++
				continue
			}
			log.Printf("round %d: %-24s %8.0f req/s %6.3f irq/req %6.3f rx irq/req %6.3f NET_RX/req %6.3f cs/req %8.1f µs CPU/req p99 %v; tx_dropped %.0f qdisc drops %.0f retransmits %.0f drop lines %d",
				r+1, g.Name, s.RPS, s.perRequest(s.Delta.IRQs), s.perRequest(s.Delta.RxIRQs), s.perRequest(s.Delta.NetRx), s.perRequest(s.Delta.Ctxt), 1e6*s.perRequest(s.Delta.Busy), s.P99,
				s.Delta.TxDropped, s.Delta.QdiscDrops, s.Delta.Retrans, s.DropLines)
			g.samples = append(g.samples, s)
		}
	}
	return nil
}

// summary is a guest's medians over its runs.
type summary struct {
	RPS, IRQs, RxIRQs, NetRx, Ctxt, CPUMicros, Busy float64
	P99                                             time.Duration
	Stalls                                          int // total over the runs
	// Totals over the runs: drops and retransmits are counts, not rates.
	TxDropped, QdiscDrops, Retrans float64
	DropLines                      int
}

func summarize(ss []sample) summary {
	med := func(f func(sample) float64) float64 {
		var v []float64
		for _, s := range ss {
			v = append(v, f(s))
		}
		return median(v)
	}
	var t summary
	for _, s := range ss {
		t.Stalls += s.Stalls
		t.TxDropped += s.Delta.TxDropped
		t.QdiscDrops += s.Delta.QdiscDrops
		t.Retrans += s.Delta.Retrans
		t.DropLines += s.DropLines
	}
	return summary{
		Stalls: t.Stalls, TxDropped: t.TxDropped, QdiscDrops: t.QdiscDrops, Retrans: t.Retrans, DropLines: t.DropLines,
		P99:       time.Duration(med(func(s sample) float64 { return float64(s.P99) })),
		RPS:       med(func(s sample) float64 { return s.RPS }),
		IRQs:      med(func(s sample) float64 { return s.perRequest(s.Delta.IRQs) }),
		RxIRQs:    med(func(s sample) float64 { return s.perRequest(s.Delta.RxIRQs) }),
		NetRx:     med(func(s sample) float64 { return s.perRequest(s.Delta.NetRx) }),
		Ctxt:      med(func(s sample) float64 { return s.perRequest(s.Delta.Ctxt) }),
		CPUMicros: med(func(s sample) float64 { return 1e6 * s.perRequest(s.Delta.Busy) }),
		Busy: med(func(s sample) float64 {
			if t := s.Delta.Busy + s.Delta.Idle; t > 0 {
				return s.Delta.Busy / t
			}
			return 0
		}),
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// printTable writes the side-by-side result.
func printTable(w io.Writer, gs []*guest, accel string) {
	load := fmt.Sprintf("wrk -t%d -c%d -d%v", *threads, *conns, *duration)
	if *pipeline > 1 {
		load = fmt.Sprintf("tests/txload %d connections x %d pipelined for %v", *conns, *pipeline, *duration)
	}
	fmt.Fprintf(w, "\nbench-vm: GET %s, %d vCPUs, %s queue pairs under %s, %s, median of %d interleaved rounds\n",
		*path, *cpus, queueCount(), accel, load, *runs)
	fmt.Fprintf(w, "  %-26s %-22s %10s %9s %11s %11s %8s %12s %9s %9s %10s %10s %8s %7s %6s\n", "guest", "kernel", "req/s", "irq/req", "rx irq/req", "NET_RX/req", "cs/req", "CPU µs/req", "CPU busy",
		"p99", "tx_dropped", "qdisc drop", "retrans", "stalls", "failed")
	for _, g := range gs {
		s := summarize(g.samples)
		fmt.Fprintf(w, "  %-26s %-22s %10.0f %9.3f %11.3f %11.3f %8.3f %12.1f %8.0f%% %9v %10.0f %10.0f %8.0f %7d %6d\n",
			g.Name, g.kernel, s.RPS, s.IRQs, s.RxIRQs, s.NetRx, s.Ctxt, s.CPUMicros, 100*s.Busy, s.P99.Round(10*time.Microsecond), s.TxDropped, s.QdiscDrops, s.Retrans, s.Stalls, g.failed)
	}
	fmt.Fprintln(w, "  p99: of a request (wrk --latency) or, with -pipeline, of a batch from its write to its last answer (tests/txload), median over the runs; tx_dropped (hotpath_netdev_tx_dropped_total), qdisc drop (root qdisc),")
	fmt.Fprintln(w, "  retrans (Tcp RetransSegs): totals over the counted runs. Console lines \""+DropLine+"\" (rate-limited) per guest:")
	for _, g := range gs {
		fmt.Fprintf(w, "    %s: %d\n", g.Name, summarize(g.samples).DropLines)
	}
	fmt.Fprintln(w, "  irq/req: the NIC's queue interrupts (all CPUs) per completed request; rx: the receive lines only;")
	fmt.Fprintln(w, "  NET_RX/req: the guest's NET_RX softirqs (/proc/softirqs, all CPUs), the deferral timer's polls included;")
	fmt.Fprintln(w, "  cs/req: the guest's context switches (/proc/stat ctxt, all CPUs) per request;")
	fmt.Fprintln(w, "  CPU µs/req: guest CPU time outside idle (/proc/stat, 10 ms ticks) per request; all read through port "+MgmtPort+";")
	fmt.Fprintf(w, "  stalls: scrapes of that port with no answer within %v, tried again on a new connection; failed: runs lost (wrk or every scrape failed).\n", scrapeTimeout)
	for _, g := range gs {
		for _, n := range g.notes {
			fmt.Fprintf(w, "  %s: %s\n", g.Name, n)
		}
	}
	if accel == "tcg" {
		fmt.Fprintln(w, "  NOTE: under TCG the guest CPU is emulated and wrk competes with QEMU for the host's CPUs:")
		fmt.Fprintln(w, "        requests/s and CPU per request are only indicative; interrupts per request are the guest kernel's")
		fmt.Fprintln(w, "        own count and the telling figure. Run with HOTPATH_KVM=1 where KVM works for real throughput.")
	}
}

func queueCount() string {
	if *queues == 0 {
		return strconv.Itoa(*cpus)
	}
	return strconv.Itoa(*queues)
}
