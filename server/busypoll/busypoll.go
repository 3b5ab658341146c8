// Package busypoll sets the kernel's busy-polling parameters on an epoll
// instance and on sockets, through raw system calls.
//
// Linux 6.9 added per-epoll busy-poll parameters (EPIOCSPARAMS:
// busy_poll_usecs, busy_poll_budget, prefer_busy_poll; fs/eventpoll.c
// ep_eventpoll_ioctl). Before it, epoll's busy loop used the
// net.core.busy_poll sysctl and hard-coded prefer_busy_poll to false, so a
// NIC kept raising interrupts while a worker polled. With prefer_busy_poll
// and the queue's napi_defer_hard_irqs and gro_flush_timeout set (the init's
// nic-napi-defer step), a worker that keeps finding work keeps its queue's
// interrupts off (Documentation/networking/napi.rst, "Preferred busy
// polling"). The socket options SO_PREFER_BUSY_POLL and SO_BUSY_POLL_BUDGET
// (Linux 5.11, net/core/sock.c) are what the recv busy loop (sk_busy_loop)
// reads.
//
// Where a kernel lacks a call, Set* returns an error wrapping
// ErrUnsupported, so that a library user on an older host falls back to
// plain epoll without treating it as a failure.
package busypoll

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrUnsupported: the kernel does not have the call (EPIOCSPARAMS before
// Linux 6.9: the epoll file has no ioctl and answers ENOTTY).
var ErrUnsupported = errors.New("not supported by this kernel")

// Params are an epoll instance's busy-poll parameters, the layout of
// struct epoll_params (include/uapi/linux/eventpoll.h): 8 bytes.
type Params struct {
	Usecs  uint32 // how long epoll_wait busy-polls before it sleeps; 0 turns busy polling off for this instance
	Budget uint16 // packets per NAPI poll; 0 means the kernel's default (8, BUSY_POLL_BUDGET); above 64 needs CAP_NET_ADMIN
	Prefer uint8  // 1: prefer busy polling over the NIC's interrupts (needs napi_defer_hard_irqs on the queue)
	pad    uint8  // must be zero (the kernel refuses anything else)
}

// String is how the report and the logs show Params.
func (p Params) String() string {
	return fmt.Sprintf("busy_poll_usecs=%d busy_poll_budget=%d prefer_busy_poll=%d", p.Usecs, p.Budget, p.Prefer)
}

// The kernel refuses these (fs/eventpoll.c ep_eventpoll_ioctl): a value
// over S32_MAX microseconds, prefer other than 0 or 1, a non-zero pad, and
// a budget over NAPI_POLL_WEIGHT (64) without CAP_NET_ADMIN (EPERM).
const (
	maxUsecs       = 1<<31 - 1
	napiPollWeight = 64
)

// Check refuses what the kernel would refuse, before any system call, so
// that a bad configuration is named by its field.
func (p Params) Check() error {
	switch {
	case p.Usecs > maxUsecs:
		return fmt.Errorf("busy_poll_usecs %d: over %d", p.Usecs, maxUsecs)
	case p.Prefer > 1:
		return fmt.Errorf("prefer_busy_poll %d: want 0 or 1", p.Prefer)
	}
	return nil
}

// SetEpoll sets p on the epoll instance epfd (EPIOCSPARAMS) and reads back
// what the kernel took (EPIOCGPARAMS).
func SetEpoll(epfd int, p Params) (Params, error) {
	if err := p.Check(); err != nil {
		return Params{}, err
	}
	p.pad = 0
	if err := ioctl(epfd, unix.EPIOCSPARAMS, &p); err != nil {
		return Params{}, fmt.Errorf("EPIOCSPARAMS: %w", err)
	}
	return GetEpoll(epfd)
}

// GetEpoll reads epfd's parameters (EPIOCGPARAMS).
func GetEpoll(epfd int) (Params, error) {
	var got Params
	if err := ioctl(epfd, unix.EPIOCGPARAMS, &got); err != nil {
		return Params{}, fmt.Errorf("EPIOCGPARAMS: %w", err)
	}
	return got, nil
}

// ioctl is the raw call: x/sys/unix has the request numbers but no
// wrapper for struct epoll_params.
func ioctl(fd int, req uintptr, p *Params) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(unsafe.Pointer(p)))
	switch e {
	case 0:
		return nil
	case unix.ENOTTY:
		return fmt.Errorf("%w (%v)", ErrUnsupported, e)
	}
	return e
}

// SetSocket sets SO_PREFER_BUSY_POLL and, when budget is not 0,
// SO_BUSY_POLL_BUDGET on a socket (Linux 5.11: ENOPROTOOPT before it).
// Accepted sockets inherit both from the listening socket (sk_clone_lock
// copies the socket). A budget above the socket's current one (0 at
// first) needs CAP_NET_ADMIN (net/core/sock.c sk_setsockopt).
func SetSocket(fd int, prefer bool, budget int) error {
	v := 0
	if prefer {
		v = 1
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PREFER_BUSY_POLL, v); err != nil {
		return sockErr("SO_PREFER_BUSY_POLL", err)
	}
	if budget != 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BUSY_POLL_BUDGET, budget); err != nil {
			return sockErr("SO_BUSY_POLL_BUDGET", err)
		}
	}
	return nil
}

func sockErr(opt string, err error) error {
	if errors.Is(err, unix.ENOPROTOOPT) {
		return fmt.Errorf("%s: %w (%v)", opt, ErrUnsupported, err)
	}
	return fmt.Errorf("%s: %w", opt, err)
}
