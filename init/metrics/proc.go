package metrics

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hotpath-dev/hotpath/init/nic"
	"github.com/prometheus/client_golang/prometheus"
)

// userHZ is the unit of the times in /proc/stat: USER_HZ, fixed at 100 in
// the kernel's user ABI on every architecture hotpath targets.
const userHZ = 100

// lines reads a whole file (procfs files are generated on read and must be
// read in one go to be consistent) and calls fn for each line.
func lines(file string, fn func(line string) error) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	for sc.Scan() {
		if err := fn(sc.Text()); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
	}
	return sc.Err()
}

// interrupts exports /proc/interrupts per interrupt and CPU: the NIC's
// queue interrupts (queue != nil), or every numbered line.
type interrupts struct {
	file  string
	queue func(name string) (int, bool)
}

var interruptsDesc = prometheus.NewDesc(Namespace+"_interrupts_total",
	"Interrupts taken per CPU (/proc/interrupts); for the NIC's queue interrupts, with the queue number.",
	[]string{"irq", "name", "queue", "cpu"}, nil)

func (c *interrupts) collect(ch chan<- prometheus.Metric) error {
	b, err := os.ReadFile(c.file)
	if err != nil {
		return err
	}
	ints, err := nic.ParseInterrupts(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%s: %w", c.file, err)
	}
	for _, in := range ints {
		queue := ""
		if c.queue != nil {
			// A shared line is the queue's if one of its actions is.
			for _, n := range in.Names {
				if q, ok := c.queue(n); ok {
					queue = strconv.Itoa(q)
					break
				}
			}
			if queue == "" {
				continue
			}
		}
		irq, name := strconv.Itoa(in.IRQ), strings.Join(in.Names, ", ")
		for i, v := range in.Counts {
			ch <- prometheus.MustNewConstMetric(interruptsDesc, prometheus.CounterValue, float64(v), irq, name, queue, strconv.Itoa(in.CPUs[i]))
		}
	}
	return nil
}

// softnet exports /proc/net/softnet_stat, one line per online CPU in hex:
// processed, dropped, time_squeeze, five unused, cpu_collision,
// received_rps, flow_limit_count, and since Linux 5.10 the backlog length
// and the CPU number (earlier kernels: the line index is the CPU).
type softnet struct{ file string }

var softnetDescs = []struct {
	col  int
	desc *prometheus.Desc
	typ  prometheus.ValueType
}{
	{0, prometheus.NewDesc(Namespace+"_softnet_processed_total", "Packets processed by the CPU's network softirq.", []string{"cpu"}, nil), prometheus.CounterValue},
	{1, prometheus.NewDesc(Namespace+"_softnet_dropped_total", "Packets dropped because the CPU's input backlog (netdev_max_backlog) was full.", []string{"cpu"}, nil), prometheus.CounterValue},
	{2, prometheus.NewDesc(Namespace+"_softnet_times_squeezed_total", "Times the network softirq stopped with work left (netdev_budget or its time limit).", []string{"cpu"}, nil), prometheus.CounterValue},
	{9, prometheus.NewDesc(Namespace+"_softnet_received_rps_total", "Times the CPU was woken by an inter-processor interrupt for RPS.", []string{"cpu"}, nil), prometheus.CounterValue},
	{10, prometheus.NewDesc(Namespace+"_softnet_flow_limit_count_total", "Times the flow limit dropped a packet.", []string{"cpu"}, nil), prometheus.CounterValue},
	{11, prometheus.NewDesc(Namespace+"_softnet_backlog_len", "Packets waiting in the CPU's input backlog.", []string{"cpu"}, nil), prometheus.GaugeValue},
}

func (c *softnet) collect(ch chan<- prometheus.Metric) error {
	n := 0
	return lines(c.file, func(line string) error {
		f := strings.Fields(line)
		if len(f) == 0 {
			return nil
		}
		cpu := strconv.Itoa(n)
		n++
		if len(f) >= 13 {
			v, err := strconv.ParseUint(f[12], 16, 32)
			if err != nil {
				return fmt.Errorf("cpu column %q: %w", f[12], err)
			}
			cpu = strconv.FormatUint(v, 10)
		}
		for _, d := range softnetDescs {
			if d.col >= len(f) {
				continue
			}
			v, err := strconv.ParseUint(f[d.col], 16, 64)
			if err != nil {
				return fmt.Errorf("cpu %s column %d: %w", cpu, d.col, err)
			}
			ch <- prometheus.MustNewConstMetric(d.desc, d.typ, float64(v), cpu)
		}
		return nil
	})
}

// softirqs exports /proc/softirqs per kind and CPU; NET_RX and NET_TX per
// CPU show whether the queues' work stays on the queues' CPUs.
type softirqs struct{ file string }

var softirqsDesc = prometheus.NewDesc(Namespace+"_softirqs_total",
	"Softirqs run per CPU and kind (/proc/softirqs).", []string{"cpu", "type"}, nil)

func (c *softirqs) collect(ch chan<- prometheus.Metric) error {
	var cpus []string
	return lines(c.file, func(line string) error {
		f := strings.Fields(line)
		if len(f) == 0 {
			return nil
		}
		if cpus == nil {
			for _, h := range f {
				cpus = append(cpus, strings.TrimPrefix(h, "CPU"))
			}
			return nil
		}
		kind := strings.TrimSuffix(f[0], ":")
		for i, cpu := range cpus {
			if i+1 >= len(f) {
				break
			}
			v, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return fmt.Errorf("%s cpu %s: %w", kind, cpu, err)
			}
			ch <- prometheus.MustNewConstMetric(softirqsDesc, prometheus.CounterValue, float64(v), cpu, kind)
		}
		return nil
	})
}

// netstat exports every counter of /proc/net/snmp and /proc/net/netstat:
// each protocol is a pair of lines, names then values ("Tcp: RtoAlgorithm
// ..." / "Tcp: 1 ..."). The names are node_exporter's:
// hotpath_netstat_TcpExt_ListenOverflows. They are untyped, as there:
// most are counters, a few (Tcp CurrEstab, MaxConn) are not.
type netstat struct {
	files []string
	descs descs
}

func (c *netstat) collect(ch chan<- prometheus.Metric) error {
	for _, file := range c.files {
		var names []string
		var proto string
		err := lines(file, func(line string) error {
			p, rest, ok := strings.Cut(line, ":")
			if !ok {
				return nil
			}
			f := strings.Fields(rest)
			if names == nil || p != proto {
				proto, names = p, f
				return nil
			}
			if len(f) != len(names) {
				return fmt.Errorf("%s: %d values for %d names", p, len(f), len(names))
			}
			for i, v := range f {
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return fmt.Errorf("%s %s: %w", p, names[i], err)
				}
				name := Namespace + "_netstat_" + sanitize(p) + "_" + sanitize(names[i])
				ch <- prometheus.MustNewConstMetric(c.descs.get(name, "Statistic "+p+" "+names[i]+" of /proc/net/"+file[strings.LastIndexByte(file, '/')+1:]+"."),
					prometheus.UntypedValue, x)
			}
			names = nil
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// sockstat exports /proc/net/sockstat: "TCP: inuse 7 orphan 0 tw 0 alloc
// 10 mem 1" becomes hotpath_sockstat_TCP_inuse and so on; "mem" counts
// pages and is also exported in bytes (_mem_bytes), as node_exporter does.
type sockstat struct {
	file     string
	pageSize int
	descs    descs
}

func (c *sockstat) collect(ch chan<- prometheus.Metric) error {
	return lines(c.file, func(line string) error {
		p, rest, ok := strings.Cut(line, ":")
		if !ok {
			return nil
		}
		f := strings.Fields(rest)
		if len(f)%2 != 0 {
			return fmt.Errorf("%s: odd number of fields", p)
		}
		for i := 0; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i+1], 64)
			if err != nil {
				return fmt.Errorf("%s %s: %w", p, f[i], err)
			}
			name := Namespace + "_sockstat_" + sanitize(p) + "_" + sanitize(f[i])
			ch <- prometheus.MustNewConstMetric(c.descs.get(name, "Sockets: "+p+" "+f[i]+" (/proc/net/sockstat)."), prometheus.GaugeValue, v)
			if f[i] == "mem" {
				ch <- prometheus.MustNewConstMetric(c.descs.get(name+"_bytes", "Sockets: "+p+" memory in bytes (/proc/net/sockstat pages times the page size)."),
					prometheus.GaugeValue, v*float64(c.pageSize))
			}
		}
		return nil
	})
}

// cpuStat exports the per-CPU times of /proc/stat, in seconds per mode,
// and the context switch count.
type cpuStat struct{ file string }

var (
	cpuModes   = []string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"}
	cpuSeconds = prometheus.NewDesc(Namespace+"_cpu_seconds_total",
		"Seconds each CPU spent in each mode (/proc/stat).", []string{"cpu", "mode"}, nil)
	contextSwitches = prometheus.NewDesc(Namespace+"_context_switches_total",
		"Context switches (/proc/stat ctxt).", nil, nil)
)

func (c *cpuStat) collect(ch chan<- prometheus.Metric) error {
	return lines(c.file, func(line string) error {
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil
		}
		if f[0] == "ctxt" {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return fmt.Errorf("ctxt: %w", err)
			}
			ch <- prometheus.MustNewConstMetric(contextSwitches, prometheus.CounterValue, v)
			return nil
		}
		cpu, ok := strings.CutPrefix(f[0], "cpu")
		if !ok || cpu == "" {
			return nil // the "cpu" total line: the sum of the others
		}
		for i, mode := range cpuModes {
			if i+1 >= len(f) {
				break
			}
			v, err := strconv.ParseFloat(f[i+1], 64)
			if err != nil {
				return fmt.Errorf("cpu%s %s: %w", cpu, mode, err)
			}
			ch <- prometheus.MustNewConstMetric(cpuSeconds, prometheus.CounterValue, v/userHZ, cpu, mode)
		}
		return nil
	})
}

// meminfo exports /proc/meminfo: "MemFree: 123 kB" becomes
// hotpath_memory_MemFree_bytes; fields without a unit (HugePages_Total)
// keep their name without _bytes.
type meminfo struct {
	file  string
	descs descs
}

func (c *meminfo) collect(ch chan<- prometheus.Metric) error {
	return lines(c.file, func(line string) error {
		k, rest, ok := strings.Cut(line, ":")
		if !ok {
			return nil
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		name := Namespace + "_memory_" + sanitize(k)
		if len(f) > 1 && f[1] == "kB" {
			v *= 1024
			name += "_bytes"
		}
		ch <- prometheus.MustNewConstMetric(c.descs.get(name, "Memory information field "+k+" (/proc/meminfo)."), prometheus.GaugeValue, v)
		return nil
	})
}

// self exports the reading process's own CPU time and resident memory
// from /proc/self/stat: in the init, what the init (management endpoint
// and scrapes included) costs the machine. Its CPU time over a number of
// scrapes, with nothing else going on in the init, is the CPU time of one
// scrape.
type self struct {
	file     string
	pageSize int
}

var (
	selfCPU = prometheus.NewDesc(Namespace+"_init_cpu_seconds_total",
		"CPU time of the init process (/proc/self/stat utime, stime).", []string{"mode"}, nil)
	selfRSS = prometheus.NewDesc(Namespace+"_init_resident_memory_bytes",
		"Resident memory of the init process (/proc/self/stat rss).", nil, nil)
)

func (c *self) collect(ch chan<- prometheus.Metric) error {
	b, err := os.ReadFile(c.file)
	if err != nil {
		return err
	}
	// The command name is in parentheses and may hold anything; the
	// fields that follow start at field 3 (state).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return fmt.Errorf("%s: no command name", c.file)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 22 {
		return fmt.Errorf("%s: %d fields", c.file, len(f)+2)
	}
	var v [3]float64
	for j, k := range []int{11, 12, 21} { // utime (14), stime (15), rss (24)
		if v[j], err = strconv.ParseFloat(f[k], 64); err != nil {
			return fmt.Errorf("%s field %d: %w", c.file, k+3, err)
		}
	}
	ch <- prometheus.MustNewConstMetric(selfCPU, prometheus.CounterValue, v[0]/userHZ, "user")
	ch <- prometheus.MustNewConstMetric(selfCPU, prometheus.CounterValue, v[1]/userHZ, "system")
	ch <- prometheus.MustNewConstMetric(selfRSS, prometheus.GaugeValue, v[2]*float64(c.pageSize))
	return nil
}

// netdev exports the kernel's own counters of the NIC
// (/sys/class/net/DEV/statistics: rx_packets, rx_dropped,
// rx_missed_errors, tx_errors, ...), the same for every driver, as
// hotpath_netdev_<name>_total{device}.
type netdev struct {
	dir, device string
	descs       descs
}

func (c *netdev) collect(ch chan<- prometheus.Metric) error {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(c.dir, e.Name()))
		if err != nil {
			continue // some counters are not readable on some drivers (EOPNOTSUPP)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", c.dir, e.Name(), err)
		}
		name := Namespace + "_netdev_" + sanitize(e.Name()) + "_total"
		ch <- prometheus.MustNewConstMetric(c.descs.get(name, "Interface counter "+e.Name()+" (/sys/class/net/DEV/statistics).", "device"),
			prometheus.CounterValue, v, c.device)
	}
	return nil
}
