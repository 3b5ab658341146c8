package server

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// The process's descriptor table, sized at Start.
//
// The kernel grows a process's descriptor table by doubling it when a new
// descriptor does not fit (expand_files in fs/file.c), and in a process
// of several threads, which every Go program is, it first waits for an
// RCU grace period (synchronize_rcu), asleep inside the system call that
// needed the descriptor. For a worker that call is accept4: opening
// 16,000 connections took it through the doublings from 1,024 to 32,768
// descriptors, and every request of its other connections waited through
// each grace period with it. Traced in TestExpiryStorm/idle (ftrace
// sched_switch with stack traces; the worker asleep in
// accept4 -> alloc_fd -> expand_files -> synchronize_rcu): six sleeps of
// 4.4-16 ms on this 2-core machine (HZ 250), while the worker neither ran
// nor waited for its CPU, which is why the attack tests' breakdown of a
// wait could not name them; a grace period lasts much longer where a CPU
// is slow to pass a quiescent state (a loaded VM whose vCPUs the host
// preempts). Growing the table once from Start takes that one grace
// period beside the workers' start; the table never shrinks. Its cost is kernel
// memory, 8 bytes per descriptor and two bitmaps: ~1.1 MiB for 4 workers
// at the default 17,408 connections each.

// fdsPerWorker is what one worker may hold open at once: its connections,
// the refused ones lingering after their 503, the one accepted to be
// refused at once, and its listener, epoll and eventfd descriptors.
func fdsPerWorker(maxConns int) int { return maxConns + lingerOverflow + 1 + 3 }

// fdTableTarget is the number of descriptors to size the table for: what
// the workers may hold plus a reserve for the rest of the program (its
// own files, backends' connections), at most the RLIMIT_NOFILE soft limit
// (the kernel refuses a descriptor at or above it). capped says the
// limit keeps the workers from holding MaxConnsPerWorker connections
// each (the lingering refused ones left out: the appliance's limit, 2^20,
// is exactly 64 workers' worth, and 64-vCPU machines are common).
func fdTableTarget(workers, maxConns int, limit uint64) (n int, capped bool) {
	const reserve = 256
	need := uint64(workers)*uint64(fdsPerWorker(maxConns)) + reserve
	if need > limit {
		return int(limit), limit < uint64(workers)*uint64(maxConns)
	}
	return int(need), false
}

// growFDTable makes the descriptor table hold at least n descriptors:
// fcntl(F_DUPFD_CLOEXEC) with n-1 as the lowest number allowed makes the
// kernel grow the table to fit that descriptor, which is then closed. Unlike
// dup2 to a fixed number, it can never replace a descriptor in use. The
// descriptor duplicated is an eventfd of its own, so that it runs beside
// the workers without touching theirs.
func growFDTable(n int) error {
	if n <= 0 {
		return nil
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("server: size the descriptor table: eventfd: %w", err)
	}
	defer unix.Close(fd)
	hi, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, n-1)
	if err != nil {
		return fmt.Errorf("server: size the descriptor table for %d: fcntl F_DUPFD: %w", n, err)
	}
	return unix.Close(hi)
}

// sizeFDTable starts sizing the descriptor table for the workers (see
// above) and returns at once, with what the log should say after the ready
// line (which a supervisor may wait for as the first line): that
// RLIMIT_NOFILE keeps the workers from holding MaxConnsPerWorker
// connections each. The growth runs beside the workers' start: its grace
// period (8-12 ms here) would otherwise delay the ready line of every boot,
// and an accept4 meanwhile waits for it only if it needs a descriptor
// beyond the old table. A failure only costs the stalls the sizing
// avoids: it is logged.
func (s *Server) sizeFDTable(workers int) (note string) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return fmt.Sprintf("hotpath: getrlimit NOFILE: %v\n", err)
	}
	n, capped := fdTableTarget(workers, s.cfg.MaxConnsPerWorker, rl.Cur)
	if capped {
		note = fmt.Sprintf("hotpath: RLIMIT_NOFILE %d is below the %d connections of %d workers of %d: accepts beyond it fail (EMFILE) and pause\n",
			rl.Cur, workers*s.cfg.MaxConnsPerWorker, workers, s.cfg.MaxConnsPerWorker)
	}
	go func() {
		if err := growFDTable(n); err != nil {
			fmt.Fprintf(s.cfg.Log, "hotpath: %v\n", err)
		}
	}()
	return note
}
