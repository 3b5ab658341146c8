package timesync

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// System is the machine's CLOCK_REALTIME. Changing it needs
// CAP_SYS_TIME, which only the init has.
type System struct{}

// Step sets CLOCK_REALTIME to now+d with clock_settime.
func (System) Step(d time.Duration) error {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_REALTIME, &ts); err != nil {
		return fmt.Errorf("clock_gettime: %w", err)
	}
	ts = unix.NsecToTimespec(ts.Nano() + int64(d))
	if err := unix.ClockSettime(unix.CLOCK_REALTIME, &ts); err != nil {
		return fmt.Errorf("clock_settime: %w", err)
	}
	return nil
}

// maxPhase is the largest offset the kernel PLL takes (MAXPHASE).
const maxPhase = 500 * time.Millisecond

// Slew hands d to the kernel PLL (adjtimex ADJ_OFFSET with STA_PLL, in
// nanoseconds): the kernel corrects the phase gradually and adjusts the
// frequency from successive offsets. It also clears STA_UNSYNC and sets
// the error estimates, so that the kernel (and adjtimex readers) know the
// clock is synchronised. The time constant 2 suits a 64-second poll (the
// RFC 5905 convention: poll exponent minus 4).
func (System) Slew(d time.Duration) error {
	d = max(min(d, maxPhase), -maxPhase)
	tx := unix.Timex{
		Modes: unix.ADJ_OFFSET | unix.ADJ_STATUS | unix.ADJ_NANO | unix.ADJ_TIMECONST |
			unix.ADJ_MAXERROR | unix.ADJ_ESTERROR,
		Offset:   int64(d),
		Status:   unix.STA_PLL | unix.STA_NANO,
		Constant: 2,
		Maxerror: max(int64(d.Abs()/time.Microsecond), 1000),
		Esterror: max(int64(d.Abs()/time.Microsecond), 100),
	}
	if _, err := unix.Adjtimex(&tx); err != nil {
		return fmt.Errorf("adjtimex: %w", err)
	}
	return nil
}
