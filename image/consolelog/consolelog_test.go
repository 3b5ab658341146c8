package consolelog

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/report"
)

// testdata/obs-boot.log is the console of a real boot (tests/e2e TestObs,
// 2 vCPUs under TCG, saved with -e2e.save-console): the exiter workload is
// made to exit with status 3, restarts, and the guest is powered off.
const recorded = "testdata/obs-boot.log"

func readRecorded(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(recorded)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func parse(t *testing.T, s string) *Log {
	t.Helper()
	l, err := Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestRecordedBoot(t *testing.T) {
	text := readRecorded(t)
	l := parse(t, text)
	if l.Boots != 1 || l.Truncated || !strings.HasPrefix(l.Kernel, "Linux version 6.1.") {
		t.Errorf("boots %d truncated %v kernel %q", l.Boots, l.Truncated, l.Kernel)
	}
	if l.Report == nil || l.Report.ReadyMillis <= 0 {
		t.Fatalf("report %+v", l.Report)
	}
	if len(l.Steps) != len(l.Report.Steps) || len(l.Steps) < 20 {
		t.Errorf("%d steps, report has %d", len(l.Steps), len(l.Report.Steps))
	}
	for _, s := range l.Steps {
		// Every step has both its log line and its report entry.
		if s.Line == 0 || s.Status == report.Failed || (s.Status == report.Skipped && s.Why == "") {
			t.Errorf("step %+v", s)
		}
	}
	var kinds []string
	for _, e := range l.Events {
		kinds = append(kinds, e.Kind)
	}
	want := "workload-start workload-ready workload-exit workload-restart workload-start workload-ready shutdown workload-exit poweroff"
	if strings.Join(kinds, " ") != want {
		t.Errorf("events %v", kinds)
	}
	// The requested exit (status 3) is the one failure; the exit 0 after
	// the shutdown is not one.
	f, ok := l.FirstFailure()
	if !ok || len(l.Problems) != 1 || !strings.Contains(f.What, "exit status 3") || f.Line != l.Events[2].Line {
		t.Errorf("problems %+v", l.Problems)
	}
	var out strings.Builder
	if err := l.WriteChecklist(&out); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{
		"FIRST FAILURE (console line " + fmt.Sprint(f.Line) + "): workload pid",
		"[-]  nic-coalesce", "[x]  net-dhcp", "steps: 25 applied, 1 skipped, 0 failed",
		"nic: eth0 (virtio_net) 10.77.0.2/24, valid_lft forever", "qdisc mq [noqueue noqueue]",
		"workload-restart back-off 3000 ms",
	} {
		if !strings.Contains(out.String(), sub) {
			t.Errorf("checklist lacks %q:\n%s", sub, out.String())
		}
	}
}

// get-console-output as the AWS CLI prints it (JSON, text decoded) and as
// the raw API returns it (base64) reads the same as the text.
func TestEC2Output(t *testing.T) {
	text := readRecorded(t)
	want := parse(t, text)
	for name, output := range map[string]string{"cli": text, "api": base64.StdEncoding.EncodeToString([]byte(text))} {
		b, _ := json.Marshal(map[string]string{"InstanceId": "i-0123456789abcdef0", "Output": output, "Timestamp": "2026-11-30T14:58:00Z"})
		got := parse(t, string(b))
		if got.Report == nil || len(got.Steps) != len(want.Steps) || len(got.Events) != len(want.Events) || len(got.Problems) != len(want.Problems) {
			t.Errorf("%s: %d steps %d events %d problems, want %d %d %d", name, len(got.Steps), len(got.Events), len(got.Problems),
				len(want.Steps), len(want.Events), len(want.Problems))
		}
	}
}

// EC2 keeps the last 64 KiB: without the kernel's first lines and the step
// lines, the report alone still gives every step.
func TestTruncated(t *testing.T) {
	text := readRecorded(t)
	i := strings.Index(text, "hotpath-init: step net-dhcp")
	l := parse(t, text[i+10:])
	if !l.Truncated || l.Report == nil || len(l.Steps) != len(l.Report.Steps) {
		t.Fatalf("truncated %v, %d steps", l.Truncated, len(l.Steps))
	}
	if l.Steps[0].Line != 0 {
		t.Errorf("a step whose line was cut off has line %d", l.Steps[0].Line)
	}
	var out strings.Builder
	l.WriteChecklist(&out)
	if !strings.Contains(out.String(), "the log starts mid-boot") {
		t.Errorf("no truncation note:\n%s", out.String())
	}
}

// A boot that fails: a step fails, the workload never gets ready, the
// kernel then panics. The first failure is the step; the rest follow in
// console order.
func TestFailedBoot(t *testing.T) {
	text := readRecorded(t)
	text = text[:strings.Index(text, "hotpath-init: step log-shipping")]
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "hotpath-init: step nic-qdisc:") {
			lines[i] = "hotpath-init: step nic-qdisc: FAILED: replace root qdisc: operation not supported"
		}
		if strings.HasPrefix(l, "hotpath-init: step net-dhcp:") {
			lines[i] = "hotpath-init: step net-dhcp: FAILED: dhcp: no lease after 5 attempts"
		}
	}
	text = strings.Join(lines, "\n") + "\n[   61.2] Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000100\n"
	l := parse(t, text)
	if l.Report != nil {
		t.Fatal("a report in a log cut before it")
	}
	var got []string
	for _, p := range l.Problems {
		got = append(got, p.What)
	}
	if len(got) != 4 || !strings.HasPrefix(got[0], "step nic-qdisc failed: replace root qdisc") ||
		!strings.HasPrefix(got[1], "step net-dhcp failed: dhcp: no lease") || !strings.HasPrefix(got[2], "kernel: [   61.2] Kernel panic") ||
		!strings.HasPrefix(got[3], "no boot report") {
		t.Errorf("problems:\n%s", strings.Join(got, "\n"))
	}
	var out strings.Builder
	l.WriteChecklist(&out)
	if !strings.Contains(out.String(), "FIRST FAILURE (console line") || !strings.Contains(out.String(), "[!]  nic-qdisc") {
		t.Errorf("checklist:\n%s", out.String())
	}
}

// Two boots in one file (a reboot): the checklist is about the last one.
func TestLastBoot(t *testing.T) {
	text := readRecorded(t)
	crash := "Linux version 6.1.192 (first boot)\nhotpath-init: step mounts: FAILED: boom\nHOTPATH-EVENT {\"kind\":\"crash-loop\",\"ms\":1,\"exits\":5}\n"
	l := parse(t, crash+text)
	if l.Boots != 2 || l.Report == nil || len(l.Problems) != 1 {
		t.Errorf("boots %d, problems %+v", l.Boots, l.Problems)
	}
	l = parse(t, crash)
	if len(l.Problems) != 3 || !strings.Contains(l.Problems[1].What, "crash loop: 5 exits") {
		t.Errorf("problems %+v", l.Problems)
	}
}

// TestProblemLines: what a console line says went wrong, or nothing.
func TestProblemLines(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`HOTPATH-EVENT {"kind":"workload-unresponsive","ms":9,"pid":57,"detail":"5 liveness probes failed, last: timeout; SIGKILL"}`,
			"workload pid 57 stopped answering the liveness probe: 5 liveness probes failed"},
		{`HOTPATH-EVENT {"kind":"workload-exit","ms":9,"pid":57,"detail":"signal: killed"}`, "workload pid 57 exited: signal: killed"},
		{"hotpath-init: NOT READY: workload did not accept on 127.0.0.1:8080 within 30s", "init: NOT READY: workload did not accept"},
		{"hotpath-init: user-data REJECTED (bad lines): line 1: unknown key", "init: user-data REJECTED"},
		{"hotpath-init: PANIC in reaper: boom", "init: PANIC in reaper"},
		{"hotpath-init: ready in 1950 ms after kernel start", ""},
		{`HOTPATH-EVENT {"kind":"workload-ready","ms":9,"pid":57}`, ""},
	} {
		l := parse(t, tc.line+"\n")
		var got string
		for _, p := range l.Problems {
			if !strings.HasPrefix(p.What, "no boot report") {
				got = p.What
			}
		}
		if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.line, got, tc.want)
		}
	}
}
