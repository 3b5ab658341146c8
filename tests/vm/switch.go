package vm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SwitchConfig is the guest's network when it is a dedicated server's:
// several NICs of a chosen model on one Ethernet segment, optionally a
// tagged VLAN of a trunk port. The host kernel the tests run on may have
// neither bonding nor 802.1Q nor VLAN filtering in its bridge, so the
// host's end is a userspace switch (Switch) between the guest's NICs and
// the namespace's tap: every guest NIC is a QEMU socket netdev (UDP on the
// namespace's loopback), and the tap keeps HostAddr and the DHCP server
// as in every other boot.
type SwitchConfig struct {
	Ports int    // guest NICs (net0, net1, ...); 0 means 1
	Model string // QEMU NIC model of every port: "e1000e", "igb", ""/"virtio-net-pci"
	// VLAN is the 802.1Q tag of the guest side: frames to the guest are
	// tagged with it and frames from it must carry it. 0: untagged.
	VLAN int
}

// PortMAC is the MAC address of guest port i: GuestMAC for net0, the
// next addresses after it for the others.
func PortMAC(i int) string {
	hw, _ := net.ParseMAC(GuestMAC)
	hw[5] += byte(i)
	return hw.String()
}

// UDP ports on the namespace's loopback (each guest has a namespace of
// its own, so fixed numbers are free): QEMU's end of port i, the switch's.
const (
	qemuPortBase   = 20000
	switchPortBase = 21000
)

func (c SwitchConfig) ports() int { return max(c.Ports, 1) }

// args are QEMU's NIC arguments: one socket netdev and one device per port.
func (c SwitchConfig) args() []string {
	model := c.Model
	if model == "" {
		model = "virtio-net-pci"
	}
	var args []string
	for i := range c.ports() {
		args = append(args,
			"-netdev", fmt.Sprintf("socket,id=net%d,udp=127.0.0.1:%d,localaddr=127.0.0.1:%d", i, switchPortBase+i, qemuPortBase+i),
			"-device", fmt.Sprintf("%s,netdev=net%d,mac=%s,romfile=", model, i, PortMAC(i)))
	}
	return args
}

// Switch is the userspace switch: it learns which port each guest MAC is
// behind, floods what it does not know, and tags and untags the VLAN.
type Switch struct {
	cfg   SwitchConfig
	tap   *os.File
	ports []*net.UDPConn
	qemu  []*net.UDPAddr

	mu  sync.Mutex
	fdb map[[6]byte]int // guest MAC -> port, guarded by mu

	// FromGuest counts the frames each port delivered to the tap.
	FromGuest []atomic.Int64
	// Untagged4 counts IPv4 and ARP frames from the guest without the
	// VLAN's tag (or with another tag) when VLAN is set: traffic that
	// left the guest on the wrong interface. They are dropped. (IPv6
	// link-local chatter of an untagged bond is counted in Other.)
	Untagged4 atomic.Int64
	Other     atomic.Int64
	wg        sync.WaitGroup
}

// StartSwitch opens tap (which must exist in n, single queue) and the
// ports' UDP sockets inside n, and starts forwarding.
func (n *Netns) StartSwitch(cfg SwitchConfig, tap string) (*Switch, error) {
	s := &Switch{cfg: cfg, fdb: map[[6]byte]int{}, FromGuest: make([]atomic.Int64, cfg.ports())}
	err := n.Do(func() error {
		var err error
		if s.tap, err = openTap(tap); err != nil {
			return err
		}
		for i := range cfg.ports() {
			c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: switchPortBase + i})
			if err != nil {
				return err
			}
			s.ports = append(s.ports, c)
			s.qemu = append(s.qemu, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: qemuPortBase + i})
		}
		return nil
	})
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("vm: switch in %s: %w", n.Name, err)
	}
	s.wg.Add(1 + len(s.ports))
	go s.fromTap()
	for i := range s.ports {
		go s.fromPort(i)
	}
	return s, nil
}

// openTap attaches to the existing tap device name (IFF_TAP|IFF_NO_PI) in
// the calling thread's namespace, non-blocking so that Close ends a read.
func openTap(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	var req [unix.IFNAMSIZ + 64]byte
	copy(req[:], name)
	binary.NativeEndian.PutUint16(req[unix.IFNAMSIZ:], unix.IFF_TAP|unix.IFF_NO_PI)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(&req[0]))); e != 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF %s: %w", name, e)
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), nil
}

const etherVLAN = 0x8100

// fromPort forwards port i's frames to the tap, untagged.
func (s *Switch) fromPort(i int) {
	defer s.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, _, err := s.ports[i].ReadFromUDP(buf)
		if err != nil {
			return
		}
		f := buf[:n]
		if len(f) < 14 {
			continue
		}
		typ := binary.BigEndian.Uint16(f[12:14])
		if s.cfg.VLAN != 0 {
			if typ != etherVLAN || len(f) < 18 || int(binary.BigEndian.Uint16(f[14:16])&0xfff) != s.cfg.VLAN {
				inner := typ
				if typ == etherVLAN && len(f) >= 18 {
					inner = binary.BigEndian.Uint16(f[16:18])
				}
				if inner == 0x0800 || inner == 0x0806 {
					s.Untagged4.Add(1)
				} else {
					s.Other.Add(1)
				}
				continue
			}
			f = append(f[:12:12], f[16:]...)
		}
		var src [6]byte
		copy(src[:], f[6:12])
		s.mu.Lock()
		s.fdb[src] = i
		s.mu.Unlock()
		if _, err := s.tap.Write(f); err != nil && errors.Is(err, os.ErrClosed) {
			return
		}
		s.FromGuest[i].Add(1)
	}
}

// fromTap forwards the host's frames to the port the destination is
// behind, or to every port (broadcast, multicast, not learnt yet),
// tagged when the VLAN is set.
func (s *Switch) fromTap() {
	defer s.wg.Done()
	buf := make([]byte, 65536)
	out := make([]byte, 0, 65536+4)
	for {
		n, err := s.tap.Read(buf)
		if err != nil {
			return
		}
		f := buf[:n]
		if len(f) < 14 {
			continue
		}
		if s.cfg.VLAN != 0 {
			out = append(out[:0], f[:12]...)
			out = binary.BigEndian.AppendUint16(out, etherVLAN)
			out = binary.BigEndian.AppendUint16(out, uint16(s.cfg.VLAN))
			f = append(out, f[12:]...)
		}
		var dst [6]byte
		copy(dst[:], f[0:6])
		s.mu.Lock()
		p, ok := s.fdb[dst]
		s.mu.Unlock()
		for i, c := range s.ports {
			if !ok || dst[0]&1 == 1 || i == p {
				c.WriteToUDP(f, s.qemu[i])
			}
		}
	}
}

// Close stops forwarding.
func (s *Switch) Close() error {
	var errs []error
	if s.tap != nil {
		errs = append(errs, s.tap.Close())
	}
	for _, c := range s.ports {
		errs = append(errs, c.Close())
	}
	s.wg.Wait()
	return errors.Join(errs...)
}

// AddTapSingle creates a single-queue tap (QEMU does not open it: the
// switch does) with addr, up.
func (n *Netns) AddTapSingle(name, addr string) error {
	if err := ip("-n", n.Name, "tuntap", "add", "dev", name, "mode", "tap"); err != nil {
		return err
	}
	if err := ip("-n", n.Name, "addr", "add", addr, "dev", name); err != nil {
		return err
	}
	return ip("-n", n.Name, "link", "set", name, "up")
}
