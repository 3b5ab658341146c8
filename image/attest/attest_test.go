package attest_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/image/attest"
	"github.com/hotpath-dev/hotpath/image/manifest"
	"github.com/hotpath-dev/hotpath/init/report"
)

func TestCompare(t *testing.T) {
	m := &manifest.Manifest{Measurements: []manifest.Measurement{{PCR: 4, SHA256: "aa", SHA384: "bb"}}}
	step := func(d map[string]string) *report.Report {
		return &report.Report{Steps: []report.Step{{Name: "tpm", Status: report.Applied, Detail: d}}}
	}
	for _, tc := range []struct {
		name   string
		rep    *report.Report
		ok     bool
		errSub string
	}{
		{"held", step(map[string]string{"pcr4.sha256": "aa", "pcr4.sha384": "bb"}), true, ""},
		{"another image", step(map[string]string{"pcr4.sha256": "aa", "pcr4.sha384": "cc"}), false, ""},
		{"bank missing", step(map[string]string{"pcr4.sha256": "aa"}), false, ""},
		{"no tpm step", &report.Report{}, false, "no tpm step"},
		{"no TPM", &report.Report{Steps: []report.Step{{Name: "tpm", Status: report.Skipped, Reason: "no TPM"}}}, false, "skipped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := attest.Compare(tc.rep, m)
			if tc.errSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errSub) {
					t.Fatalf("Compare error %v, want %q", err, tc.errSub)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if got := attest.Write(&out, rs); got != tc.ok {
				t.Errorf("Write = %v, want %v\n%s", got, tc.ok, out.String())
			}
		})
	}
}
