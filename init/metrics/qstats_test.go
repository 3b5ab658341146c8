package metrics

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"
)

const testFamilyID = 0x1d

// attr is one netlink attribute of a canned reply; n is 4 or 8, the
// width the kernel's nla_put_uint picks.
type attr struct {
	typ uint16
	v   uint64
	n   int
}

func u32(typ uint16, v uint64) attr { return attr{typ, v, 4} }
func u64(typ uint16, v uint64) attr { return attr{typ, v, 8} }

func encode(t *testing.T, attrs ...attr) []byte {
	t.Helper()
	var as []netlink.Attribute
	for _, a := range attrs {
		b := make([]byte, a.n)
		switch a.n {
		case 4:
			binary.NativeEndian.PutUint32(b, uint32(a.v))
		case 8:
			binary.NativeEndian.PutUint64(b, a.v)
		}
		as = append(as, netlink.Attribute{Type: a.typ, Data: b})
	}
	b, err := netlink.MarshalAttributes(as)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// queueReply is the kernel's answer for one queue of ifindex 7.
func queueReply(t *testing.T, qtype, id uint64, stats ...attr) genetlink.Message {
	return genetlink.Message{
		Header: genetlink.Header{Command: netdevCmdQstatsGet, Version: netdevFamilyVersion},
		Data:   encode(t, append([]attr{u32(qstatsIfindex, 7), u32(qstatsQueueType, qtype), u32(qstatsQueueID, id)}, stats...)...),
	}
}

// errno is a kernel's refusal in a canned reply.
type errno unix.Errno

func (e errno) Error() string { return unix.Errno(e).Error() }

// dialKernel answers requests with fn's messages the way the kernel frames
// them, which genltest does not: a dump's replies carry NLM_F_MULTI and end
// with NLMSG_DONE, and a dump's error is the errno in that NLMSG_DONE
// (net/netlink/af_netlink.c netlink_dump); a request's error is an
// NLMSG_ERROR with the errno and the request's header.
func dialKernel(fn func(req genetlink.Message, nreq netlink.Message) ([]genetlink.Message, error)) *genetlink.Conn {
	return genetlink.NewConn(nltest.Dial(func(reqs []netlink.Message) ([]netlink.Message, error) {
		if len(reqs) != 1 {
			return nil, fmt.Errorf("%d requests in one send", len(reqs))
		}
		nreq := reqs[0]
		var req genetlink.Message
		if err := req.UnmarshalBinary(nreq.Data); err != nil {
			return nil, err
		}
		msgs, err := fn(req, nreq)
		var e errno
		if err != nil && !errors.As(err, &e) {
			return nil, err
		}
		dump := nreq.Header.Flags&netlink.Dump == netlink.Dump
		reply := func(typ netlink.HeaderType, flags netlink.HeaderFlags, data []byte) netlink.Message {
			return netlink.Message{Header: netlink.Header{Type: typ, Flags: flags, Sequence: nreq.Header.Sequence, PID: nreq.Header.PID}, Data: data}
		}
		code := make([]byte, 4)
		binary.NativeEndian.PutUint32(code, uint32(-int32(e)))
		if e != 0 && !dump {
			h, err := nreq.MarshalBinary()
			if err != nil {
				return nil, err
			}
			return []netlink.Message{reply(netlink.Error, 0, append(code, h...))}, nil
		}
		var out []netlink.Message
		for _, m := range msgs {
			b, err := m.MarshalBinary()
			if err != nil {
				return nil, err
			}
			flags := netlink.HeaderFlags(0)
			if dump {
				flags = netlink.Multi
			}
			out = append(out, reply(nreq.Header.Type, flags, b))
		}
		if dump {
			out = append(out, reply(netlink.Done, netlink.Multi, code))
		}
		return out, nil
	}))
}

// netdevFamilyReply is nlctrl's answer to GETFAMILY "netdev".
func netdevFamilyReply(t *testing.T) genetlink.Message {
	ae := netlink.NewAttributeEncoder()
	ae.Uint16(unix.CTRL_ATTR_FAMILY_ID, testFamilyID)
	ae.String(unix.CTRL_ATTR_FAMILY_NAME, netdevFamily)
	ae.Uint32(unix.CTRL_ATTR_VERSION, netdevFamilyVersion)
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return genetlink.Message{Header: genetlink.Header{Command: unix.CTRL_CMD_NEWFAMILY, Version: 2}, Data: b}
}

// The attribute numbers of include/uapi/linux/netdev.h the tests use.
const (
	aRxPackets = 8
	aRxBytes   = 9
	aTxPackets = 10
	aTxBytes   = 11
	aTxWake    = 34
)

// queueSeries flattens the hotpath_queue_ series to "name/queue" -> value.
func queueSeries(fams map[string]*dto.MetricFamily) map[string]float64 {
	got := map[string]float64{}
	for name, f := range fams {
		if !strings.HasPrefix(name, Namespace+"_queue_") {
			continue
		}
		for _, m := range f.Metric {
			l := map[string]string{}
			for _, p := range m.Label {
				l[p.GetName()] = p.GetValue()
			}
			got[name+"/"+l["device"]+"/"+l["queue"]] = m.GetCounter().GetValue()
		}
	}
	return got
}

// TestQueueStats serves the collector canned netdev replies and checks the
// series it exports, its success, and that the family and a refusal are
// asked once over three scrapes.
func TestQueueStats(t *testing.T) {
	tests := []struct {
		name     string
		family   bool // the kernel has the netdev family
		reply    func(t *testing.T) ([]genetlink.Message, error)
		want     map[string]float64
		ok       bool
		dumps    int // QSTATS_GET requests over three scrapes
		families int // GETFAMILY requests over three scrapes
	}{{
		name:   "rx and tx queues",
		family: true,
		reply: func(t *testing.T) ([]genetlink.Message, error) {
			return []genetlink.Message{
				queueReply(t, 0, 0, u32(aRxPackets, 10), u64(aRxBytes, 1<<33)),
				queueReply(t, 0, 1, u32(aRxPackets, 11), u32(aRxBytes, 1100)),
				queueReply(t, 1, 0, u32(aTxPackets, 20), u32(aTxBytes, 2000), u32(aTxWake, 3)),
				queueReply(t, 1, 1, u64(aTxPackets, 21), u32(aTxBytes, 2100)),
			}, nil
		},
		want: map[string]float64{
			"hotpath_queue_rx_packets/eth0/0": 10, "hotpath_queue_rx_bytes/eth0/0": 1 << 33,
			"hotpath_queue_rx_packets/eth0/1": 11, "hotpath_queue_rx_bytes/eth0/1": 1100,
			"hotpath_queue_tx_packets/eth0/0": 20, "hotpath_queue_tx_bytes/eth0/0": 2000, "hotpath_queue_tx_wake/eth0/0": 3,
			"hotpath_queue_tx_packets/eth0/1": 21, "hotpath_queue_tx_bytes/eth0/1": 2100,
		},
		ok: true, dumps: 3, families: 1,
	}, {
		name:   "missing attribute",
		family: true,
		reply: func(t *testing.T) ([]genetlink.Message, error) {
			return []genetlink.Message{queueReply(t, 0, 0, u32(aRxPackets, 5))}, nil
		},
		want: map[string]float64{"hotpath_queue_rx_packets/eth0/0": 5},
		ok:   true, dumps: 3, families: 1,
	}, {
		name:   "unknown attribute",
		family: true,
		reply: func(t *testing.T) ([]genetlink.Message, error) {
			return []genetlink.Message{queueReply(t, 1, 2, u32(aTxPackets, 8), u64(200, 99), u32(5, 1))}, nil
		},
		want: map[string]float64{"hotpath_queue_tx_packets/eth0/2": 8},
		ok:   true, dumps: 3, families: 1,
	}, {
		name:   "EOPNOTSUPP: driver without netdev_stat_ops or kernel without QSTATS_GET",
		family: true,
		reply: func(t *testing.T) ([]genetlink.Message, error) {
			return nil, errno(unix.EOPNOTSUPP)
		},
		want: map[string]float64{}, ok: false, dumps: 1, families: 1,
	}, {
		name:   "no netdev family (Linux 6.1)",
		family: false,
		want:   map[string]float64{}, ok: false, dumps: 0, families: 1,
	}, {
		name:   "empty dump",
		family: true,
		reply:  func(t *testing.T) ([]genetlink.Message, error) { return nil, nil },
		want:   map[string]float64{}, ok: false, dumps: 3, families: 1,
	}, {
		name:   "ENODEV: the device went",
		family: true,
		reply: func(t *testing.T) ([]genetlink.Message, error) {
			return nil, errno(unix.ENODEV)
		},
		want: map[string]float64{}, ok: false, dumps: 3, families: 1,
	}, {
		name:   "bad uint width",
		family: true,
		reply: func(t *testing.T) ([]genetlink.Message, error) {
			return []genetlink.Message{queueReply(t, 0, 0, attr{aRxPackets, 1, 2})}, nil
		},
		want: map[string]float64{}, ok: false, dumps: 3, families: 1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dumps, families, resolves int
			fn := func(req genetlink.Message, nreq netlink.Message) ([]genetlink.Message, error) {
				if nreq.Header.Type == unix.GENL_ID_CTRL {
					families++
					if !tt.family {
						return nil, errno(unix.ENOENT)
					}
					return []genetlink.Message{netdevFamilyReply(t)}, nil
				}
				dumps++
				if err := checkQstatsRequest(req, nreq); err != nil {
					t.Error(err)
				}
				return tt.reply(t)
			}
			c := &queueStats{
				device:  "eth0",
				dial:    func() (*genetlink.Conn, error) { return dialKernel(fn), nil },
				ifindex: func(string) (int, error) { resolves++; return 7, nil },
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(&timed{name: "qstats", c: c})
			for i := 0; i < 3; i++ {
				fams := scrape(t, reg)
				if got := value(t, fams, "hotpath_scrape_collector_success", "collector", "qstats"); got != b2f(tt.ok) {
					t.Errorf("scrape %d: success %v, want %v", i, got, tt.ok)
				}
				got := queueSeries(fams)
				if len(got) != len(tt.want) {
					t.Errorf("scrape %d: series %v, want %v", i, got, tt.want)
				}
				for k, v := range tt.want {
					if got[k] != v {
						t.Errorf("scrape %d: %s = %v, want %v", i, k, got[k], v)
					}
				}
			}
			if dumps != tt.dumps || families != tt.families {
				t.Errorf("asked QSTATS_GET %d times, GETFAMILY %d, want %d and %d", dumps, families, tt.dumps, tt.families)
			}
			if strings.HasPrefix(tt.name, "ENODEV") && resolves != 3 {
				t.Errorf("ifindex resolved %d times after ENODEV, want every scrape", resolves)
			}
		})
	}
}

// checkQstatsRequest checks a QSTATS_GET dump for ifindex 7, queue scope.
func checkQstatsRequest(greq genetlink.Message, nreq netlink.Message) error {
	if nreq.Header.Type != testFamilyID || greq.Header.Command != netdevCmdQstatsGet {
		return errors.New("request is not netdev QSTATS_GET")
	}
	if nreq.Header.Flags&netlink.Dump != netlink.Dump {
		return errors.New("request is not a dump")
	}
	ad, err := netlink.NewAttributeDecoder(greq.Data)
	if err != nil {
		return err
	}
	got := map[uint16]uint32{}
	for ad.Next() {
		got[ad.Type()] = ad.Uint32()
	}
	if got[qstatsIfindex] != 7 || got[qstatsScope] != qstatsScopeQueue || len(got) != 2 {
		return errors.New("request attributes are not ifindex 7, scope queue")
	}
	return ad.Err()
}

// TestQueueStatsKernel asks this machine's kernel for the queue statistics
// of lo in a network namespace of the test's own: lo (and veth) have no
// netdev_stat_ops, so a kernel with QSTATS_GET refuses (EOPNOTSUPP) and one
// without the netdev family has none; either way the collector reports no
// data without failing the scrape, and nothing else.
func TestQueueStatsKernel(t *testing.T) {
	done := make(chan struct{})
	var err error
	var ok float64
	var got map[string]float64
	var logged []string
	go func() {
		defer close(done)
		// The thread stays locked: it ends with the goroutine, so the
		// namespace does not leak into other goroutines.
		runtime.LockOSThread()
		if err = unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return
		}
		reg := NewRegistry(Options{Device: "lo", QueueStats: DialGenetlink,
			Logf: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }})
		fams, gerr := reg.Gather()
		if gerr != nil {
			err = gerr
			return
		}
		m := map[string]*dto.MetricFamily{}
		for _, f := range fams {
			m[f.GetName()] = f
		}
		got = queueSeries(m)
		for _, s := range m["hotpath_scrape_collector_success"].Metric {
			ok += s.GetGauge().GetValue()
		}
	}()
	<-done
	if errors.Is(err, unix.EPERM) {
		t.Skipf("no network namespace: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if ok != 0 || len(got) != 0 {
		t.Errorf("lo: success %v, series %v; want 0 and none", ok, got)
	}
	// "no data" is the kernel's refusal (or its lack of the family), not
	// a socket that failed.
	if len(logged) != 1 || !strings.Contains(logged[0], "collector qstats") || !strings.HasSuffix(logged[0], errNoData.Error()) {
		t.Errorf("logged %q, want one qstats \"no data\"", logged)
	}
	t.Logf("%s", logged)
}
