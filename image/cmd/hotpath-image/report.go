package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/hotpath-dev/hotpath/image/attest"
	"github.com/hotpath-dev/hotpath/image/consolelog"
	"github.com/hotpath-dev/hotpath/image/manifest"
	"github.com/hotpath-dev/hotpath/init/report"
)

// errFailed makes `report` exit 1 when the log shows a failure, so a
// script can tell.
var errFailed = errors.New("the boot has failures")

// reportCmd turns a saved console log into a checklist on stdout.
func reportCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	manPath := fs.String("manifest", "", "the image's manifest.json: compare the PCRs the guest's TPM held with its reference values")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: hotpath-image report [-manifest manifest.json] <console.log | ->

Reads a saved serial console log of an appliance (the QEMU console file, or
'aws ec2 get-console-output --instance-id ID' as JSON or with --output text;
"-" reads standard input) and prints a checklist of the last boot in it: what
failed first, every boot step with its outcome, the facts of the boot report,
and the workload's events. Exits 1 when something failed. With -manifest,
the PCR 4 and 12 values the guest's TPM held (its boot report's tpm step) are
compared with the manifest's reference values, and any difference fails too.
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("one console log expected")
	}
	r := stdin
	if name := fs.Arg(0); name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	var saved bytes.Buffer
	if *manPath != "" {
		r = io.TeeReader(r, &saved)
	}
	l, err := consolelog.Read(r)
	if err != nil {
		return err
	}
	if err := l.WriteChecklist(stdout); err != nil {
		return err
	}
	_, failed := l.FirstFailure()
	if *manPath != "" {
		held, err := attestLog(&saved, *manPath, stdout)
		if err != nil {
			return err
		}
		failed = failed || !held
	}
	if failed {
		return errFailed
	}
	return nil
}

// attestLog compares the last boot report's TPM reading in a console log
// with the manifest's reference values.
func attestLog(log io.Reader, manPath string, stdout io.Writer) (bool, error) {
	m, err := manifest.ReadFile(manPath)
	if err != nil {
		return false, err
	}
	reps, _, err := report.Parse(log)
	if err != nil {
		return false, err
	}
	if len(reps) == 0 {
		return false, errors.New("no boot report in the log to compare with the manifest")
	}
	rs, err := attest.Compare(&reps[len(reps)-1], m)
	if err != nil {
		return false, err
	}
	fmt.Fprintf(stdout, "\nmeasured boot against %s:\n", manPath)
	return attest.Write(stdout, rs), nil
}
