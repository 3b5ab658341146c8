package server_test

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The attack tests' kernel-memory figure is that of the test server's own
// sockets, read with sock_diag (what `ss -tm` shows), not the host-wide
// TCP figure of /proc/net/sockstat: that one moved by more than the slack
// with other packages' tests running beside this one (go test runs
// packages in parallel), and failed TestSlowMemoryRelease for memory that
// was not the server's.
//
// The request is built here on github.com/mdlayher/netlink (already a
// dependency, for init/metrics), which does the dump's framing, multipart
// replies and errors: vishvananda/netlink v1.3.1's SocketDiagTCPInfo asks
// the kernel for INET_DIAG_INFO only (no INET_DIAG_SKMEMINFO, which is
// the memory), and x/sys has the constants but not the structures.

// Layout of struct inet_diag_req_v2 and struct inet_diag_msg
// (include/uapi/linux/inet_diag.h).
const (
	inetDiagReqV2Len  = 56 // family, protocol, ext, pad, states, inet_diag_sockid (48)
	inetDiagMsgLen    = 72 // family, state, timer, retrans, sockid (48), expires, rqueue, wqueue, uid, inode
	inetDiagSkMeminfo = 7  // INET_DIAG_SKMEMINFO: u32[SK_MEMINFO_VARS]
)

// sockMem is the memory the kernel has charged to a set of TCP sockets.
type sockMem struct {
	socks   int
	charged int64 // receive queues + send queues + forward allocation: what counts in TCP's memory accounting
	queued  int64 // of which the send queues (sk_wmem_queued)
}

// serverSockMem sums, over the TCP sockets whose local address is local
// (the server's listener and its connections, orphaned ones included: the
// kernel keeps those in its tables until they are gone; a client socket
// of another test may have the same port on another address), the
// memory the kernel has charged to them. An skb charged to a socket is
// counted in sk_rmem_alloc or sk_wmem_queued and the rest of what was
// reserved in sk_forward_alloc; their sum, over all sockets, is what
// /proc/net/sockstat's "mem" counts in pages (net/core/sock.c,
// __sk_mem_raise_allocated).
func serverSockMem(local netip.AddrPort) (sockMem, error) {
	c, err := netlink.Dial(unix.NETLINK_SOCK_DIAG, nil)
	if err != nil {
		return sockMem{}, fmt.Errorf("sock_diag: %w", err)
	}
	defer c.Close()
	var m sockMem
	family := uint8(unix.AF_INET6)
	if local.Addr().Is4() {
		family = unix.AF_INET
	}
	req := make([]byte, inetDiagReqV2Len)
	req[0], req[1] = family, unix.IPPROTO_TCP
	req[2] = 1 << (inetDiagSkMeminfo - 1)
	// Every state but TIME_WAIT: such a socket holds no buffers, and an
	// earlier connection's may share a client socket's port (the kernel
	// reuses an ephemeral port towards another peer), which made
	// TestServerSockMem count two sockets for its one client now and then.
	binary.NativeEndian.PutUint32(req[4:], ^uint32(0)&^(1<<unix.BPF_TCP_TIME_WAIT))
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.SOCK_DIAG_BY_FAMILY, Flags: netlink.Request | netlink.Dump},
		Data:   req,
	})
	if err != nil {
		return sockMem{}, fmt.Errorf("sock_diag dump of %v: %w", local, err)
	}
	for _, msg := range msgs {
		if err := m.add(msg.Data, local); err != nil {
			return sockMem{}, err
		}
	}
	return m, nil
}

// add counts one inet_diag_msg if its local address is local.
func (m *sockMem) add(b []byte, local netip.AddrPort) error {
	if len(b) < inetDiagMsgLen {
		return fmt.Errorf("sock_diag: short inet_diag_msg (%d bytes)", len(b))
	}
	// id: sport, dport (network order), src[16], dst[16]; an IPv4
	// address is the first 4 bytes of its src.
	src := netip.AddrFrom16([16]byte(b[8:24]))
	if local.Addr().Is4() {
		src = netip.AddrFrom4([4]byte(b[8:12]))
	}
	if binary.BigEndian.Uint16(b[4:]) != local.Port() || src != local.Addr() {
		return nil
	}
	m.socks++
	ad, err := netlink.NewAttributeDecoder(b[inetDiagMsgLen:])
	if err != nil {
		return fmt.Errorf("sock_diag attributes: %w", err)
	}
	for ad.Next() {
		if ad.Type() != inetDiagSkMeminfo {
			continue
		}
		v := ad.Bytes()
		if len(v) < 4*(unix.SK_MEMINFO_WMEM_QUEUED+1) {
			return fmt.Errorf("sock_diag: short skmeminfo (%d bytes)", len(v))
		}
		get := func(i int) int64 { return int64(binary.NativeEndian.Uint32(v[4*i:])) }
		q := get(unix.SK_MEMINFO_WMEM_QUEUED)
		// sk_forward_alloc is an int: it can be negative for a moment.
		fwd := int64(int32(binary.NativeEndian.Uint32(v[4*unix.SK_MEMINFO_FWD_ALLOC:])))
		m.charged += get(unix.SK_MEMINFO_RMEM_ALLOC) + q + fwd
		m.queued += q
	}
	return ad.Err()
}

// rssAnon is the process's anonymous resident memory (/proc/self/status
// RssAnon): what a leak of the server's can hold. VmRSS also counts the
// test binary's own pages from the page cache, which other processes'
// memory pressure evicts and the next call faults back in.
func rssAnon(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("RssAnon %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no RssAnon in /proc/self/status")
	return 0
}

// TestServerSockMem: the figure sees what a socket of the port holds and
// nothing of another port's. 1 MiB written to a peer that does not read
// is queued on the writer's side (up to its send buffer) and in the
// reader's receive queue.
func TestServerSockMem(t *testing.T) {
	ln, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ln)
	if err := unix.Bind(ln, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(ln, 1); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(ln)
	port := sa.(*unix.SockaddrInet4).Port
	local := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(port))
	before, err := serverSockMem(local)
	if err != nil {
		t.Fatal(err)
	}
	if before.socks != 1 || before.queued != 0 {
		t.Fatalf("a bare listener: %+v, want 1 socket, nothing queued", before)
	}
	cl, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(cl)
	if err := unix.Connect(cl, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: port}); err != nil {
		t.Fatal(err)
	}
	srv, _, err := unix.Accept4(ln, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(srv)
	unix.SetNonblock(srv, true)
	buf := make([]byte, 64<<10)
	sent := 0
	for sent < 1<<20 {
		n, err := unix.Write(srv, buf)
		if err != nil {
			break // EAGAIN: both queues are full
		}
		sent += n
	}
	after, err := serverSockMem(local)
	if err != nil {
		t.Fatal(err)
	}
	// The client's socket (local port: an ephemeral one) is not counted;
	// the server's, holding what the client's full receive queue left it,
	// is.
	if after.socks != 2 || after.queued <= 0 || after.charged < after.queued {
		t.Errorf("after %d KiB written to a peer that does not read: %+v, want 2 sockets and the unsent bytes queued", sent>>10, after)
	}
	t.Logf("%d KiB written; the server's port: %+v", sent>>10, after)
	// The client's side, counted by its own address: one socket, its
	// receive queue full of what it did not read.
	ca, _ := unix.Getsockname(cl)
	client, err := serverSockMem(netip.AddrPortFrom(local.Addr(), uint16(ca.(*unix.SockaddrInet4).Port)))
	if err != nil {
		t.Fatal(err)
	}
	if client.socks != 1 || client.queued != 0 || client.charged < 64<<10 {
		t.Errorf("the client's socket: %+v, want 1 socket holding its unread receive queue", client)
	}
}
