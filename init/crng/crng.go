// Package crng watches the kernel's random number generator from PID 1.
//
// Nothing on the boot path may wait for the CRNG: on a CPU without a
// hardware RNG instruction the kernel may take minutes to seed it (QEMU's
// qemu64 model, Graviton2-class arm64 without RNDR), and an appliance with
// no address for two minutes is broken. The init therefore only observes
// when the CRNG becomes ready, for the boot report, from a goroutine that
// blocks in getrandom(2) without flags: that wait is also what makes the
// kernel gather jitter entropy (try_to_generate_entropy), which a poller
// with GRND_NONBLOCK never triggers.
package crng

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Ready reports whether the CRNG is initialised, without blocking.
func Ready() bool {
	var b [1]byte
	_, err := unix.Getrandom(b[:], unix.GRND_NONBLOCK)
	return err == nil
}

// Wait blocks until the CRNG is initialised.
func Wait() error {
	var b [1]byte
	for {
		_, err := unix.Getrandom(b[:], 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err
	}
}

// NonblockingRead fills b without ever waiting for the CRNG: from the
// CRNG when it is ready, else from getrandom(GRND_INSECURE) (Linux 5.17+),
// else from /dev/urandom, which never blocks. It is for values that must
// be unpredictable enough not to collide (a DHCP transaction id), not for
// keys.
func NonblockingRead(b []byte) (int, error) {
	n, err := unix.Getrandom(b, unix.GRND_NONBLOCK)
	if err == nil && n == len(b) {
		return n, nil
	}
	n, err = unix.Getrandom(b, unix.GRND_INSECURE)
	if err == nil && n == len(b) {
		return n, nil
	}
	fd, err := unix.Open("/dev/urandom", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	return unix.Read(fd, b)
}
