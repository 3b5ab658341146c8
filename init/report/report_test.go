package report

import (
	"strings"
	"testing"
)

func TestFormatParseRoundTrip(t *testing.T) {
	rep := Report{
		Version:     Version,
		Kernel:      "6.1.0",
		CPUs:        4,
		ReadyMillis: 812,
		Steps: []Step{
			{Name: "mounts", Status: Applied},
			{Name: "nic-coalesce", Status: Skipped, Reason: "driver has no coalesce support"},
			{Name: "nic-gro", Status: Failed, Error: "ethtool features eth0: operation not supported"},
		},
		Facts: Facts{PacketSockets: 0, NIC: &NIC{Name: "eth0", Qdisc: "mq", Children: []string{"noqueue"}}},
	}
	line, err := Format(ReportPrefix, rep)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := Format(EventPrefix, Event{Kind: EventExit, PID: 2, Detail: "exit status 3"})
	if err != nil {
		t.Fatal(err)
	}
	// Console output as a serial port delivers it: kernel noise, CRLF line
	// ends, and a kernel message glued in front of a line.
	console := "[    0.000000] Linux version 6.1\r\n" + string(line) +
		"[    1.2] random: crng init done\r\n" + "[  3.1] x " + string(ev)
	reps, evs, err := Parse(strings.NewReader(console))
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 || len(evs) != 1 {
		t.Fatalf("got %d reports, %d events; want 1, 1", len(reps), len(evs))
	}
	got := reps[0]
	if got.ReadyMillis != 812 || got.CPUs != 4 || got.Facts.NIC.Qdisc != "mq" {
		t.Errorf("report did not round-trip: %+v", got)
	}
	if s, ok := got.Step("nic-coalesce"); !ok || s.Status != Skipped || s.Reason == "" {
		t.Errorf("Step(nic-coalesce) = %+v, %v", s, ok)
	}
	if _, ok := got.Step("absent"); ok {
		t.Error("Step(absent) found a step")
	}
	if evs[0].Kind != EventExit || evs[0].PID != 2 {
		t.Errorf("event did not round-trip: %+v", evs[0])
	}
}

func TestParseRejectsTruncatedReport(t *testing.T) {
	_, _, err := Parse(strings.NewReader(ReportPrefix + `{"version":1,"steps":[` + "\n"))
	if err == nil {
		t.Fatal("a truncated report parsed without error")
	}
}
