package vm

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"
)

// arpRequest is an Ethernet frame asking who has target, from mac/ip,
// tagged with vlan unless it is 0.
func arpRequest(mac net.HardwareAddr, ip, target net.IP, vlan int) []byte {
	f := append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, mac...)
	if vlan != 0 {
		f = binary.BigEndian.AppendUint16(f, etherVLAN)
		f = binary.BigEndian.AppendUint16(f, uint16(vlan))
	}
	f = binary.BigEndian.AppendUint16(f, 0x0806)
	f = append(f, 0, 1, 8, 0, 6, 4, 0, 1) // Ethernet, IPv4, request
	f = append(f, mac...)
	f = append(f, ip.To4()...)
	f = append(f, 0, 0, 0, 0, 0, 0)
	return append(f, target.To4()...)
}

// TestSwitch plays QEMU's side of two ports: a tagged ARP request on
// port 0 reaches the namespace's kernel through the tap, and its reply
// comes back tagged, on port 0 only (learnt); an untagged one is counted
// and dropped.
func TestSwitch(t *testing.T) {
	requireRoot(t)
	ns := NewNetns(t)
	if err := ns.AddTapSingle("tap0", HostAddr+"/24"); err != nil {
		t.Fatal(err)
	}
	sw, err := ns.StartSwitch(SwitchConfig{Ports: 2, VLAN: 100}, "tap0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sw.Close() })
	var qemu [2]*net.UDPConn
	err = ns.Do(func() error {
		for i := range qemu {
			c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: qemuPortBase + i})
			if err != nil {
				return err
			}
			qemu[i] = c
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mac, _ := net.ParseMAC(PortMAC(0))
	toSwitch := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: switchPortBase}
	untagged := arpRequest(mac, net.ParseIP(GuestAddr), net.ParseIP(HostAddr), 0)
	if _, err := qemu[0].WriteToUDP(untagged, toSwitch); err != nil {
		t.Fatal(err)
	}
	// The tap's qdisc drops until linkwatch activates the device after the
	// switch attached (up to a second): ask again until the kernel answers.
	tagged := arpRequest(mac, net.ParseIP(GuestAddr), net.ParseIP(HostAddr), 100)
	buf := make([]byte, 2048)
	var reply []byte
	sent := 0
	for deadline := time.Now().Add(5 * time.Second); reply == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("no ARP reply on port 0 to %d requests", sent)
		}
		if _, err := qemu[0].WriteToUDP(tagged, toSwitch); err != nil {
			t.Fatal(err)
		}
		sent++
		qemu[0].SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		for reply == nil {
			n, _, err := qemu[0].ReadFromUDP(buf)
			if err != nil {
				break
			}
			f := buf[:n]
			if len(f) >= 42 && binary.BigEndian.Uint16(f[16:18]) == 0x0806 && binary.BigEndian.Uint16(f[24:26]) == 2 {
				reply = f
			}
		}
	}
	if !bytes.Equal(reply[0:6], mac) || binary.BigEndian.Uint16(reply[12:14]) != etherVLAN ||
		binary.BigEndian.Uint16(reply[14:16])&0xfff != 100 {
		t.Errorf("reply % x: want tagged 100, to %s", reply[:18], mac)
	}
	qemu[1].SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	for {
		n, _, err := qemu[1].ReadFromUDP(buf)
		if err != nil {
			break
		}
		if f := buf[:n]; len(f) >= 26 && binary.BigEndian.Uint16(f[24:26]) == 2 {
			t.Errorf("the ARP reply to a MAC learnt on port 0 also went to port 1")
		}
	}
	if u, g := sw.Untagged4.Load(), sw.FromGuest[0].Load(); u != 1 || g != int64(sent) {
		t.Errorf("untagged IPv4 %d, frames forwarded from port 0 %d; want 1 and %d", u, g, sent)
	}
}
