package vm

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
)

// TestDHCPServer runs the server in one namespace and a real DHCPv4 client
// (nclient4, raw sockets) in another, joined by a veth pair: the same path
// the guest's DHCP exchange takes through the tap.
func TestDHCPServer(t *testing.T) {
	requireRoot(t)
	srvNS, cliNS := NewNetns(t), NewNetns(t)
	if err := srvNS.AddVeth("dh0", "10.79.0.1/24", cliNS, "cl0", ""); err != nil {
		t.Fatal(err)
	}
	srv, err := srvNS.StartDHCP(DHCPConfig{
		Iface: "dh0", ServerIP: netIP("10.79.0.1"), ClientIP: netIP("10.79.0.2"),
		Mask: netMask24, Router: netIP("10.79.0.1"), Lease: 2 * time.Hour, MTU: 1400,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	var cl *nclient4.Client
	if err := cliNS.Do(func() error {
		var err error
		cl, err = nclient4.New("cl0", nclient4.WithTimeout(2*time.Second), nclient4.WithRetry(3))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	lease, err := cl.Request(ctx)
	if err != nil {
		t.Fatalf("DHCP exchange: %v (server errors: %v)", err, srv.Errors())
	}
	ack := lease.ACK
	if !ack.YourIPAddr.Equal(netIP("10.79.0.2")) {
		t.Errorf("yiaddr = %v, want 10.79.0.2", ack.YourIPAddr)
	}
	if r := ack.Router(); len(r) != 1 || !r[0].Equal(netIP("10.79.0.1")) {
		t.Errorf("router = %v", r)
	}
	if m := ack.SubnetMask(); net.IP(m).String() != "255.255.255.0" {
		t.Errorf("mask = %v", m)
	}
	if d := ack.IPAddressLeaseTime(0); d != 2*time.Hour {
		t.Errorf("lease time = %v", d)
	}
	if mtu := ack.GetOneOption(dhcpv4.OptionInterfaceMTU); len(mtu) != 2 || binary.BigEndian.Uint16(mtu) != 1400 {
		t.Errorf("MTU option = %v, want 1400", mtu)
	}
	if !ack.ServerIdentifier().Equal(netIP("10.79.0.1")) {
		t.Errorf("server id = %v", ack.ServerIdentifier())
	}
	// A client retransmits a DISCOVER whose OFFER it has not seen within
	// its timeout (on a loaded machine, or before the veth's carrier is
	// up): the server logs each one, and that is right. The exchange is
	// the log with repeats of one message folded.
	log := foldRepeats(srv.Log())
	if len(log) != 2 || log[0].Type != dhcpv4.MessageTypeDiscover || log[1].Type != dhcpv4.MessageTypeRequest ||
		log[1].MAC.String() != cl.InterfaceAddr().String() || !log[1].Requested.Equal(netIP("10.79.0.2")) {
		t.Errorf("server log = %v, want DISCOVER then REQUEST for 10.79.0.2 from %v", log, cl.InterfaceAddr())
	}
	ls := srv.Leases()
	if len(ls) != 1 || ls[0].MAC.String() != cl.InterfaceAddr().String() {
		t.Errorf("server leases = %+v, want one for %v", ls, cl.InterfaceAddr())
	}

	// Asking for an address the server does not own gets a NAK.
	req, err := dhcpv4.New(
		dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
		dhcpv4.WithHwAddr(cl.InterfaceAddr()),
		dhcpv4.WithBroadcast(true),
		dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(netIP("10.79.0.99"))),
	)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cl.SendAndRead(ctx, nclient4.DefaultServers, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.MessageType() != dhcpv4.MessageTypeNak {
		t.Errorf("request for a foreign address got %v, want NAK", resp.MessageType())
	}
	// The REQUEST may be retransmitted too: the same folding.
	if log := foldRepeats(srv.Log()); len(log) != 3 || log[2].Type != dhcpv4.MessageTypeRequest || !log[2].Requested.Equal(netIP("10.79.0.99")) {
		t.Errorf("server log after the NAK = %v, want the foreign request third", log)
	}
	if errs := srv.Errors(); len(errs) != 0 {
		t.Errorf("server errors: %v", errs)
	}
}

// foldRepeats drops each log entry that repeats the one before it (the
// same message type from the same client asking for the same address):
// a client's retransmissions on a loaded machine.
func foldRepeats(log []Message) []Message {
	var out []Message
	for _, e := range log {
		if n := len(out); n > 0 && out[n-1].Type == e.Type && out[n-1].MAC.String() == e.MAC.String() && out[n-1].Requested.Equal(e.Requested) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// The failure seen at -count=3 beside two busy loops: a retransmitted
// DISCOVER before the REQUEST must not hide the foreign REQUEST's place,
// and a retransmitted REQUEST is one request.
func TestFoldRepeats(t *testing.T) {
	mac, _ := net.ParseMAC("fa:94:5c:21:2b:59")
	d := Message{Type: dhcpv4.MessageTypeDiscover, MAC: mac}
	r2 := Message{Type: dhcpv4.MessageTypeRequest, MAC: mac, Requested: netIP("10.79.0.2")}
	r99 := Message{Type: dhcpv4.MessageTypeRequest, MAC: mac, Requested: netIP("10.79.0.99")}
	for _, tc := range []struct {
		in   []Message
		want int
	}{
		{[]Message{d, d, r2, r99}, 3},
		{[]Message{d, r2, r99, r99}, 3},
		{[]Message{d, r2, r2, r99}, 3},
		{[]Message{d, r2, d, r2}, 4}, // a new exchange is not a repeat
	} {
		if got := foldRepeats(tc.in); len(got) != tc.want {
			t.Errorf("foldRepeats(%v) = %v, want %d entries", tc.in, got, tc.want)
		}
	}
}
