package vm

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Frame is one Ethernet frame a FrameCounter saw from the guest.
type Frame struct {
	EtherType uint16 // 0x0800 IPv4, 0x0806 ARP, 0x86dd IPv6
	At        time.Time
}

// FrameCounter records the frames the guest sends on a tap, read from the
// host's side with a packet socket of the test (the guest's own packet
// sockets are what the init must not leave open; the test's are outside
// it). It is how an IPv6-only test counts the IPv4 packets the guest
// sends.
type FrameCounter struct {
	fd  int
	mac net.HardwareAddr
	wg  sync.WaitGroup

	mu     sync.Mutex
	frames []Frame
}

// CountFrames starts counting the frames from mac received on dev inside
// n. Close stops it.
func (n *Netns) CountFrames(dev string, mac net.HardwareAddr) (*FrameCounter, error) {
	fc := &FrameCounter{fd: -1, mac: mac}
	err := n.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		proto := int(htons(unix.ETH_P_ALL))
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: ifi.Index}); err != nil {
			unix.Close(fd)
			return err
		}
		// A read timeout lets Close end the reader.
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
		fc.fd = fd
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("frame counter on %s in %s: %w", dev, n.Name, err)
	}
	fc.wg.Add(1)
	go fc.read()
	return fc, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (fc *FrameCounter) read() {
	defer fc.wg.Done()
	fd := fc.fd // Close only closes it after this returns
	buf := make([]byte, 2048)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EAGAIN || err == unix.EINTR {
			fc.mu.Lock()
			closed := fc.fd < 0
			fc.mu.Unlock()
			if closed {
				return
			}
			continue
		}
		if err != nil || n < 14 {
			if err != nil {
				return
			}
			continue
		}
		if string(buf[6:12]) != string(fc.mac) {
			continue // the host's own frames
		}
		et := binary.BigEndian.Uint16(buf[12:14])
		if et == 0x8100 && n >= 18 { // 802.1Q: the type after the tag
			et = binary.BigEndian.Uint16(buf[16:18])
		}
		fc.mu.Lock()
		fc.frames = append(fc.frames, Frame{EtherType: et, At: time.Now()})
		fc.mu.Unlock()
	}
}

// Since returns the frames seen at or after t, by EtherType.
func (fc *FrameCounter) Since(t time.Time) map[uint16]int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	out := map[uint16]int{}
	for _, f := range fc.frames {
		if !f.At.Before(t) {
			out[f.EtherType]++
		}
	}
	return out
}

// Close stops the counter.
func (fc *FrameCounter) Close() error {
	fc.mu.Lock()
	fd := fc.fd
	fc.fd = -1
	fc.mu.Unlock()
	fc.wg.Wait()
	return unix.Close(fd)
}
