package vm

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// FileReads is what WatchFile saw of a process reading one file.
type FileReads struct {
	// First and Last are when the file was first and last seen open
	// (zero: never).
	First, Last time.Time
	// Opens counts the times it was seen newly opened (an fd that was not
	// open at the previous poll).
	Opens int
	// MaxPos is the furthest file offset seen.
	MaxPos int64
}

// WatchFile follows QEMU reading the file at path from the host side,
// through /proc/PID/fd and fdinfo: libslirp's TFTP server keeps the file
// open for a transfer and seeks to each block, so First..Last brackets
// the firmware's download and MaxPos says how far it got. It polls every
// 20 ms until ctx ends or QEMU exits.
func (v *VM) WatchFile(ctx context.Context, path string) FileReads {
	return watchFile(ctx, v.cmd.Process.Pid, path, v.done, 20*time.Millisecond)
}

func watchFile(ctx context.Context, pid int, path string, done <-chan struct{}, every time.Duration) FileReads {
	var r FileReads
	fdDir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	open := map[string]bool{}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		ents, _ := os.ReadDir(fdDir)
		now := map[string]bool{}
		for _, e := range ents {
			if l, err := os.Readlink(filepath.Join(fdDir, e.Name())); err != nil || l != path {
				continue
			}
			now[e.Name()] = true
			if !open[e.Name()] {
				r.Opens++
			}
			at := time.Now()
			if r.First.IsZero() {
				r.First = at
			}
			r.Last = at
			if pos := fdPos(pid, e.Name()); pos > r.MaxPos {
				r.MaxPos = pos
			}
		}
		open = now
		select {
		case <-ctx.Done():
			return r
		case <-done:
			return r
		case <-t.C:
		}
	}
}

// fdPos is the "pos:" line of /proc/PID/fdinfo/FD (-1 when unreadable).
func fdPos(pid int, fd string) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "fdinfo", fd))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "pos:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}
