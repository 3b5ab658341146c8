// Package consoles finds every console the kernel enabled, so that the
// init's report and events reach whichever UART the platform reads.
//
// A write to /dev/console reaches one console only: the one flagged
// CON_CONSDEV (the last console= on the command line that exists). The
// kernel's own messages go to every enabled console. On a machine with
// two (arm64: QEMU virt's PL011 ttyAMA0 and Graviton's PCI UART ttyS0 are
// both named on the command line), the init's lines must go to each as
// well, or the report would be on the UART that EC2's get-console-output
// does not read.
package consoles

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Console is one line of /proc/consoles (fs/proc/consoles.c
// show_console_dev: the name and index, the R/W/U operations, the flags in
// parentheses, and major:minor when the console has a tty).
type Console struct {
	Name    string // "ttyS0"
	Enabled bool   // 'E'
	ConsDev bool   // 'C': the console /dev/console writes to
	Device  string // "4:64", "" without a tty
}

// Parse reads /proc/consoles.
func Parse(r io.Reader) ([]Console, error) {
	var out []Console
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		open, close := strings.IndexByte(line, '('), strings.IndexByte(line, ')')
		if open < 0 || close < open {
			return nil, fmt.Errorf("/proc/consoles: no flags in %q", line)
		}
		head := strings.Fields(line[:open])
		if len(head) == 0 {
			return nil, fmt.Errorf("/proc/consoles: no name in %q", line)
		}
		flags := line[open+1 : close]
		c := Console{
			Name:    head[0],
			Enabled: strings.Contains(flags, "E"),
			ConsDev: strings.Contains(flags, "C"),
			Device:  strings.TrimSpace(line[close+1:]),
		}
		out = append(out, c)
	}
	return out, sc.Err()
}

// Others are the enabled consoles with a tty other than the one
// /dev/console reaches: the ones the init must also write to.
func Others(cs []Console) []Console {
	var out []Console
	for _, c := range cs {
		if c.Enabled && !c.ConsDev && c.Device != "" {
			out = append(out, c)
		}
	}
	return out
}

// Fanout writes everything to its first writer and copies it to the
// others. Only the first writer's result counts: a console that fails
// (a UART that went away) must not stop the others.
type Fanout []io.Writer

func (f Fanout) Write(p []byte) (int, error) {
	for _, w := range f[1:] {
		w.Write(p)
	}
	return f[0].Write(p)
}

// Open returns primary (the writer that reaches /dev/console) extended
// with every other enabled console, opened from devRoot ("/dev"), and the
// names of all the consoles written to, for the log. A console that cannot
// be opened is left out and named in the error; primary is always kept.
func Open(procRoot, devRoot string, primary io.Writer) (io.Writer, []string, error) {
	f, err := os.Open(filepath.Join(procRoot, "consoles"))
	if err != nil {
		return primary, nil, err
	}
	defer f.Close()
	cs, err := Parse(f)
	if err != nil {
		return primary, nil, err
	}
	var names []string
	for _, c := range cs {
		if c.Enabled && c.ConsDev {
			names = append(names, c.Name)
		}
	}
	out := Fanout{primary}
	var errs []string
	for _, c := range Others(cs) {
		w, err := os.OpenFile(filepath.Join(devRoot, c.Name), os.O_WRONLY|unix.O_NOCTTY, 0)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		out = append(out, w)
		names = append(names, c.Name)
	}
	var werr error
	if len(errs) > 0 {
		werr = fmt.Errorf("consoles: %s", strings.Join(errs, "; "))
	}
	if len(out) == 1 {
		return primary, names, werr
	}
	return out, names, werr
}
