// Package console writes the init's output: log lines prefixed
// "hotpath-init: " to the console and to the kernel log, and the
// machine-readable report and event lines to the console only.
//
// Kernel-log copies are written at KERN_DEBUG (<7>) so that the kernel,
// at its default console log level, does not echo them to the console a
// second time; they are still in the kernel ring buffer (dmesg). Report
// lines do not go to /dev/kmsg at all: a kmsg record is limited to about
// 1 KiB and the boot report is longer.
package console

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/hotpath-dev/hotpath/init/report"
)

// Prefix starts every log line.
const Prefix = "hotpath-init: "

// Console is safe for concurrent use; each line is one write.
type Console struct {
	mu   sync.Mutex
	Out  io.Writer // the console (/dev/console or stdout)
	Kmsg io.Writer // /dev/kmsg, or nil
}

// Logf writes one log line.
func (c *Console) Logf(format string, args ...any) {
	msg := strings.TrimRight(fmt.Sprintf(format, args...), "\n")
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range strings.Split(msg, "\n") {
		if c.Out != nil {
			io.WriteString(c.Out, Prefix+l+"\n")
		}
		if c.Kmsg != nil {
			io.WriteString(c.Kmsg, "<7>"+Prefix+l+"\n")
		}
	}
}

// Write implements io.Writer for libraries that log through log.Logger.
func (c *Console) Write(p []byte) (int, error) {
	c.Logf("%s", p)
	return len(p), nil
}

// Line writes a report or event line (report.Format) to the console.
func (c *Console) Line(prefix string, v any) {
	b, err := report.Format(prefix, v)
	if err != nil {
		c.Logf("%v", err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Out != nil {
		// Start on a fresh line: kernel messages may have left the
		// cursor mid-line on a serial console.
		c.Out.Write(append([]byte("\n"), b...))
	}
}
