package metrics

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Adjtimex reads the kernel clock's discipline state without changing it.
func Adjtimex() (Timex, error) {
	var tx unix.Timex // Modes 0: read only
	if _, err := unix.Adjtimex(&tx); err != nil {
		return Timex{}, fmt.Errorf("adjtimex: %w", err)
	}
	unit := time.Microsecond
	if tx.Status&unix.STA_NANO != 0 {
		unit = time.Nanosecond
	}
	return Timex{
		Offset:   time.Duration(tx.Offset) * unit,
		MaxError: time.Duration(tx.Maxerror) * time.Microsecond,
		Synced:   tx.Status&unix.STA_UNSYNC == 0,
	}, nil
}
