package e2e

import (
	"strings"
	"testing"
)

func TestParseTxDrops(t *testing.T) {
	const body = `# TYPE hotpath_netdev_tx_dropped_total counter
hotpath_netdev_tx_dropped_total{device="eth0"} 17
# TYPE hotpath_qdisc_drops_total counter
hotpath_qdisc_drops_total{device="eth0",handle="0:0",kind="mq",parent="root"} 4
hotpath_qdisc_drops_total{device="eth0",handle="0:0",kind="pfifo_fast",parent=":1"} 4
`
	d, err := ParseTxDrops(strings.NewReader(body), "eth0")
	if err != nil || d.TxDropped != 17 || d.QdiscDrops != 4 || d.Qdisc != "mq" {
		t.Fatalf("%+v, %v", d, err)
	}
	if errs := CheckNoTxDrops(d, ""); len(errs) != 2 {
		t.Errorf("17 tx drops and 4 qdisc drops: %v", errs)
	}
	if _, err := ParseTxDrops(strings.NewReader(body), "eth1"); err == nil {
		t.Error("no error for a device without tx_dropped")
	}
	if _, err := ParseTxDrops(strings.NewReader(body[:strings.Index(body, "# TYPE hotpath_qdisc")]), "eth0"); err == nil {
		t.Error("no error without the qdisc's drops")
	}
}

func TestCheckNoTxDrops(t *testing.T) {
	clean := TxDrops{Qdisc: "mq"}
	if errs := CheckNoTxDrops(clean, "[   12.5] virtio_net virtio1 eth0: up\n"); len(errs) != 0 {
		t.Errorf("clean: %v", errs)
	}
	console := "[   40.1] net_ratelimit: 3 callbacks suppressed\n[   40.1] Virtual device eth0 asks to queue packet!\n"
	if errs := CheckNoTxDrops(clean, console); len(errs) != 1 {
		t.Errorf("a drop line: %v", errs)
	}
}
