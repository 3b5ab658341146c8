package main

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestReportCmd(t *testing.T) {
	const log = "../../consolelog/testdata/obs-boot.log"
	var out, errOut strings.Builder
	err := reportCmd([]string{log}, nil, &out, &errOut)
	if !errors.Is(err, errFailed) {
		t.Errorf("a log with a failed workload exit: %v", err)
	}
	if !strings.Contains(out.String(), "FIRST FAILURE") || !strings.Contains(out.String(), "steps: 25 applied") {
		t.Errorf("output:\n%s", out.String())
	}
	// Standard input, and a clean boot: the log cut before the exit.
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	clean := string(b[:strings.Index(string(b), "exiter: exiting")])
	out.Reset()
	if err := reportCmd([]string{"-"}, strings.NewReader(clean), &out, &errOut); err != nil {
		t.Errorf("clean boot: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "no failure") {
		t.Errorf("clean boot output:\n%s", out.String())
	}
	if err := reportCmd(nil, nil, &out, &errOut); err == nil {
		t.Error("no argument accepted")
	}
}
