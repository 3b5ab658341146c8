package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/console"
	"github.com/hotpath-dev/hotpath/init/consoles"
	"golang.org/x/sys/unix"
)

// mount is one file system PID 1 mounts.
//
// This is a table over unix.Mount rather than u-root's libinit: libinit's
// namespace also creates u-root's own directories (/buildbin, /ubin,
// /go/pkg, ...), which this appliance does not have, and logs through
// ulog; here each mount's outcome goes into the boot report instead.
type mount struct {
	source, target, fstype string
	flags                  uintptr
	data                   string
}

var mounts = []mount{
	{"proc", "/proc", "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
	{"sysfs", "/sys", "sysfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
	{"devtmpfs", "/dev", "devtmpfs", unix.MS_NOSUID, "mode=0755"},
	{"devpts", "/dev/pts", "devpts", unix.MS_NOSUID | unix.MS_NOEXEC, "gid=5,mode=0620,ptmxmode=0666"},
	{"tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
	{"tmpfs", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755"},
	{"tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
}

func mountStep() boot.Step {
	return boot.Step{Name: "mounts", Apply: func(_ context.Context, d boot.Detail) error {
		var errs []error
		for _, m := range mounts {
			if err := os.MkdirAll(m.target, 0o755); err != nil {
				errs = append(errs, err)
				continue
			}
			err := unix.Mount(m.source, m.target, m.fstype, m.flags, m.data)
			if errors.Is(err, unix.EBUSY) {
				d[m.target] = "already mounted"
				continue
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("mount %s on %s: %w", m.fstype, m.target, err))
				continue
			}
			d[m.target] = m.fstype
		}
		os.MkdirAll("/etc", 0o755)
		return errors.Join(errs...)
	}, Verify: func(context.Context, boot.Detail) error {
		f, err := os.Open("/proc/self/mounts")
		if err != nil {
			return err
		}
		defer f.Close()
		have := map[string]bool{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if fs := strings.Fields(sc.Text()); len(fs) > 1 {
				have[fs[1]] = true
			}
		}
		var missing []string
		for _, m := range mounts {
			if !have[m.target] {
				missing = append(missing, m.target)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("not mounted: %s", strings.Join(missing, " "))
		}
		return nil
	}}
}

// attachConsole makes sure the console writer and fds 0-2 reach
// /dev/console (the kernel opens it for init only if the initramfs has the
// node; devtmpfs has it now), and opens /dev/kmsg for the kernel-log copy.
func attachConsole(con *console.Console) {
	if _, err := unix.FcntlInt(1, unix.F_GETFD, 0); err != nil {
		if f, err := os.OpenFile("/dev/console", os.O_RDWR, 0); err == nil {
			for fd := 0; fd <= 2; fd++ {
				unix.Dup2(int(f.Fd()), fd)
			}
			f.Close()
		}
	}
	// Every console the kernel enabled, not only /dev/console's: on
	// arm64 the command line names QEMU virt's PL011 and Graviton's PCI
	// UART, and EC2 reads only the second (init/consoles).
	out, names, err := consoles.Open(procRoot, devRoot, os.Stdout)
	con.Out = out
	if k, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0); err == nil {
		con.Kmsg = k
	}
	if err != nil {
		con.Logf("console: %v", err)
	}
	if len(names) > 1 {
		con.Logf("console: writing to %s", strings.Join(names, ", "))
	}
}
