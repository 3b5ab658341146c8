package consolelog

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/hotpath-dev/hotpath/init/report"
)

// WriteChecklist writes the log as a checklist a person reads: what failed
// first, the steps, the facts, the events.
func (l *Log) WriteChecklist(w io.Writer) error {
	ew := &errWriter{w: w}
	p := func(format string, args ...any) { fmt.Fprintf(ew, format, args...) }

	p("hotpath boot")
	if l.Boots > 1 {
		p(" (the last of %d boots in this log)", l.Boots)
	}
	p("\n")
	if l.Kernel != "" {
		p("  kernel:  %s\n", shorten(l.Kernel, 100))
	}
	if l.Truncated {
		p("  note:    the log starts mid-boot (no kernel start line; EC2 keeps the last 64 KiB)\n")
	}
	if r := l.Report; r != nil {
		p("  release: %s, %d CPUs\n", r.Kernel, r.CPUs)
		if r.ReadyMillis >= 0 {
			p("  ready:   %d ms after kernel start\n", r.ReadyMillis)
		} else {
			p("  ready:   NO (%s)\n", r.ReadyError)
		}
		if r.Workload != nil {
			p("  workload: %s on CPUs %s, port %d\n", strings.Join(append([]string{r.Workload.Path}, r.Workload.Args...), " "), r.Workload.CPUs, r.Workload.Port)
		}
		if len(r.Unknown) > 0 {
			p("  unknown configuration keys: %s\n", strings.Join(r.Unknown, ", "))
		}
	}

	p("\n")
	if f, ok := l.FirstFailure(); ok {
		p("FIRST FAILURE%s: %s\n", at(f.Line), f.What)
		if len(l.Problems) > 1 {
			p("then:\n")
			for _, q := range l.Problems[1:] {
				p("  - %s%s\n", q.What, at(q.Line))
			}
		}
	} else {
		p("no failure: every step applied or skipped with a reason, the workload ready, no crash\n")
	}

	counts := map[report.Status]int{}
	for _, s := range l.Steps {
		counts[s.Status]++
	}
	p("\nsteps: %d applied, %d skipped, %d failed\n", counts[report.Applied], counts[report.Skipped], counts[report.Failed])
	tw := tabwriter.NewWriter(ew, 0, 4, 2, ' ', 0)
	for _, s := range l.Steps {
		mark := map[report.Status]string{report.Applied: "[x]", report.Skipped: "[-]", report.Failed: "[!]"}[s.Status]
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", mark, s.Name, s.Status, shorten(s.Why, 110))
	}
	tw.Flush()

	if r := l.Report; r != nil {
		p("\nfacts:\n")
		writeFacts(p, &r.Facts)
	}

	if len(l.Events) > 0 {
		p("\nevents:\n")
		for _, e := range l.Events {
			p("  %9.3fs  %-16s", float64(e.Millis)/1000, e.Kind)
			if e.PID != 0 {
				p(" pid %d", e.PID)
			}
			if e.Detail != "" {
				p(" %s", e.Detail)
			}
			if e.BackoffMS != 0 {
				p(" back-off %d ms", e.BackoffMS)
			}
			if e.Exits != 0 {
				p(" %d exits", e.Exits)
			}
			p("\n")
		}
	}
	return ew.err
}

func writeFacts(p func(string, ...any), f *report.Facts) {
	vulnerable, notAffected, other := 0, 0, []string{}
	for _, k := range slices.Sorted(maps.Keys(f.Vulnerabilities)) {
		v := f.Vulnerabilities[k]
		switch {
		case strings.HasPrefix(v, "Vulnerable"):
			vulnerable++
		case strings.HasPrefix(v, "Not affected"):
			notAffected++
		default:
			other = append(other, k+": "+v)
		}
	}
	p("  mitigations: %d vulnerable (mitigation off), %d not affected", vulnerable, notAffected)
	if len(other) > 0 {
		p(", mitigated: %s", strings.Join(other, "; "))
	}
	p("\n")
	yn := func(b bool) string {
		if b {
			return "present"
		}
		return "absent"
	}
	p("  kernel: netfilter %s, audit %s, seccomp %s, modules %s\n", yn(f.Netfilter), yn(f.Audit), yn(f.Seccomp), yn(f.Modules))
	p("  packet sockets open: %d\n", f.PacketSockets)
	if n := f.NIC; n != nil {
		p("  nic: %s (%s) %s, valid_lft %s, gateway %s, mtu %d\n", n.Name, n.Driver, strings.Join(n.Addrs, " "), n.Lifetime, n.Gateway, n.MTU)
		p("       %d rx / %d tx queues, qdisc %s [%s], gro %s, tx dropped %d, qdisc drops %d\n", n.RxQueues, n.TxQueues, n.Qdisc, strings.Join(n.Children, " "), n.GRO, n.TxDropped, n.QdiscDrops)
		for _, irq := range n.IRQs {
			p("       irq %d %s (queue %d) -> cpus %s\n", irq.IRQ, irq.Name, irq.Queue, irq.Affinity)
		}
	}
	if len(f.Sysctls) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(f.Sysctls)) {
			kv = append(kv, k+"="+f.Sysctls[k])
		}
		p("  sysctls: %s\n", strings.Join(kv, " "))
	}
}

func at(line int) string {
	if line == 0 {
		return ""
	}
	return fmt.Sprintf(" (console line %d)", line)
}

func shorten(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}
