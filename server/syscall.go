package server

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Raw system calls for the hot path. recv/send/accept4 on non-blocking
// sockets never block, so they skip the runtime's entersyscall/exitsyscall
// bookkeeping (RawSyscall6), and pass no address arguments, so unlike
// unix.Recvfrom/unix.Accept4 they allocate nothing.
//
// They call package syscall's RawSyscall6 itself: x/sys/unix's is an
// assembly jump to it through the ABI0 calling convention, whose wrapper
// (moving seven arguments from the stack to registers) was 20 of the ~60
// user-space instructions each call cost (cachegrind).

func recvRaw(fd int, p []byte) (int, unix.Errno) {
	if len(p) == 0 {
		return 0, unix.ENOBUFS
	}
	n, _, e := syscall.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), 0, 0, 0)
	return int(n), e
}

func sendRaw(fd int, p []byte) (int, unix.Errno) {
	n, _, e := syscall.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), unix.MSG_NOSIGNAL, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}

// accept4 writes the peer's address into *sa (*salen bytes at most, the
// length written back): the worker's own, so it allocates nothing.
func accept4(lfd int, sa *unix.RawSockaddrAny, salen *uint32) (int, unix.Errno) {
	fd, _, e := syscall.RawSyscall6(unix.SYS_ACCEPT4, uintptr(lfd), uintptr(unsafe.Pointer(sa)), uintptr(unsafe.Pointer(salen)), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
	return int(fd), e
}

// epollWaitRaw is epoll_wait without the Go scheduler; epollWait with it
// (see worker.wait for which one is used when).
func epollWaitRaw(epfd int, events []unix.EpollEvent, timeout int) (int, unix.Errno) {
	n, _, e := syscall.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), uintptr(timeout), 0, 0)
	return int(n), e
}

func epollWait(epfd int, events []unix.EpollEvent, timeout int) (int, unix.Errno) {
	n, _, e := unix.Syscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), uintptr(timeout), 0, 0)
	return int(n), e
}

// unsent returns how many bytes of fd's send queue the peer has not
// acknowledged yet (SIOCOUTQ, which is TIOCOUTQ on Linux; a FIN counts as
// one), and 0 when it cannot tell.
func unsent(fd int) int {
	var n int32
	_, _, e := unix.RawSyscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCOUTQ, uintptr(unsafe.Pointer(&n)))
	if e != 0 {
		return 0
	}
	return int(n)
}

// incomingCPU returns fd's SO_INCOMING_CPU (the CPU whose softirq last
// handled the socket's packets; for an accepted socket, the one that took
// the handshake's last packet), or -1 when the kernel does not say.
func incomingCPU(fd int) int {
	var cpu int32 = -1
	size := uint32(unsafe.Sizeof(cpu))
	_, _, e := syscall.RawSyscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_INCOMING_CPU,
		uintptr(unsafe.Pointer(&cpu)), uintptr(unsafe.Pointer(&size)), 0)
	if e != 0 {
		return -1
	}
	return int(cpu)
}

// setAbortOnClose makes the next close of fd drop whatever the socket
// still holds and send a reset (SO_LINGER on with a zero timeout): the
// close neither blocks nor leaves an orphaned socket holding unsent data
// in the kernel.
func setAbortOnClose(fd int) {
	l := unix.Linger{Onoff: 1, Linger: 0}
	unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_LINGER,
		uintptr(unsafe.Pointer(&l)), unsafe.Sizeof(l), 0)
}
