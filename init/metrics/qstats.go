package metrics

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// The netdev generic netlink family's per-queue statistics
// (include/uapi/linux/netdev.h, Documentation/netlink/specs/netdev.yaml):
// golang.org/x/sys/unix does not define them.
const (
	netdevFamily        = "netdev"
	netdevFamilyVersion = 1
	netdevCmdQstatsGet  = 12 // NETDEV_CMD_QSTATS_GET, Linux 6.9+

	qstatsIfindex   = 1 // NETDEV_A_QSTATS_IFINDEX, u32
	qstatsQueueType = 2 // NETDEV_A_QSTATS_QUEUE_TYPE, u32: 0 rx, 1 tx
	qstatsQueueID   = 3 // NETDEV_A_QSTATS_QUEUE_ID, u32
	qstatsScope     = 4 // NETDEV_A_QSTATS_SCOPE, uint
	qstatsFirstStat = 8 // NETDEV_A_QSTATS_RX_PACKETS, the first counter

	qstatsScopeQueue = 1 // NETDEV_QSTATS_SCOPE_QUEUE
)

// qstatsNames are the counters of the qstats attribute set from
// NETDEV_A_QSTATS_RX_PACKETS on, in attribute order, as the netdev spec
// names them (dashes as underscores). An attribute past the end (a newer
// kernel) is skipped.
var qstatsNames = [...]string{
	"rx_packets", "rx_bytes", "tx_packets", "tx_bytes",
	"rx_alloc_fail", "rx_hw_drops", "rx_hw_drop_overruns",
	"rx_csum_complete", "rx_csum_unnecessary", "rx_csum_none", "rx_csum_bad",
	"rx_hw_gro_packets", "rx_hw_gro_bytes", "rx_hw_gro_wire_packets", "rx_hw_gro_wire_bytes",
	"rx_hw_drop_ratelimits",
	"tx_hw_drops", "tx_hw_drop_errors", "tx_csum_none", "tx_needs_csum",
	"tx_hw_gso_packets", "tx_hw_gso_bytes", "tx_hw_gso_wire_packets", "tx_hw_gso_wire_bytes",
	"tx_hw_drop_ratelimits", "tx_stop", "tx_wake",
}

// qstatsDescs holds one descriptor per entry of qstatsNames, built once:
// the set is fixed, unlike the ethtool names.
var qstatsDescs = func() (d [len(qstatsNames)]*prometheus.Desc) {
	for i, n := range qstatsNames {
		d[i] = prometheus.NewDesc(Namespace+"_queue_"+n,
			"Per-queue statistic "+n+" the driver reports over netlink (netdev family, QSTATS_GET), since the queue was last reconfigured.",
			[]string{"device", "queue"}, nil)
	}
	return d
}()

// DialGenetlink opens a generic netlink socket; it is Options.QueueStats
// on a real system.
func DialGenetlink() (*genetlink.Conn, error) { return genetlink.Dial(nil) }

// queueStats exports the driver's per-queue counters as
// hotpath_queue_<stat>{device, queue}: rx_packets, rx_bytes, tx_packets,
// tx_bytes and whatever else the driver fills in. Linux 6.10 on, virtio-net
// reports its queues' packets and bytes only this way (virtnet_stat_ops),
// no longer in ethtool -S.
//
// The netlink socket and the family id are looked up on the first scrape
// and kept; so is the kernel's refusal: a kernel without the netdev family
// (before 6.3), without QSTATS_GET (before 6.9) or a driver without
// netdev_stat_ops answers the same on every scrape, so the collector
// reports "no data" from then on without asking again. mdlayher/genetlink
// is used rather than vishvananda/netlink's nl package because the latter
// knows no netdev family and its generic netlink helpers are internal to
// its own families; genetlink resolves families by name and dumps
// multi-part replies for us, on mdlayher/netlink, which the module already
// holds.
type queueStats struct {
	device string
	dial   func() (*genetlink.Conn, error)
	// ifindex resolves device; nil uses net.InterfaceByName.
	ifindex func(device string) (int, error)

	mu     sync.Mutex // a scrape at a time; guards the fields below
	conn   *genetlink.Conn
	family uint16 // 0: not looked up yet
	index  int    // 0: not resolved yet
	noData error  // the kernel's lasting refusal, reported on every scrape
}

func (c *queueStats) collect(ch chan<- prometheus.Metric) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.noData != nil {
		return c.noData
	}
	if err := c.open(); err != nil {
		return err
	}
	msgs, err := c.dump()
	if err != nil {
		return err
	}
	if len(msgs) == 0 {
		return fmt.Errorf("queue stats %s: %w", c.device, errNoData)
	}
	for _, m := range msgs {
		if err := c.export(ch, m.Data); err != nil {
			return fmt.Errorf("queue stats %s: %w", c.device, err)
		}
	}
	return nil
}

// open dials the socket, resolves the family and the device's ifindex,
// each once.
func (c *queueStats) open() error {
	if c.conn == nil {
		conn, err := c.dial()
		if err != nil {
			return fmt.Errorf("queue stats: dial generic netlink: %w", err)
		}
		c.conn, c.family = conn, 0
	}
	if c.family == 0 {
		f, err := c.conn.GetFamily(netdevFamily)
		if errors.Is(err, os.ErrNotExist) {
			c.noData = fmt.Errorf("queue stats: no %s netlink family (Linux 6.3+): %w", netdevFamily, errNoData)
			return c.noData
		}
		if err != nil {
			c.reset()
			return fmt.Errorf("queue stats: netlink family %s: %w", netdevFamily, err)
		}
		c.family = f.ID
	}
	if c.index == 0 {
		resolve := c.ifindex
		if resolve == nil {
			resolve = interfaceIndex
		}
		i, err := resolve(c.device)
		if err != nil {
			return fmt.Errorf("queue stats: %w", err)
		}
		c.index = i
	}
	return nil
}

func interfaceIndex(device string) (int, error) {
	ifi, err := net.InterfaceByName(device)
	if err != nil {
		return 0, err
	}
	return ifi.Index, nil
}

// reset drops the socket after an error that may have left it out of step
// (a half-read dump); the next scrape dials again.
func (c *queueStats) reset() {
	if c.conn != nil {
		c.conn.Close()
	}
	c.conn, c.family = nil, 0
}

// dump asks QSTATS_GET for every queue of the device.
func (c *queueStats) dump() ([]genetlink.Message, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(qstatsIfindex, uint32(c.index))
	ae.Uint32(qstatsScope, qstatsScopeQueue)
	b, err := ae.Encode()
	if err != nil {
		return nil, fmt.Errorf("queue stats: encode request: %w", err)
	}
	req := genetlink.Message{
		Header: genetlink.Header{Command: netdevCmdQstatsGet, Version: netdevFamilyVersion},
		Data:   b,
	}
	msgs, err := c.conn.Execute(req, c.family, netlink.Request|netlink.Dump)
	switch {
	case err == nil:
		return msgs, nil
	case errors.Is(err, unix.EOPNOTSUPP):
		// No QSTATS_GET in this kernel (6.3 to 6.8), or no
		// netdev_stat_ops in the driver: neither changes while it runs.
		c.noData = fmt.Errorf("queue stats %s: kernel or driver has none (%v): %w", c.device, err, errNoData)
		return nil, c.noData
	case errors.Is(err, unix.ENODEV):
		err = fmt.Errorf("queue stats %s (ifindex %d): %w", c.device, c.index, err)
		c.index = 0 // the device went; resolve its name again next time
		return nil, err
	default:
		var op *netlink.OpError
		if !errors.As(err, &op) {
			c.reset() // not the kernel's answer: the socket itself failed
		}
		return nil, fmt.Errorf("queue stats %s: %w", c.device, err)
	}
}

// export sends the counters of one queue's reply.
func (c *queueStats) export(ch chan<- prometheus.Metric, data []byte) error {
	ad, err := netlink.NewAttributeDecoder(data)
	if err != nil {
		return err
	}
	type stat struct {
		i int
		v uint64
	}
	var (
		stats   [len(qstatsNames)]stat
		n       int
		queue   = -1
		qtype   = -1
		ifindex = -1
	)
	for ad.Next() {
		t := int(ad.Type())
		switch {
		case t == qstatsIfindex:
			ifindex = int(ad.Uint32())
		case t == qstatsQueueType:
			qtype = int(ad.Uint32())
		case t == qstatsQueueID:
			queue = int(ad.Uint32())
		case t >= qstatsFirstStat && t < qstatsFirstStat+len(qstatsNames):
			v, err := uintAttr(ad.Bytes())
			if err != nil {
				return fmt.Errorf("attribute %d: %w", t, err)
			}
			stats[n] = stat{t - qstatsFirstStat, v}
			n++
		}
	}
	if err := ad.Err(); err != nil {
		return err
	}
	if queue < 0 || qtype < 0 {
		return fmt.Errorf("reply without queue type or id")
	}
	if ifindex != c.index {
		return fmt.Errorf("reply for ifindex %d, asked %d", ifindex, c.index)
	}
	q := strconv.Itoa(queue)
	for _, s := range stats[:n] {
		ch <- prometheus.MustNewConstMetric(qstatsDescs[s.i], prometheus.CounterValue, float64(s.v), c.device, q)
	}
	return nil
}

// uintAttr reads a netlink "uint" (NLA_UINT): the kernel writes 4 bytes
// when the value fits, else 8 (nla_put_uint).
func uintAttr(b []byte) (uint64, error) {
	switch len(b) {
	case 4:
		return uint64(binary.NativeEndian.Uint32(b)), nil
	case 8:
		return binary.NativeEndian.Uint64(b), nil
	}
	return 0, fmt.Errorf("uint of %d bytes", len(b))
}
