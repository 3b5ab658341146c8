package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/hotpath-dev/hotpath/image/consolelog"
)

// errFailed makes `report` exit 1 when the log shows a failure, so a
// script can tell.
var errFailed = errors.New("the boot has failures")

// reportCmd turns a saved console log into a checklist on stdout.
func reportCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: hotpath-image report <console.log | ->

Reads a saved serial console log of an appliance (the QEMU console file, or
'aws ec2 get-console-output --instance-id ID' as JSON or with --output text;
"-" reads standard input) and prints a checklist of the last boot in it: what
failed first, every boot step with its outcome, the facts of the boot report,
and the workload's events. Exits 1 when something failed.
`)
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
	l, err := consolelog.Read(r)
	if err != nil {
		return err
	}
	if err := l.WriteChecklist(stdout); err != nil {
		return err
	}
	if _, failed := l.FirstFailure(); failed {
		return errFailed
	}
	return nil
}
