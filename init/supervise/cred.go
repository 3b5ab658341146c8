package supervise

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Privileges is who the workload runs as. The zero value (and nil) is
// root with every capability, as PID 1 has them.
//
// An unprivileged workload gets its uid and gid, no supplementary groups,
// and exactly Caps as ambient capabilities: they survive its execve as a
// non-root user, so a plain binary without file capabilities can bind a
// low port (CAP_NET_BIND_SERVICE) or raise SO_BUSY_POLL (CAP_NET_ADMIN)
// without holding anything else. Resource limits (RLIMIT_NOFILE) are the
// init's, inherited: the init raises them before the first start.
type Privileges struct {
	UID, GID int
	Caps     []uintptr // capability numbers (linux/capability.h)
}

// Root reports whether p leaves the workload as root.
func (p *Privileges) Root() bool { return p == nil || p.UID == 0 }

// SysProcAttr returns the process attributes the workload starts with:
// its own process group (shutdown signals reach whatever it starts), and
// for an unprivileged workload its credentials and ambient capabilities
// (syscall sets PR_SET_KEEPCAPS across setuid and raises each one).
func (p *Privileges) SysProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if p.Root() {
		return a
	}
	a.Credential = &syscall.Credential{Uid: uint32(p.UID), Gid: uint32(p.GID), Groups: []uint32{}}
	a.AmbientCaps = append([]uintptr(nil), p.Caps...)
	return a
}

// LockNoNewPrivs sets no_new_privs on every thread of the calling process,
// to be inherited by every child: an execve can then never grant more
// privileges than the process had (setuid bits and file capabilities are
// ignored). Neither os/exec nor syscall.SysProcAttr can set it between
// fork and execve, so the init sets it on itself before it starts an
// unprivileged workload; that is equivalent here because the workload is
// the only program the init ever executes, and the flag does not limit
// the init itself (it has every capability already and gains none by
// execve). It cannot be cleared, so a root workload (workload.user=0)
// does not get it.
//
// The flag belongs to a thread, not to the process, and a Go program forks
// from whichever thread runs the goroutine: hence the syscall on all
// threads (threads created later inherit it). That needs a program built
// without cgo, as the init is; with cgo it fails with ENOTSUP.
func LockNoNewPrivs() error {
	if _, _, errno := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); errno != 0 {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS) on every thread: %w", errno)
	}
	return nil
}
