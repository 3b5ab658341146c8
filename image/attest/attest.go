// Package attest compares what a booted appliance's TPM holds, as its boot
// report says (init/tpm's step), with the reference values in the image's
// manifest: the check a key service makes before it releases a secret,
// done by hand on a console log.
package attest

import (
	"errors"
	"fmt"
	"io"

	"github.com/hotpath-dev/hotpath/image/manifest"
	"github.com/hotpath-dev/hotpath/init/report"
)

// StepName is the init's TPM step (init/tpm.StepName; not imported, so
// that the image builder does not link the init's packages).
const StepName = "tpm"

// Result is one PCR in one bank.
type Result struct {
	PCR  int
	Bank string
	Want string // the manifest's reference
	Got  string // what the TPM held, as the guest reported it
}

// OK reports whether the TPM held the reference value.
func (r Result) OK() bool { return r.Want != "" && r.Want == r.Got }

// Compare returns one result per reference value of m. It fails when the
// report has no TPM reading to compare (no TPM, or the step failed).
func Compare(rep *report.Report, m *manifest.Manifest) ([]Result, error) {
	s, ok := rep.Step(StepName)
	if !ok {
		return nil, errors.New("attest: the boot report has no tpm step (an init without init/tpm)")
	}
	if s.Status != report.Applied {
		return nil, fmt.Errorf("attest: tpm step %s: %s%s", s.Status, s.Reason, s.Error)
	}
	if len(m.Measurements) == 0 {
		return nil, errors.New("attest: the manifest has no reference measurements")
	}
	var out []Result
	for _, ms := range m.Measurements {
		for _, b := range []struct{ bank, want string }{{"sha256", ms.SHA256}, {"sha384", ms.SHA384}} {
			out = append(out, Result{PCR: ms.PCR, Bank: b.bank, Want: b.want, Got: s.Detail[fmt.Sprintf("pcr%d.%s", ms.PCR, b.bank)]})
		}
	}
	return out, nil
}

// Write prints the results, one line each, and returns whether all held.
func Write(w io.Writer, rs []Result) bool {
	all := true
	for _, r := range rs {
		mark := "ok  "
		if !r.OK() {
			mark, all = "FAIL", false
		}
		fmt.Fprintf(w, "%s pcr%d %s: tpm %s, manifest %s\n", mark, r.PCR, r.Bank, orNone(r.Got), orNone(r.Want))
	}
	return all
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
