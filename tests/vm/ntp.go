package vm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// TimeSyncAddr is Amazon Time Sync's link-local address.
const TimeSyncAddr = "169.254.169.123"

// NTPServer is an NTPv4 server (RFC 5905, server mode) answering from the
// host's clock, shifted by Offset. It is what Amazon Time Sync is to an
// instance: a stratum-1 server one hop away. Tests run it on loopback
// against the init's client, and inside a guest's namespace at
// TimeSyncAddr so the guest syncs its clock from the host's.
type NTPServer struct {
	// Offset is added to the host clock in every answer (a server whose
	// time differs from the host's).
	Offset time.Duration
	// Stratum of the answers; 0 sends a kiss-o'-death (Kiss).
	Stratum uint8
	// Kiss is the kiss code of a stratum-0 answer; "" is "RATE".
	Kiss string
	// Leap is the leap indicator of the answers (3: unsynchronised).
	Leap uint8
	// RootDispersion is announced in every answer (default ~0.24 ms).
	RootDispersion time.Duration
	// OffsetOf, when set, gives the offset of the n-th answer (from 0)
	// instead of Offset: a server whose answers disagree.
	OffsetOf func(n int) time.Duration
	// Mangle, when set, changes each answer before it is sent (a zero
	// transmit time, a wrong origin timestamp).
	Mangle func(resp []byte)

	conn    *net.UDPConn
	wg      sync.WaitGroup
	answers atomic.Int64
	mu      sync.Mutex // guards the fields above while serving (Configure)
}

// Configure changes the server's fields while it serves: f runs under
// the lock the server reads them with (setting them directly races with
// the serving goroutine).
func (s *NTPServer) Configure(f func(*NTPServer)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// ListenNTP serves NTP on addr (ip:port; port 0 picks one). Close stops it.
func ListenNTP(addr string) (*NTPServer, error) { return listenNTP("udp4", addr) }

// listenNTP serves NTP on addr in network ("udp4" or "udp6").
func listenNTP(network, addr string) (*NTPServer, error) {
	ua, err := net.ResolveUDPAddr(network, addr)
	if err != nil {
		return nil, err
	}
	c, err := net.ListenUDP(network, ua)
	if err != nil {
		return nil, fmt.Errorf("ntp server: %w", err)
	}
	s := &NTPServer{conn: c, Stratum: 1}
	s.wg.Add(1)
	go s.serve()
	return s, nil
}

// StartNTP serves NTP at TimeSyncAddr:123 inside the namespace (the
// address goes on its loopback).
func (n *Netns) StartNTP() (*NTPServer, error) {
	if err := n.AddLocalAddr(TimeSyncAddr); err != nil {
		return nil, err
	}
	var s *NTPServer
	err := n.Do(func() error {
		var err error
		s, err = ListenNTP(TimeSyncAddr + ":123")
		return err
	})
	return s, err
}

// Addr is the address the server listens on.
func (s *NTPServer) Addr() string { return s.conn.LocalAddr().String() }

// Answers is how many requests were answered.
func (s *NTPServer) Answers() int { return int(s.answers.Load()) }

// Close stops the server.
func (s *NTPServer) Close() error {
	err := s.conn.Close()
	s.wg.Wait()
	return err
}

// ntpEpoch is 1900-01-01 in Unix seconds.
const ntpEpoch = 2208988800

func ntpTime(t time.Time) uint64 {
	sec := uint64(t.Unix() + ntpEpoch)
	frac := uint64(t.Nanosecond()) << 32 / 1e9
	return sec<<32 | frac
}

func (s *NTPServer) serve() {
	defer s.wg.Done()
	buf := make([]byte, 512)
	for {
		n, from, err := s.conn.ReadFromUDP(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		if n < 48 {
			continue
		}
		s.mu.Lock()
		resp, ok := s.answer(buf[:48])
		s.mu.Unlock()
		if !ok {
			continue
		}
		// Counted before the write: a client that has its answer must
		// find it counted (counting after the write raced the client's
		// check, and failed CI once).
		s.answers.Add(1)
		if _, err := s.conn.WriteToUDP(resp[:], from); err != nil {
			s.answers.Add(-1)
		}
	}
}

// answer returns the answer to the client request req, or false for one
// that is not a client request. The caller holds s.mu.
func (s *NTPServer) answer(req []byte) (resp [48]byte, ok bool) {
	offset := s.Offset
	if s.OffsetOf != nil {
		offset = s.OffsetOf(int(s.answers.Load()))
	}
	recv := time.Now().Add(offset)
	version, mode := (req[0]>>3)&7, req[0]&7
	if mode != 3 || version < 1 || version > 4 { // client mode only
		return resp, false
	}
	resp[0] = (s.Leap&3)<<6 | version<<3 | 4 // server mode
	resp[1] = s.Stratum
	resp[2] = req[2]                        // poll
	resp[3] = 0xec                          // precision 2^-20
	binary.BigEndian.PutUint32(resp[4:], 0) // root delay
	disp := uint32(0x10)                    // root dispersion, ~0.24 ms (NTP short format, 2^-16 s)
	if s.RootDispersion > 0 {
		disp = uint32(s.RootDispersion * (1 << 16) / time.Second)
	}
	binary.BigEndian.PutUint32(resp[8:], disp)
	copy(resp[12:16], "HOST") // reference id
	if s.Stratum == 0 {
		kiss := s.Kiss
		if kiss == "" {
			kiss = "RATE"
		}
		copy(resp[12:16], kiss)
	}
	binary.BigEndian.PutUint64(resp[16:], ntpTime(recv.Add(-time.Second))) // reference
	copy(resp[24:32], req[40:48])                                          // origin = client's transmit
	binary.BigEndian.PutUint64(resp[32:], ntpTime(recv))                   // receive
	binary.BigEndian.PutUint64(resp[40:], ntpTime(time.Now().Add(offset))) // transmit
	if s.Mangle != nil {
		s.Mangle(resp[:])
	}
	return resp, true
}
