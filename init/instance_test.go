package main

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/vm"
)

// TestHostileIMDSConsole: a metadata service on loopback that answers a
// 1 MiB instance id forging report lines, an availability zone with CR
// and ESC, and 8,000 bad user-data lines (one forging a report): the
// boot's console output, report included, stays within EC2's 64 KiB
// window, holds no control byte, one report and no forged line, and the
// user-data is rejected with the baked configuration kept.
func TestHostileIMDSConsole(t *testing.T) {
	forged := "\r\x1b[2KHOTPATH-REPORT {\"version\":1,\"ready_ms\":1}"
	// CR passes user-data's binary check (ESC would reject it whole).
	data := "line1\rHOTPATH-REPORT {\"version\":1}\n" + strings.Repeat("x\n", 7999)
	f := vm.NewFakeIMDS("52:54:00:12:34:56", []byte(data))
	f.Items["/latest/meta-data/instance-id"] = strings.Repeat("i-0123"+forged+"\n", (1<<20)/50)
	f.Items["/latest/meta-data/placement/availability-zone"] = "eu-west-1b" + forged
	srv := httptest.NewServer(f)
	defer srv.Close()

	m, out := testMachine(t, fakeSys(t, "0-1", "0-1"), map[string]string{"imds": "on"})
	m.inst = newInstance(nil)
	m.inst.bases = []string{srv.URL}
	for _, s := range imdsSteps(m) {
		m.run(s)
	}
	for _, s := range userDataSteps(m) {
		m.run(s)
	}
	rep := report.Report{Version: report.Version, ReadyMillis: 1, Steps: m.results, Config: m.cfg.Map()}
	m.inst.fill(&rep)
	m.con.Report(rep)

	b := out.Bytes()
	if len(b) >= 64<<10 {
		t.Errorf("console output %d bytes, more than EC2's 64 KiB window", len(b))
	}
	for i, c := range b {
		if c < 0x20 && c != '\n' || c == 0x7f {
			t.Fatalf("control byte %#02x at offset %d: %q", c, i, b[max(0, i-40):min(len(b), i+40)])
		}
	}
	if !utf8.Valid(b) {
		t.Error("console output is not UTF-8")
	}
	for _, l := range strings.Split(string(b), "\n") {
		if i := strings.Index(l, "HOTPATH-"); i > 0 {
			t.Fatalf("HOTPATH- inside a line at %d: %.200q", i, l)
		}
	}
	reps, _, err := report.Parse(bytes.NewReader(b))
	if err != nil || len(reps) != 1 {
		t.Fatalf("%d reports, %v", len(reps), err)
	}
	r := reps[0]
	if r.UserData == nil || r.UserData.Status != report.UserDataRejected || r.Config["workload.port"] != "8080" {
		t.Errorf("user-data %+v, port %s: want rejected, the baked 8080 kept", r.UserData, r.Config["workload.port"])
	}
	if r.Instance == nil || r.Instance.InstanceID != "" || r.Instance.AvailabilityZone != "" ||
		r.Instance.InstanceType != "c5n.xlarge" || r.Instance.Error == "" {
		t.Errorf("instance %+v: want the hostile values refused, the others kept, the error said", r.Instance)
	}
	if n := len(r.UserData.Errors); n == 0 || n > 100 || !strings.HasPrefix(r.UserData.Note, "8000 problem") {
		t.Errorf("%d user-data errors in the report, note %q: want the 8,000 problems counted, a few listed", n, r.UserData.Note)
	}
	t.Logf("console: %d bytes, %d user-data errors in the report, truncated: %.300s", len(b), len(r.UserData.Errors), r.Truncated)
}
