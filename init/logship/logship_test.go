package logship

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/hotpath-dev/hotpath/tests/vm"
	"github.com/leodido/go-syslog/v4/rfc5424"
)

func TestParseRemote(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Remote
		ok   bool
	}{
		{"udp://10.0.0.1:514", Remote{"udp", "10.0.0.1:514"}, true},
		{"tcp://logs.example:6514", Remote{"tcp", "logs.example:6514"}, true},
		{"tcp://[fd00::1]:514", Remote{"tcp", "[fd00::1]:514"}, true},
		{"udp://10.0.0.1", Remote{}, false},
		{"http://10.0.0.1:514", Remote{}, false},
		{"tcp://:514", Remote{}, false},
		{"tcp://h:0", Remote{}, false},
		{"tcp://h:99999", Remote{}, false},
		{"tcp://h:514/x", Remote{}, false},
		{"10.0.0.1:514", Remote{}, false},
	} {
		got, err := ParseRemote(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseRemote(%q) = %+v, %v", tc.in, got, err)
		}
	}
}

// The format is checked with an independent RFC 5424 parser.
func TestAppendRFC5424(t *testing.T) {
	ts := time.Date(2026, 11, 30, 14, 35, 31, 123456789, time.FixedZone("x", 3600))
	for _, tc := range []struct {
		m    Message
		host string
		want string
	}{
		{Message{Time: ts, Facility: FacilityDaemon, Severity: SeverityNotice, App: "hotpath-init", ProcID: "1", MsgID: "event", Text: `HOTPATH-EVENT {"kind":"workload-start"}`},
			"10.77.0.2", `<29>1 2026-11-30T13:35:31.123456Z 10.77.0.2 hotpath-init 1 event - HOTPATH-EVENT {"kind":"workload-start"}`},
		{Message{Time: ts, Facility: FacilityUser, Severity: SeverityInfo, App: "workload", MsgID: "stdout", Text: "ready"},
			"", `<14>1 2026-11-30T13:35:31.123456Z - workload - stdout - ready`},
		// Header fields: no spaces or control characters, RFC lengths.
		{Message{Time: ts, Facility: 99, Severity: 42, App: "my app\x01" + strings.Repeat("a", 60), Text: ""},
			"h h", `<14>1 2026-11-30T13:35:31.123456Z h_h my_app_` + strings.Repeat("a", 41) + ` - - -`},
	} {
		got := string(AppendRFC5424(nil, &tc.m, tc.host))
		if got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
			continue
		}
		m, err := rfc5424.NewParser(rfc5424.WithCompliantMsg()).Parse([]byte(got))
		if err != nil {
			t.Errorf("%s: not RFC 5424: %v", got, err)
			continue
		}
		sm := m.(*rfc5424.SyslogMessage)
		if sm.Timestamp == nil || !sm.Timestamp.Equal(ts.Truncate(time.Microsecond)) {
			t.Errorf("%s: timestamp %v", got, sm.Timestamp)
		}
		if tc.m.Text != "" && (sm.Message == nil || *sm.Message != tc.m.Text) {
			t.Errorf("%s: message %v", got, sm.Message)
		}
	}
}

func receiver(t *testing.T) *vm.Syslog {
	t.Helper()
	r, err := vm.ListenSyslog("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func run(t *testing.T, s *Shipper) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func waitAll(t *testing.T, r *vm.Syslog, n int) []vm.SyslogMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	count := 0
	if _, err := r.Wait(ctx, func(vm.SyslogMessage) bool { count++; return count >= n }); err != nil {
		t.Fatalf("%d of %d messages: %v", len(r.Messages()), n, err)
	}
	if errs := r.Errors(); len(errs) > 0 {
		t.Fatalf("malformed: %v", errs)
	}
	return r.Messages()
}

// Over both transports every message arrives in order and parses, a
// multi-line message included (octet counting carries it whole over TCP).
func TestShipTransports(t *testing.T) {
	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			r := receiver(t)
			s := New(Config{Remote: Remote{network, r.Addr}, Hostname: func() string { return "appliance" }})
			run(t, s)
			const n = 200
			for i := 0; i < n; i++ {
				s.Send(Message{Facility: FacilityUser, Severity: SeverityInfo, App: "workload", ProcID: "2", MsgID: "stdout",
					Text: fmt.Sprintf("line %d\nsecond line", i)})
			}
			msgs := waitAll(t, r, n)
			for i, m := range msgs {
				if m.Network != network || m.Text() != fmt.Sprintf("line %d\nsecond line", i) || m.App() != "workload" ||
					*m.Hostname != "appliance" || m.ID() != "stdout" || *m.ProcID != "2" || *m.Priority != 14 {
					t.Fatalf("message %d: %+v %q", i, m.Base, m.Text())
				}
			}
			waitStats(t, s, func(st Stats) bool { return st.Sent == n && st.Dropped == 0 && st.QueuedBytes == 0 && st.Connected })
		})
	}
}

// Send never waits for the network: with no collector the buffer fills to
// its budget and every further message is dropped and counted. When the
// collector appears, the buffered (oldest) messages arrive.
func TestShipBufferBound(t *testing.T) {
	// A port with nothing listening yet.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	const budget = 16 << 10
	s := New(Config{Remote: Remote{"tcp", addr}, Buffer: budget, BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
	run(t, s)
	text := strings.Repeat("x", 100)
	per := cost(&Message{App: "a", Text: text})
	const sent = 2000
	for i := 0; i < sent; i++ {
		s.Send(Message{App: "a", Text: text})
	}
	st := s.Stats()
	kept := budget / per
	if st.QueuedBytes > budget || int(st.Dropped) != sent-kept || st.Sent != 0 || st.Connected {
		t.Fatalf("stats %+v, want %d kept of %d within %d bytes", st, kept, sent, budget)
	}
	r, err := vm.ListenSyslog(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	msgs := waitAll(t, r, kept)
	if len(msgs) != kept {
		t.Errorf("%d messages arrived, %d were kept", len(msgs), kept)
	}
	waitStats(t, s, func(st Stats) bool { return st.Sent == uint64(kept) && st.QueuedBytes == 0 })
}

// A TCP collector that drops the connection gets a new one, and what is
// sent afterwards arrives.
func TestShipReconnect(t *testing.T) {
	r := receiver(t)
	var logs []string
	var mu sync.Mutex
	s := New(Config{Remote: Remote{"tcp", r.Addr}, BackoffMin: 10 * time.Millisecond,
		Logf: func(f string, a ...any) { mu.Lock(); logs = append(logs, fmt.Sprintf(f, a...)); mu.Unlock() }})
	run(t, s)
	s.Send(Message{App: "a", Text: "before"})
	waitAll(t, r, 1)
	for round := 0; round < 3; round++ {
		r.DropConnections()
		// The shipper learns of the close on a write; keep sending until
		// a message after the drop arrives on a new connection.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		want := fmt.Sprintf("after drop %d", round)
		go func() {
			for ctx.Err() == nil {
				s.Send(Message{App: "a", Text: want})
				time.Sleep(20 * time.Millisecond)
			}
		}()
		_, err := r.WaitText(ctx, want)
		cancel()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	if n := r.Accepted(); n < 4 {
		t.Errorf("%d connections accepted, want a new one per drop", n)
	}
	if errs := r.Errors(); len(errs) > 0 {
		t.Errorf("malformed: %v", errs)
	}
}

// Over UDP a message is cut to MaxUDPMessage and counted.
func TestShipTruncate(t *testing.T) {
	r := receiver(t)
	s := New(Config{Remote: Remote{"udp", r.Addr}})
	run(t, s)
	s.Send(Message{App: "a", Text: strings.Repeat("y", 3*MaxUDPMessage)})
	s.Send(Message{App: "a", Text: "short"})
	msgs := waitAll(t, r, 2)
	if l := len(AppendRFC5424(nil, &Message{App: "a", Time: time.Now()}, "-")) + len(msgs[0].Text()) + 1; l != MaxUDPMessage {
		t.Errorf("long message is %d bytes, want %d", l, MaxUDPMessage)
	}
	waitStats(t, s, func(st Stats) bool { return st.Truncated == 1 && st.Sent == 2 })
}

// waitStats waits for the shipper's counters to satisfy ok: a message
// can reach the collector before the shipper has counted it.
func waitStats(t *testing.T, s *Shipper, ok func(Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok(s.Stats()) {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", s.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCopy(t *testing.T) {
	var console strings.Builder
	var lines []string
	in := "one\r\ntwo\n\n" + strings.Repeat("z", maxLine+10) + "\nlast without newline"
	// One byte per read: lines are put together across reads.
	if err := Copy(&console, iotest.OneByteReader(strings.NewReader(in)), func(s string) { lines = append(lines, s) }); err != nil {
		t.Fatal(err)
	}
	if console.String() != in {
		t.Error("the console did not get the output unchanged")
	}
	want := []string{"one", "two", strings.Repeat("z", maxLine), strings.Repeat("z", 10), "last without newline"}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("lines %d: %.80q", len(lines), lines)
	}
}

func TestLineWriter(t *testing.T) {
	var console strings.Builder
	var lines []string
	w := &LineWriter{Out: &console, Line: func(s string) { lines = append(lines, s) }}
	for _, p := range []string{"hotpath-init: a\n", "\nHOTPATH-EVENT {}\n", "par", "tial\n", "x"} {
		io.WriteString(w, p)
	}
	if console.String() != "hotpath-init: a\n\nHOTPATH-EVENT {}\npartial\nx" {
		t.Errorf("console %q", console.String())
	}
	if fmt.Sprint(lines) != "[hotpath-init: a HOTPATH-EVENT {} partial]" {
		t.Errorf("lines %q", lines)
	}
}

func TestInitMessage(t *testing.T) {
	for _, tc := range []struct {
		line     string
		ok       bool
		id, text string
		sev      int
	}{
		{"hotpath-init: step nic-gro: applied map[]", true, "log", "step nic-gro: applied map[]", SeverityInfo},
		{"hotpath-init: step net: FAILED: dhcp", true, "log", "step net: FAILED: dhcp", SeverityErr},
		{"hotpath-init: PANIC in init: boom", true, "log", "PANIC in init: boom", SeverityCrit},
		{`HOTPATH-EVENT {"kind":"crash-loop"}`, true, "event", `HOTPATH-EVENT {"kind":"crash-loop"}`, SeverityWarning},
		{`workload echoes HOTPATH-EVENT {"kind":"crash-loop"}`, false, "", "", 0},
		{`x HOTPATH-REPORT {"version":1}`, false, "", "", 0},
		{`HOTPATH-EVENT {"kind":"workload-exit"}`, true, "event", `HOTPATH-EVENT {"kind":"workload-exit"}`, SeverityNotice},
		{`HOTPATH-REPORT {"version":1}`, true, "report", `HOTPATH-REPORT {"version":1}`, SeverityNotice},
		{"[    0.5] virtio_net virtio2: something", false, "", "", 0},
	} {
		m, ok := InitMessage(tc.line)
		if ok != tc.ok || m.MsgID != tc.id || m.Text != tc.text || (ok && (m.Severity != tc.sev || m.App != Init || m.Facility != FacilityDaemon)) {
			t.Errorf("%q: %+v %v", tc.line, m, ok)
		}
	}
}

// Send costs the caller no wait and, once the buffer's slice has grown,
// no allocation beyond the message itself.
func BenchmarkSend(b *testing.B) {
	s := New(Config{Remote: Remote{"udp", "127.0.0.1:9"}, Buffer: 1 << 30})
	m := Message{App: "workload", MsgID: "stdout", Text: "GET /json 200 12us", Time: time.Now()}
	b.ReportAllocs()
	for b.Loop() {
		s.Send(m)
	}
}
