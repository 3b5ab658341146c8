// Package kernlog counts the kernel log's records that an operator must
// hear about although nothing failed: hardware errors the kernel handled.
// A corrected memory error found by a machine-check poll, an error the
// firmware reported through ACPI APEI (GHES), a PCIe AER message, a page
// the kernel took away from the workload after an uncorrected error: each
// is one line in the kernel log and nothing else, and a machine that logs
// them is a machine to drain before it fails for good.
//
// The records are read from /dev/kmsg, which gives one record per read,
// each with its sequence number, so a record the ring buffer overwrote
// before it was read is counted as lost rather than silently missed. The
// Counter reads only when asked (Scan: at the boot report and at each
// scrape of /metrics), like the init's metrics collectors: nothing runs in
// between. It keeps its file open, so each Scan reads what is new since
// the last one; the kernel's ring (128 KiB here) holds hours of a quiet
// machine's log between two scrapes.
package kernlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A Class is one kind of record counted, named by its metric label. Match
// is given the record's message (after the kernel's "prefix: " of the
// subsystem, if any) and says whether the record starts one event of the
// class: a machine check prints five lines, one of which is counted.
type Class struct {
	Name  string
	Match func(msg string) bool
}

// HardwareErrors are the classes of hardware error Linux 6.1 and 6.12 log
// (the formats are theirs: arch/x86/kernel/cpu/mce/core.c __print_mce,
// drivers/acpi/apei/ghes.c __ghes_print_estatus, drivers/pci/pcie/aer.c
// __aer_print_error, mm/memory-failure.c action_result).
var HardwareErrors = []Class{
	// "mce: [Hardware Error]: CPU 3: Machine Check: 0 Bank 7: cc00008000010090"
	// (and "Machine Check Exception:" for one that raised #MC): the first
	// of the lines of one machine check; "Machine check events logged"
	// follows some of them and is not a second event.
	{Name: "mce", Match: func(m string) bool {
		rest, ok := strings.CutPrefix(m, "mce: [Hardware Error]: CPU ")
		return ok && strings.Contains(rest, ": Machine Check")
	}},
	// "{3}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 1":
	// the first line of one firmware error record (memory, PCIe, processor;
	// its section lines follow with the same {n}).
	{Name: "ghes", Match: func(m string) bool {
		return strings.Contains(m, "[Hardware Error]: Hardware error from APEI Generic Hardware Error Source")
	}},
	// "pcieport 0000:00:1c.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)"
	{Name: "aer", Match: func(m string) bool {
		return strings.Contains(m, "PCIe Bus Error: severity=")
	}},
	// "Memory failure: 0x1234: recovery action for dirty LRU page: Recovered"
	{Name: "memory_failure", Match: func(m string) bool {
		rest, ok := strings.CutPrefix(m, "Memory failure: ")
		return ok && strings.Contains(rest, "recovery action for")
	}},
}

// Event is one counted record.
type Event struct {
	Class string `json:"class"`
	// Seconds is the record's time on the kernel's clock (seconds since
	// boot, as dmesg prints it).
	Seconds float64 `json:"seconds"`
	Message string  `json:"message"`
}

// Snapshot is what a Counter has seen.
type Snapshot struct {
	// Counts has every class's count, zero ones included, in the order of
	// the classes.
	Counts []Count `json:"counts"`
	// Last are the most recent events, oldest first (at most KeepLast).
	Last []Event `json:"last,omitempty"`
	// Lost counts records the ring buffer overwrote before they were read:
	// an event among them is not counted.
	Lost uint64 `json:"lost_records,omitempty"`
}

// Count is one class's number of events.
type Count struct {
	Class string `json:"class"`
	N     uint64 `json:"n"`
}

// Total is the sum of the counts.
func (s Snapshot) Total() uint64 {
	var n uint64
	for _, c := range s.Counts {
		n += c.N
	}
	return n
}

const (
	// KeepLast is how many events a Counter keeps the text of.
	KeepLast = 8
	// maxMessage bounds a kept message: the report and /metrics stay small
	// whatever the kernel printed.
	maxMessage = 240
	// recordSize is larger than any record (the kernel's limit is 1 KiB
	// of text plus the header and the dictionary).
	recordSize = 8192
)

// Counter counts the records of its classes. It is safe for concurrent
// use.
type Counter struct {
	r       io.Reader // non-blocking: io.EOF or EAGAIN when nothing is left
	classes []Class

	mu      sync.Mutex
	buf     []byte
	counts  []uint64
	last    []Event
	lost    uint64
	nextSeq uint64 // the sequence number expected next; 0 before the first record
}

// Open opens the kernel log (path is "/dev/kmsg") non-blocking, from its
// oldest record, and counts classes in it. The file is read with read(2)
// itself: an *os.File opened O_NONBLOCK would park a Read in the Go
// poller until the next record instead of returning EAGAIN.
func Open(path string, classes []Class) (*Counter, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("kernel log: open %s: %w", path, err)
	}
	return New(rawFD(fd), classes), nil
}

// rawFD reads a file descriptor with read(2), EINTR retried.
type rawFD int

func (fd rawFD) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(fd), p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		return n, nil
	}
}

// New counts the records r returns, one per Read (as /dev/kmsg returns
// them); r signals the end of what is there for now with io.EOF or EAGAIN.
func New(r io.Reader, classes []Class) *Counter {
	return &Counter{r: r, classes: classes, buf: make([]byte, recordSize), counts: make([]uint64, len(classes))}
}

// Scan reads every record available now and counts those of the classes.
// A record the kernel overwrote before it could be read (EPIPE) is counted
// in Lost, and reading goes on from the oldest record there is.
func (c *Counter) Scan() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		n, err := c.r.Read(c.buf)
		switch {
		case errors.Is(err, syscall.EPIPE):
			continue // the gap shows in the next record's sequence number
		case errors.Is(err, io.EOF), errors.Is(err, syscall.EAGAIN):
			return nil
		case err != nil:
			return fmt.Errorf("kernel log: %w", err)
		}
		c.record(c.buf[:n])
	}
}

// record counts one /dev/kmsg record: "prio,seq,usec,flags[,...];message"
// and, after a newline, the dictionary (" KEY=value" lines), ignored.
// Documentation/ABI/testing/dev-kmsg.
func (c *Counter) record(rec []byte) {
	head, msg, ok := bytes.Cut(rec, []byte{';'})
	if !ok {
		return
	}
	if i := bytes.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	fields := strings.SplitN(string(head), ",", 4)
	if len(fields) < 3 {
		return
	}
	seq, err1 := strconv.ParseUint(fields[1], 10, 64)
	usec, err2 := strconv.ParseUint(fields[2], 10, 64)
	if err1 != nil || err2 != nil {
		return
	}
	if c.nextSeq != 0 && seq > c.nextSeq {
		c.lost += seq - c.nextSeq
	}
	c.nextSeq = seq + 1
	// Only kernel records (facility 0): a program writing to /dev/kmsg
	// cannot make a hardware error.
	if prio, err := strconv.ParseUint(fields[0], 10, 32); err != nil || prio>>3 != 0 {
		return
	}
	m := string(msg)
	for i, cl := range c.classes {
		if !cl.Match(m) {
			continue
		}
		c.counts[i]++
		if len(m) > maxMessage {
			m = m[:maxMessage] + "..."
		}
		ev := Event{Class: cl.Name, Seconds: (time.Duration(usec) * time.Microsecond).Seconds(), Message: m}
		if len(c.last) == KeepLast {
			copy(c.last, c.last[1:])
			c.last = c.last[:KeepLast-1]
		}
		c.last = append(c.last, ev)
		return
	}
}

// Snapshot returns what the Counter has counted so far (without reading:
// call Scan first for what is new).
func (c *Counter) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Snapshot{Counts: make([]Count, len(c.classes)), Last: append([]Event(nil), c.last...), Lost: c.lost}
	for i, cl := range c.classes {
		s.Counts[i] = Count{Class: cl.Name, N: c.counts[i]}
	}
	return s
}

// String is the console's summary: "mce 2, aer 1 (last: ...)", or "none".
func (s Snapshot) String() string {
	var parts []string
	for _, c := range s.Counts {
		if c.N > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c.Class, c.N))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	out := strings.Join(parts, ", ")
	if n := len(s.Last); n > 0 {
		out += fmt.Sprintf(" (last at %.3f s: %s)", s.Last[n-1].Seconds, s.Last[n-1].Message)
	}
	return out
}
