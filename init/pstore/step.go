package pstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/report"
	"golang.org/x/sys/unix"
)

// StepName is the crash capture's step in the boot report.
const StepName = "previous-boot"

// ConsolePrefix starts each of the previous boot's kernel lines the step
// prints on the console, so that a reader (or a test) tells them from
// this boot's own.
const ConsolePrefix = "previous boot| "

// Capture is the crash-capture step's configuration.
type Capture struct {
	Dir     string // where pstore is (or gets) mounted: Dir
	SysRoot string // "/sys": the pstore module's parameters
	// Mount mounts the pstore file system on Dir; nil is the kernel's
	// mount(2). Tests give a directory of files instead.
	Mount func(dir string) error
	// Logf prints on the console.
	Logf func(format string, args ...any)
	// Lines is how many of the dump's lines go into the report: from ten
	// lines before its headline (Dump.Headline) on; 0 means 40. The
	// console gets the whole dump (at most pstore's kmsg_bytes, 10 KiB).
	Lines int
	// Out receives the summary for the boot report.
	Out *report.PreviousBoot
}

// MountKernel mounts the pstore file system on dir; one already mounted
// there is fine.
func MountKernel(dir string) error {
	err := unix.Mount("pstore", dir, "pstore", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	if errors.Is(err, unix.EBUSY) {
		return nil
	}
	return err
}

// Step mounts pstore, reads what the previous boot left, prints and
// summarises it, and removes it. A machine without pstore or without a
// backend skips; a record that cannot be removed fails the step in verify
// (it would be reported again by the next boot).
func (c Capture) Step() boot.Step {
	var recs []Record
	return boot.Step{Name: StepName, Apply: func(_ context.Context, d boot.Detail) error {
		recs = nil
		mount := c.Mount
		if mount == nil {
			mount = MountKernel
		}
		if err := mount(c.Dir); err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
				return boot.Skip("no pstore file system (kernel without CONFIG_PSTORE): %v", err)
			}
			return fmt.Errorf("mount pstore on %s: %w", c.Dir, err)
		}
		backend := c.backend()
		d["backend"] = backend
		var err error
		recs, err = Read(c.Dir)
		if err != nil {
			return err
		}
		*c.Out = c.summarise(recs, backend)
		d["records"] = strconv.Itoa(len(recs))
		if backend == "" && len(recs) == 0 {
			return boot.Skip("no pstore backend (kernel without EFI_VARS_PSTORE, or firmware without writable variables): " +
				"a panic would leave nothing")
		}
		if c.Out.Crashed {
			d["reason"], d["summary"] = c.Out.Reason, c.Out.Summary
		}
		c.print(recs)
		if err := Clear(c.Dir, recs); err != nil {
			c.Out.ClearError = err.Error()
			return fmt.Errorf("clear: %w", err)
		}
		c.Out.Cleared = true
		return nil
	}, Verify: func(context.Context, boot.Detail) error {
		left, err := Read(c.Dir)
		if err != nil {
			return err
		}
		for _, r := range left {
			for _, old := range recs {
				if r.Name == old.Name {
					return fmt.Errorf("%s still in %s after removal", r.Name, c.Dir)
				}
			}
		}
		return nil
	}}
}

// backend is the registered pstore backend ("efi_pstore"), "" if none.
func (c Capture) backend() string {
	b, err := os.ReadFile(filepath.Join(c.SysRoot, "module/pstore/parameters/backend"))
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(b))
	if s == "(null)" {
		return ""
	}
	return s
}

func (c Capture) summarise(recs []Record, backend string) report.PreviousBoot {
	pb := report.PreviousBoot{Records: len(recs), Backend: backend}
	for _, r := range recs {
		if pb.Backend == "" && r.Backend != "" {
			pb.Backend = r.Backend
		}
	}
	d, ok := Worst(Dumps(recs))
	if !ok {
		return pb
	}
	pb.Crashed = true
	pb.Reason = strings.ToLower(d.Reason)
	pb.Summary = "previous boot: " + pb.Reason
	if h := d.Headline(); h != "" {
		pb.Summary += ", " + h
	}
	pb.Lines = c.window(d)
	return pb
}

// window is the dump's lines for the report: ten lines of context before
// the headline, the headline, and what follows it (the stack trace), at
// most Lines; without a headline, the last Lines.
func (c Capture) window(d Dump) []string {
	n := c.Lines
	if n <= 0 {
		n = 40
	}
	at := d.headlineAt()
	if at < 0 {
		return tail(d.Lines, n)
	}
	w := d.Lines[max(0, at-10):]
	return append([]string(nil), w[:min(n, len(w))]...)
}

// print writes the summary and the dump's last lines on the console.
func (c Capture) print(recs []Record) {
	if c.Logf == nil {
		return
	}
	if !c.Out.Crashed {
		if len(recs) > 0 {
			c.Logf("previous boot: %d pstore records, no kernel crash dump among them", len(recs))
		}
		return
	}
	c.Logf("%s (%d pstore records from %s)", c.Out.Summary, len(recs), c.Out.Backend)
	d, _ := Worst(Dumps(recs))
	for _, l := range d.Lines {
		c.Logf("%s%s", ConsolePrefix, l)
	}
}

func tail(lines []string, n int) []string {
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return append([]string(nil), lines...)
}
