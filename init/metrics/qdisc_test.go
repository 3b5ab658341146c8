package metrics

import (
	"errors"
	"testing"
)

// TestQdiscs: every qdisc of the NIC is a series of its own, labelled by
// kind, handle and parent: an mq root with pfifo_fast children as 6.12
// makes them for two queues, one child with drops, requeues and a
// backlog; a failing list costs the collector, not the scrape.
func TestQdiscs(t *testing.T) {
	list := func(dev string) ([]QdiscStat, error) {
		if dev != "eth0" {
			return nil, errors.New("no such device")
		}
		return []QdiscStat{
			{Kind: "mq", Handle: "0:0", Parent: "root", Drops: 7, Requeues: 3},
			{Kind: "pfifo_fast", Handle: "0:0", Parent: ":1"},
			{Kind: "pfifo_fast", Handle: "0:0", Parent: ":2", Drops: 7, Requeues: 3, Backlog: 12},
		}, nil
	}
	fams := scrape(t, NewRegistry(Options{SysRoot: "testdata/ena-sys", Device: "eth0", Qdiscs: list}))
	for _, c := range []struct {
		name, kind, parent string
		want               float64
	}{
		{"hotpath_qdisc_drops_total", "mq", "root", 7},
		{"hotpath_qdisc_drops_total", "pfifo_fast", ":1", 0},
		{"hotpath_qdisc_drops_total", "pfifo_fast", ":2", 7},
		{"hotpath_qdisc_requeues_total", "pfifo_fast", ":2", 3},
		{"hotpath_qdisc_backlog_packets", "pfifo_fast", ":2", 12},
	} {
		if got := value(t, fams, c.name, "device", "eth0", "kind", c.kind, "parent", c.parent); got != c.want {
			t.Errorf("%s{kind=%s,parent=%s} = %v, want %v", c.name, c.kind, c.parent, got, c.want)
		}
	}
	fams = scrape(t, NewRegistry(Options{SysRoot: "testdata/ena-sys", Device: "eth1", Qdiscs: list}))
	if _, ok := fams["hotpath_qdisc_drops_total"]; ok {
		t.Error("qdisc series from a failing list")
	}
	if v := value(t, fams, "hotpath_scrape_collector_success", "collector", "qdisc"); v != 0 {
		t.Errorf("collector success %v after a failing list", v)
	}
}
