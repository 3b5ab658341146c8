package kernlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
)

// records returns its records one per Read, as /dev/kmsg does; an error
// in the list is returned in its turn; then EAGAIN.
type records struct{ items []any }

func (r *records) Read(p []byte) (int, error) {
	if len(r.items) == 0 {
		return 0, syscall.EAGAIN
	}
	it := r.items[0]
	r.items = r.items[1:]
	if err, ok := it.(error); ok {
		return 0, err
	}
	return copy(p, it.(string)), nil
}

// Lines as Linux 6.12 prints them (the format strings cited in
// HardwareErrors), each in a /dev/kmsg record of the kernel facility.
func TestHardwareErrorClasses(t *testing.T) {
	for _, tc := range []struct {
		msg   string
		class string // "" = not counted
	}{
		{"mce: [Hardware Error]: CPU 3: Machine Check: 0 Bank 7: cc00008000010090", "mce"},
		{"mce: [Hardware Error]: CPU 0: Machine Check Exception: 5 Bank 1: b200000000000000", "mce"},
		{"mce: [Hardware Error]: TSC 0 ADDR 1234 MISC 8c", ""},
		{"mce: [Hardware Error]: PROCESSOR 0:306a9 TIME 1733400000 SOCKET 0 APIC 0 microcode 21", ""},
		{"mce: [Hardware Error]: Machine check events logged", ""},
		{"mce: [Hardware Error]: Machine check: Processor context corrupt", ""},
		{"mce: CPU0: Thermal monitoring enabled (TM1)", ""},
		{"{1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 0", "ghes"},
		{"{1}[Hardware Error]: event severity: corrected", ""},
		{"{1}[Hardware Error]:  section_type: memory error", ""},
		{"pcieport 0000:00:1c.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)", "aer"},
		{"pcieport 0000:00:1c.0: AER:   device [8086:a110] error status/mask=00000001/00002000", ""},
		{"pcieport 0000:00:1c.0: AER: Corrected error message received from 0000:01:00.0", ""},
		{"Memory failure: 0x12345: recovery action for dirty LRU page: Recovered", "memory_failure"},
		{"Memory failure: 0x12345: already hardware poisoned", ""},
		{"HEST: Table not found.", ""},
		{"GHES: APEI firmware first mode is enabled by APEI bit.", ""},
		{"virtio_net virtio0 eth0: renamed", ""},
	} {
		c := New(&records{items: []any{"0,1,1000,-;" + tc.msg + "\n"}}, HardwareErrors)
		if err := c.Scan(); err != nil {
			t.Fatal(err)
		}
		s := c.Snapshot()
		got := ""
		for _, n := range s.Counts {
			if n.N > 0 {
				got += n.Class
			}
		}
		if got != tc.class {
			t.Errorf("%q: counted as %q, want %q", tc.msg, got, tc.class)
		}
		if len(s.Counts) != len(HardwareErrors) {
			t.Errorf("%d counts for %d classes (zero counts must be there for rate())", len(s.Counts), len(HardwareErrors))
		}
	}
}

// Sequence gaps count as lost records; EPIPE does not stop the scan; a
// record of another facility (a program writing to /dev/kmsg) is not a
// hardware error; the dictionary after the message is not part of it;
// the last events are kept in order and bounded.
func TestScan(t *testing.T) {
	mce := func(seq, cpu int) string {
		return fmt.Sprintf("0,%d,%d,-;mce: [Hardware Error]: CPU %d: Machine Check: 0 Bank 7: cc00008000010090\n SUBSYSTEM=machinecheck\n", seq, seq*1000, cpu)
	}
	r := &records{items: []any{
		"6,1,10,-;Linux version 6.12.118\n",
		mce(2, 0),
		syscall.EPIPE,
		mce(5, 1), // 3 and 4 overwritten
		"14,6,600,-;mce: [Hardware Error]: CPU 9: Machine Check: forged by a program\n", // facility 1 (user)
		"3,7,7000,-;pcieport 0000:00:1c.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)\n",
		"garbage without a separator",
		"x,y,z;not a header\n",
	}}
	c := New(r, HardwareErrors)
	if err := c.Scan(); err != nil {
		t.Fatal(err)
	}
	s := c.Snapshot()
	if got := s.String(); !strings.HasPrefix(got, "mce 2, aer 1 (last at 0.007 s: pcieport") {
		t.Errorf("summary %q", got)
	}
	if s.Lost != 2 || s.Total() != 3 || len(s.Last) != 3 {
		t.Fatalf("lost %d, total %d, last %d; want 2, 3, 3: %+v", s.Lost, s.Total(), len(s.Last), s)
	}
	if s.Last[0].Seconds != 0.002 || s.Last[1].Message != "mce: [Hardware Error]: CPU 1: Machine Check: 0 Bank 7: cc00008000010090" {
		t.Errorf("last: %+v", s.Last)
	}
	// A second scan reads only what is new.
	r.items = []any{mce(8, 2)}
	for i := 9; i < 9+KeepLast; i++ {
		r.items = append(r.items, mce(i, i))
	}
	r.items = append(r.items, "0,"+fmt.Sprint(9+KeepLast)+",1,-;mce: [Hardware Error]: CPU 1: Machine Check: "+strings.Repeat("x", 2*maxMessage)+"\n")
	if err := c.Scan(); err != nil {
		t.Fatal(err)
	}
	s = c.Snapshot()
	if s.Counts[0].N != 2+1+KeepLast+1 || s.Lost != 2 || len(s.Last) != KeepLast {
		t.Errorf("after the second scan: %+v", s)
	}
	if m := s.Last[KeepLast-1].Message; len(m) != maxMessage+3 || !strings.HasSuffix(m, "...") {
		t.Errorf("a long message kept as %d bytes", len(m))
	}
	if s.Last[0].Message != "mce: [Hardware Error]: CPU 10: Machine Check: 0 Bank 7: cc00008000010090" {
		t.Errorf("oldest kept: %q", s.Last[0].Message)
	}
	// An error other than the end is returned.
	r.items = []any{errors.New("disk on fire")}
	if err := c.Scan(); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("scan error %v", err)
	}
	r.items = []any{io.EOF}
	if err := c.Scan(); err != nil {
		t.Errorf("EOF: %v", err)
	}
}

// On this machine's own kernel log: Open reads non-blocking to the end
// (a blocking read would hang the scrape), and a line a program writes
// that looks like a machine check is not counted.
func TestRealKmsg(t *testing.T) {
	if _, err := os.Stat("/dev/kmsg"); err != nil {
		t.Skip("no /dev/kmsg here")
	}
	c, err := Open("/dev/kmsg", HardwareErrors)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Scan(); err != nil {
		t.Fatal(err)
	}
	before := c.Snapshot().Total()
	w, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("cannot write the kernel log: %v", err)
	}
	fmt.Fprintf(w, "<11>mce: [Hardware Error]: CPU 0: Machine Check: 0 Bank 0: 0 (hotpath kernlog test, not real)\n")
	w.Close()
	if err := c.Scan(); err != nil {
		t.Fatal(err)
	}
	if after := c.Snapshot().Total(); after != before {
		t.Errorf("a program's line counted: %d -> %d", before, after)
	}
	if c.nextSeq == 0 {
		t.Error("no record read from /dev/kmsg")
	}
}
