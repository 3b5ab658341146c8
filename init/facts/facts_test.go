package facts

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hotpath-dev/hotpath/init/nic"
)

func TestRead(t *testing.T) {
	root := t.TempDir()
	sys, proc := filepath.Join(root, "sys"), filepath.Join(root, "proc")
	w := func(p, s string) {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w(sys+"/devices/system/cpu/vulnerabilities/spectre_v2", "Vulnerable\n")
	w(sys+"/devices/system/cpu/vulnerabilities/meltdown", "Not affected\n")
	w(proc+"/self/status", "Name:\tinit\nState:\tS\n")
	w(proc+"/cmdline", "console=ttyS0 mitigations=off\n")
	w(proc+"/sys/net/core/busy_poll", "50\n")
	w(proc+"/net/packet", "sk RefCnt Type Proto Iface R Rmem User Inode\n")
	w(proc+"/interrupts", "  CPU0 CPU1\n 25: 1 2 PCI-MSI 1-edge virtio0-input.0\n 26: 1 2 PCI-MSI 2-edge virtio0-output.0\n")
	w(proc+"/irq/25/smp_affinity_list", "0\n")
	w(proc+"/irq/26/smp_affinity_list", "0\n")
	w(sys+"/class/net/eth0/mtu", "1500\n")
	w(sys+"/class/net/eth0/queues/tx-0/xps_cpus", "1\n")
	w(sys+"/class/net/eth0/queues/rx-0/rps_cpus", "0\n")
	w(sys+"/class/net/eth0/statistics/tx_dropped", "42\n")
	f := Read(Options{SysRoot: sys, ProcRoot: proc, Sysctls: []string{"net.core.busy_poll", "net.ipv4.tcp_congestion_control"},
		Link:   &nic.Link{Name: "eth0", Driver: "virtio_net", Device: "virtio0"},
		Qdiscs: func(string) (string, []string, error) { return "mq", []string{"noqueue"}, nil },
		QdiscStats: func(string) ([]nic.QdiscStat, error) {
			return []nic.QdiscStat{{Kind: "mq", Parent: "root", Drops: 5}, {Kind: "pfifo_fast", Parent: ":1", Drops: 5}}, nil
		},
		Addrs: func(string) (AddrInfo, error) {
			return AddrInfo{Addrs: []string{"10.0.0.2/24"}, Lifetime: "forever", Gateway: "10.0.0.1"}, nil
		}}, t.Logf)
	if f.Vulnerabilities["spectre_v2"] != "Vulnerable" || f.Vulnerabilities["meltdown"] != "Not affected" {
		t.Errorf("vulnerabilities %v", f.Vulnerabilities)
	}
	if f.Netfilter || f.Audit || f.Modules || f.Seccomp {
		t.Errorf("policy facts %+v", f)
	}
	if f.Sysctls["net.core.busy_poll"] != "50" || f.Sysctls["net.ipv4.tcp_congestion_control"] == "" {
		t.Errorf("sysctls %v", f.Sysctls)
	}
	n := f.NIC
	if n == nil || n.MTU != 1500 || n.TxQueues != 1 || n.RxQueues != 1 || len(n.IRQs) != 2 || n.IRQs[1].Affinity != "0" ||
		n.XPS["tx-0"] != "1" || n.RPS["rx-0"] != "0" || n.Qdisc != "mq" || n.Lifetime != "forever" || n.Gateway != "10.0.0.1" ||
		n.TxDropped != 42 || n.QdiscDrops != 5 {
		t.Errorf("nic %+v", n)
	}
	// The same tree with the policy broken.
	w(proc+"/net/netfilter/nf_log", "")
	w(proc+"/self/loginuid", "0")
	w(proc+"/modules", "")
	w(proc+"/self/status", "Seccomp:\t0\n")
	f = Read(Options{SysRoot: sys, ProcRoot: proc}, t.Logf)
	if !f.Netfilter || !f.Audit || !f.Modules || !f.Seccomp || f.NIC != nil {
		t.Errorf("broken policy not seen: %+v", f)
	}
}
