package console

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// HoldLevel is the kernel's console log level while a report line is
// sent: only messages more urgent than a warning (err, crit, alert,
// emerg) reach the console then. The others still go to the kernel's log
// (dmesg, pstore, log shipping); they are only kept off the serial line
// during the second or so a report takes at 115200 baud.
const HoldLevel = 4

// drainLimit bounds the wait for the UART to send what the init wrote: a
// console nobody reads must not stop the init.
const drainLimit = 3 * time.Second

// KernelHold returns a Console.Hold for the console out (a tty) and the
// kernel's printk settings under procRoot. A serial console interleaves
// the kernel's messages with the init's output byte by byte, so a message
// printed while a report is being sent cuts the report line in two and no
// reader can decode it (seen on a TCG boot: "tsc: Refined TSC clocksource
// calibration" inside a 14 KB report). The hold lowers the console log
// level to HoldLevel (never raises it) and, once the line is written,
// waits for the tty to send it (tcdrain) before putting the level back.
// Anything it cannot do it leaves undone: the report is printed anyway.
func KernelHold(procRoot string, out *os.File) func() func() {
	path := filepath.Join(procRoot, "sys/kernel/printk")
	return func() func() {
		old, err := os.ReadFile(path)
		if err != nil {
			return func() {}
		}
		f := strings.Fields(string(old))
		level, err := strconv.Atoi(first(f))
		if err != nil || level <= HoldLevel {
			return func() {}
		}
		if err := os.WriteFile(path, []byte(fmt.Sprint(HoldLevel)), 0); err != nil {
			return func() {}
		}
		return func() {
			drain(out)
			os.WriteFile(path, []byte(strconv.Itoa(level)), 0)
		}
	}
}

func first(f []string) string {
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// drain waits, at most drainLimit, until out (a tty) has sent what was
// written to it: TCSBRK with a non-zero argument is tcdrain.
func drain(out *os.File) {
	done := make(chan struct{})
	go func() {
		unix.IoctlSetInt(int(out.Fd()), unix.TCSBRK, 1)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(drainLimit):
	}
}
