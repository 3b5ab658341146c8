package e2e

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/inspector"
	"github.com/hotpath-dev/hotpath/tests/vm"
	"github.com/insomniacslk/dhcp/dhcpv4"
)

var testExp = Expectation{
	CPUs: 2, Queues: 2, Addr: "10.77.0.2/24", Gateway: "10.77.0.1", MTU: 1500,
	Kernel: "6.1.0", Cmdline: "console=ttyS0 mitigations=off",
}

// goodSnapshot is what the inspector reads in the guest goodReport
// describes.
func goodSnapshot() *inspector.Snapshot {
	q := "/sys/class/net/eth0/queues/"
	return &inspector.Snapshot{
		Release: "6.1.0-hotpath",
		Files: map[string]string{
			"/proc/cmdline": "console=ttyS0 mitigations=off\n",
			"/proc/interrupts": "            CPU0       CPU1\n" +
				"  4:        812          0   IO-APIC   4-edge      ttyS0\n" +
				" 23:          0          0   PCI-MSIX-0000:00:02.0   0-edge      virtio0-config\n" +
				" 24:         10          0   PCI-MSIX-0000:00:02.0   1-edge      virtio0-input.0\n" +
				" 25:         11          0   PCI-MSIX-0000:00:02.0   2-edge      virtio0-output.0\n" +
				" 26:          0         12   PCI-MSIX-0000:00:02.0   3-edge      virtio0-input.1\n" +
				" 27:          0         13   PCI-MSIX-0000:00:02.0   4-edge      virtio0-output.1\n" +
				" 29:          0          0   PCI-MSIX-0000:00:03.0   0-edge      virtio1-req.0\n" +
				"NMI:          0          0   Non-maskable interrupts\n",
			"/proc/irq/23/smp_affinity_list": "0-1\n",
			"/proc/irq/24/smp_affinity_list": "0\n", "/proc/irq/25/smp_affinity_list": "0\n",
			"/proc/irq/26/smp_affinity_list": "1\n", "/proc/irq/27/smp_affinity_list": "1\n",
			"/proc/net/packet":                           "sk       RefCnt Type Proto  Iface R Rmem   User   Inode\n",
			"/proc/self/status":                          "Name:\tinspector\nNoNewPrivs:\t0\n",
			"/proc/sys/net/core/busy_poll":               "50\n",
			"/proc/sys/net/core/busy_read":               "50\n",
			"/proc/sys/net/core/default_qdisc":           "pfifo_fast\n",
			"/proc/sys/net/ipv4/tcp_congestion_control":  "reno\n",
			"/proc/sys/net/core/somaxconn":               "4096\n",
			inspector.VulnerabilitiesDir + "/meltdown":   "Not affected\n",
			inspector.VulnerabilitiesDir + "/spectre_v2": "Vulnerable, IBPB: disabled, STIBP: disabled\n",
			q + "tx-0/xps_cpus":                          "1\n", q + "tx-1/xps_cpus": "00000002\n",
			q + "rx-0/rps_cpus": "0\n", q + "rx-1/rps_cpus": "00000000\n",
		},
		Exists: map[string]bool{"/proc/net/netfilter": false, "/proc/self/loginuid": false, "/proc/modules": false},
		Errors: map[string]string{},
		Links: []inspector.Link{
			{Index: 1, Name: "lo", MTU: 65536, Up: true},
			{Index: 2, Name: "eth0", MTU: 1500, Up: true, Driver: "virtio_net", NumRx: 2, NumTx: 2,
				Channels: &inspector.Channels{MaxCombined: 2, Combined: 2},
				Features: map[string]bool{"rx-gro": false, "tx-tcp-segmentation": true}},
		},
		Qdiscs: []inspector.Qdisc{
			{Link: "lo", Kind: "noqueue", Handle: "0:0", Parent: "root"},
			{Link: "eth0", Kind: "mq", Handle: "8001:0", Parent: "root"},
			{Link: "eth0", Kind: "pfifo_fast", Handle: "0:0", Parent: "8001:2"},
			{Link: "eth0", Kind: "pfifo_fast", Handle: "0:0", Parent: "8001:1"},
		},
		Addrs: []inspector.Addr{
			{Link: "lo", CIDR: "127.0.0.1/8", ValidLft: 0xffffffff},
			{Link: "eth0", CIDR: "10.77.0.2/24", ValidLft: 0xffffffff, PreferLft: 0xffffffff},
		},
		Routes: []inspector.Route{
			{Link: "eth0", Dst: "default", Gateway: "10.77.0.1"},
			{Link: "eth0", Dst: "10.77.0.0/24"},
		},
		Process: inspector.Process{PID: 2, Affinity: []int{0, 1}, Env: []string{"HOTPATH_CPUS=0-1", "HOTPATH_PORT=8080"}},
	}
}

func goodConns() []inspector.Conn {
	return []inspector.Conn{{Remote: "10.77.0.1:40000", IncomingCPU: 0, CPU: 1}, {Remote: "10.77.0.1:40001", IncomingCPU: 1, CPU: 1}}
}

func TestCompareInspectionGood(t *testing.T) {
	for _, err := range CompareInspection(testExp, goodReport(), goodSnapshot(), goodConns()) {
		t.Error(err)
	}
}

func msgs(errs []error) string {
	var s []string
	for _, e := range errs {
		s = append(s, e.Error())
	}
	return strings.Join(s, "\n")
}

// TestCompareInspectionReportLies: the guest's real state is broken (the
// inspector reads it) while the report still claims the tuning. Both the
// expectation check on the inspector's reading and the report comparison
// must name it.
func TestCompareInspectionReportLies(t *testing.T) {
	q := "/sys/class/net/eth0/queues/"
	for _, tc := range []struct {
		name   string
		break_ func(s *inspector.Snapshot)
		want   []string
	}{
		{"gro on", func(s *inspector.Snapshot) { s.Links[1].Features["rx-gro"] = true },
			[]string{`inspector: GRO "on", want off`, "the boot report lies: GRO: the report says off, the inspector reads on"}},
		{"xps", func(s *inspector.Snapshot) { s.Files[q+"tx-1/xps_cpus"] = "3\n" },
			[]string{`inspector: XPS tx-1 = "3", want CPU 1 only`, "the boot report lies: XPS:"}},
		{"rps on", func(s *inspector.Snapshot) { s.Files[q+"rx-0/rps_cpus"] = "3\n" },
			[]string{`inspector: RPS rx-0 = "3"`, "the boot report lies: RPS:"}},
		{"irq affinity", func(s *inspector.Snapshot) { s.Files["/proc/irq/26/smp_affinity_list"] = "0-1\n" },
			[]string{`inspector: IRQ 26 (virtio0-input.1, queue 1) affinity "0-1", want CPU 1`, "the boot report lies: queue IRQs"}},
		{"busy poll off", func(s *inspector.Snapshot) { s.Files["/proc/sys/net/core/busy_poll"] = "0\n" },
			[]string{`inspector: sysctl net.core.busy_poll = "0", want a positive number`, `the boot report lies: sysctl net.core.busy_poll: the report says "50", the inspector reads "0"`}},
		{"busy poll missing", func(s *inspector.Snapshot) { delete(s.Files, "/proc/sys/net/core/busy_poll") },
			[]string{"inspector: sysctl net.core.busy_poll not reported", "the boot report lies: sysctl net.core.busy_poll"}},
		{"cubic", func(s *inspector.Snapshot) { s.Files["/proc/sys/net/ipv4/tcp_congestion_control"] = "cubic\n" },
			[]string{"inspector: sysctl net.ipv4.tcp_congestion_control", "the boot report lies: sysctl net.ipv4.tcp_congestion_control"}},
		{"child qdisc", func(s *inspector.Snapshot) { s.Qdiscs[3].Kind = "noqueue" },
			[]string{`inspector: child qdisc 0 is "noqueue"`, "the boot report lies: child qdiscs"}},
		{"root qdisc", func(s *inspector.Snapshot) { s.Qdiscs[1].Kind = "fq_codel"; s.Qdiscs = s.Qdiscs[:2] },
			[]string{`inspector: root qdisc "fq_codel"`, "the boot report lies: root qdisc"}},
		{"packet socket", func(s *inspector.Snapshot) {
			s.Files["/proc/net/packet"] += "ffff8880 3 3 0003 2 1 0 0 1234\n"
		}, []string{"inspector: 1 AF_PACKET sockets", "the boot report lies: AF_PACKET sockets: the report says 0, the inspector reads 1"}},
		{"lifetime", func(s *inspector.Snapshot) { s.Addrs[1].ValidLft = 3500 },
			[]string{`inspector: address lifetime "3500"`, "the boot report lies: address lifetime"}},
		{"gateway", func(s *inspector.Snapshot) { s.Routes = s.Routes[1:] },
			[]string{`inspector: gateway "", want "10.77.0.1"`, "the boot report lies: gateway"}},
		{"mitigations=auto", func(s *inspector.Snapshot) {
			s.Files["/proc/cmdline"] = "console=ttyS0 mitigations=off mitigations=auto\n"
		},
			[]string{"inspector: kernel command line", "mitigations=auto overrides mitigations=off", "the boot report lies: command line"}},
		{"mitigation active", func(s *inspector.Snapshot) {
			s.Files[inspector.VulnerabilitiesDir+"/spectre_v2"] = "Mitigation: Retpolines\n"
		}, []string{"inspector: vulnerabilities/spectre_v2", "the boot report lies: vulnerabilities"}},
		{"netfilter", func(s *inspector.Snapshot) { s.Exists["/proc/net/netfilter"] = true },
			[]string{"inspector: netfilter present", "the boot report lies: netfilter: the report says false, the inspector reads true"}},
		{"seccomp", func(s *inspector.Snapshot) { s.Files["/proc/self/status"] += "Seccomp:\t0\n" },
			[]string{"inspector: seccomp present", "the boot report lies: seccomp"}},
		{"one queue", func(s *inspector.Snapshot) {
			delete(s.Files, q+"rx-1/rps_cpus")
			delete(s.Files, q+"tx-1/xps_cpus")
		}, []string{"inspector: NIC eth0 has 1 rx / 1 tx queues, want 2", "the boot report lies: rx queues"}},
		{"kernel", func(s *inspector.Snapshot) { s.Release = "6.1.0-other" },
			[]string{`the boot report lies: kernel "6.1.0-hotpath", the inspector reads "6.1.0-other"`}},
		{"workload pid", func(s *inspector.Snapshot) { s.Process.PID = 7 },
			[]string{"the boot report lies: workload pid 2, the inspector is pid 7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := goodSnapshot()
			tc.break_(s)
			got := msgs(CompareInspection(testExp, goodReport(), s, goodConns()))
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("errors do not mention %q:\n%s", w, got)
				}
			}
		})
	}
}

// TestCompareInspectionDisagrees: the report agrees with the inspector,
// and both contradict what the test set up; only the expectation catches
// it, and the report is not called a liar.
func TestCompareInspectionDisagrees(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(e *Expectation, r *report.Report, s *inspector.Snapshot, c []inspector.Conn)
		want   string
	}{
		{"mtu", func(e *Expectation, r *report.Report, s *inspector.Snapshot, c []inspector.Conn) {
			s.Links[1].MTU, r.Facts.NIC.MTU = 9000, 9000
		}, "inspector: MTU 9000, want 1500 from the lease"},
		{"other address", func(e *Expectation, r *report.Report, s *inspector.Snapshot, c []inspector.Conn) {
			e.Addr = "10.77.0.3/24"
		}, "inspector: no interface holds the leased address 10.77.0.3/24"},
		{"kernel version", func(e *Expectation, r *report.Report, s *inspector.Snapshot, c []inspector.Conn) {
			e.Kernel = "6.1.192"
		}, `inspector: kernel release "6.1.0-hotpath", the manifest built 6.1.192`},
		{"cmdline", func(e *Expectation, r *report.Report, s *inspector.Snapshot, c []inspector.Conn) {
			e.Cmdline += " panic=10"
		}, `inspector: /proc/cmdline "console=ttyS0 mitigations=off", the manifest built in "console=ttyS0 mitigations=off panic=10"`},
		{"channels", func(e *Expectation, r *report.Report, s *inspector.Snapshot, c []inspector.Conn) {
			s.Links[1].Channels.Combined = 1
		}, "inspector: ethtool channels of eth0: 1 combined of 2, want 2 of 2"},
		{"queues", func(e *Expectation, r *report.Report, s *inspector.Snapshot, c []inspector.Conn) {
			e.Queues = 4
		}, "inspector: NIC eth0 has 2 rx / 2 tx queues, want 4 each"},
		{"affinity", func(e *Expectation, r *report.Report, s *inspector.Snapshot, c []inspector.Conn) {
			s.Process.Affinity = []int{0}
		}, "inspector: the workload may run on CPUs [0], want [0 1]"},
		{"connection cpu", func(e *Expectation, r *report.Report, s *inspector.Snapshot, c []inspector.Conn) {
			c[1].IncomingCPU = 5
		}, "inspector: connection 10.77.0.1:40001 arrived on CPU 5, the guest has 2"},
		{"moderation not applied", func(e *Expectation, r *report.Report, s *inspector.Snapshot, c []inspector.Conn) {
			e.Config = map[string]string{"nic.coalesce": "adaptive", "nic.rx_usecs": "20", "nic.tx_usecs": "64"}
			r.Steps[6].Status, r.Steps[6].Reason = report.Applied, ""
			s.Links[1].Coalesce = map[string]int64{"adaptive_rx": 0, "rx_usecs": 0, "tx_usecs": 0}
			r.Facts.NIC.Coalesce = map[string]string{"adaptive_rx": "0", "rx_usecs": "0", "tx_usecs": "0"}
		}, "inspector: interrupt moderation {adaptive_rx=\"0\", rx_usecs=\"0\", tx_usecs=\"0\"}: nic-coalesce applied, but neither adaptive RX nor rx/tx usecs 20/64"},
		{"coalesce", func(e *Expectation, r *report.Report, s *inspector.Snapshot, c []inspector.Conn) {
			s.Links[1].Coalesce = map[string]int64{"adaptive_rx": 0}
			r.Facts.NIC.Coalesce = map[string]string{"adaptive_rx": "1"}
		}, `the boot report lies: interrupt moderation: the report says {adaptive_rx="1"}, the inspector reads {adaptive_rx="0"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, r, s, c := testExp, goodReport(), goodSnapshot(), goodConns()
			tc.break_(&e, r, s, c)
			got := msgs(CompareInspection(e, r, s, c))
			if !strings.Contains(got, tc.want) {
				t.Errorf("errors do not mention %q:\n%s", tc.want, got)
			}
			if tc.name != "coalesce" && strings.Contains(got, "lies") {
				t.Errorf("a report that agrees with the inspector called a liar:\n%s", got)
			}
		})
	}
}

func TestCheckLeaseLog(t *testing.T) {
	mac, _ := net.ParseMAC(vm.GuestMAC)
	other, _ := net.ParseMAC("52:54:00:00:00:01")
	ip := net.ParseIP("10.77.0.2").To4()
	now := time.Now()
	discover := vm.Message{Type: dhcpv4.MessageTypeDiscover, MAC: mac, ClientIP: net.IPv4zero, At: now}
	request := vm.Message{Type: dhcpv4.MessageTypeRequest, MAC: mac, ClientIP: net.IPv4zero, Requested: ip, At: now}
	lease := vm.Lease{MAC: mac, IP: ip, At: now}
	for _, tc := range []struct {
		name   string
		log    []vm.Message
		leases []vm.Lease
		want   string
	}{
		{"good", []vm.Message{discover, request}, []vm.Lease{lease}, ""},
		{"renewal", []vm.Message{discover, request, {Type: dhcpv4.MessageTypeRequest, MAC: mac, ClientIP: ip, At: now}},
			[]vm.Lease{lease, lease}, "a renewal"},
		{"second exchange", []vm.Message{discover, request, discover, request}, []vm.Lease{lease, lease}, "want one DISCOVER then one REQUEST"},
		{"no request", []vm.Message{discover}, nil, "0 leases acknowledged"},
		{"other client", []vm.Message{discover, {Type: dhcpv4.MessageTypeRequest, MAC: other, Requested: ip}}, []vm.Lease{lease}, "from 52:54:00:00:00:01"},
		{"other address", []vm.Message{discover, {Type: dhcpv4.MessageTypeRequest, MAC: mac, Requested: net.ParseIP("10.77.0.9")}},
			[]vm.Lease{lease}, "REQUEST for 10.77.0.9, the guest serves on 10.77.0.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := msgs(CheckLeaseLog(tc.log, tc.leases, nil, vm.GuestMAC, "10.77.0.2"))
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("errors %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCheckModeration: the moderation read back must be what the step
// claims to have applied; a skipped step is not judged here.
func TestCheckModeration(t *testing.T) {
	cfg := map[string]string{"nic.coalesce": "adaptive", "nic.rx_usecs": "20", "nic.tx_usecs": "64"}
	applied := goodReport()
	applied.Steps[6].Status = report.Applied
	for _, tc := range []struct {
		name string
		rep  *report.Report
		mode string
		c    map[string]string
		bad  bool
	}{
		{"adaptive on", applied, "adaptive", map[string]string{"adaptive_rx": "1", "rx_usecs": "0", "tx_usecs": "0"}, false},
		{"adaptive fell back to static", applied, "adaptive", map[string]string{"adaptive_rx": "0", "rx_usecs": "20", "tx_usecs": "64"}, false},
		{"adaptive nothing", applied, "adaptive", map[string]string{"adaptive_rx": "0", "rx_usecs": "0", "tx_usecs": "64"}, true},
		{"static", applied, "static", map[string]string{"adaptive_rx": "0", "rx_usecs": "20", "tx_usecs": "64"}, false},
		{"static wrong", applied, "static", map[string]string{"adaptive_rx": "1", "rx_usecs": "8", "tx_usecs": "64"}, true},
		{"skipped", goodReport(), "adaptive", map[string]string{"adaptive_rx": "0"}, false},
	} {
		c := map[string]string{}
		for k, v := range cfg {
			c[k] = v
		}
		c["nic.coalesce"] = tc.mode
		if errs := checkModeration(c, tc.rep, tc.c); (len(errs) > 0) != tc.bad {
			t.Errorf("%s: %v, want bad=%v", tc.name, errs, tc.bad)
		}
	}
}
