// Command whoami is an end-to-end test workload that reports, at GET
// /whoami, the credentials it runs with, so a test outside the guest can
// check that the init started it unprivileged: uid, gid, groups,
// capabilities and no_new_privs from /proc/self/status, the open-file
// limit, the SO_BUSY_POLL a new socket gets (busy polling without
// privileges) and what the kernel says to the socket options that need
// CAP_NET_ADMIN. It is built on the server library like the default
// workload (pinned per-CPU SO_REUSEPORT workers, CBPF steering, the Date
// header), so that it serving at all shows the default workload's
// machinery works with the same credentials. It does not import the init.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hotpath-dev/hotpath/server"
	"golang.org/x/sys/unix"
)

// Creds is the /whoami answer.
type Creds struct {
	UID, GID, Groups string // /proc/self/status lines (real effective saved fs)
	CapEff, CapAmb   string
	NoNewPrivs       string
	Nofile           uint64 // RLIMIT_NOFILE soft limit
	// BusyPoll is SO_BUSY_POLL of a fresh TCP socket: the kernel seeds it
	// from net.core.busy_read for every socket, no privilege needed.
	BusyPoll int
	// RaiseBusyPoll and PreferBusyPoll are the results of raising
	// SO_BUSY_POLL above that and of setting SO_PREFER_BUSY_POLL: "ok" or
	// the errno (EPERM without CAP_NET_ADMIN).
	RaiseBusyPoll, PreferBusyPoll string
}

func creds() Creds {
	var c Creds
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			v = strings.Join(strings.Fields(v), " ")
			switch k {
			case "Uid":
				c.UID = v
			case "Gid":
				c.GID = v
			case "Groups":
				c.Groups = v
			case "CapEff":
				c.CapEff = v
			case "CapAmb":
				c.CapAmb = v
			case "NoNewPrivs":
				c.NoNewPrivs = v
			}
		}
	}
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil {
		c.Nofile = rl.Cur
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		c.RaiseBusyPoll = err.Error()
		return c
	}
	defer unix.Close(fd)
	c.BusyPoll, _ = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BUSY_POLL)
	c.RaiseBusyPoll = result(unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BUSY_POLL, c.BusyPoll+100))
	c.PreferBusyPoll = result(unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PREFER_BUSY_POLL, 1))
	return c
}

func result(err error) string {
	if err == nil {
		return "ok"
	}
	if errno, ok := err.(unix.Errno); ok {
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("whoami: ")
	cfg, err := server.ConfigFromEnv(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	cfg.RegisterFlags(flag.CommandLine)
	flag.Parse()
	s := server.New(cfg)
	s.Handle("GET", "/whoami", func(c *server.Ctx) {
		b, _ := json.Marshal(creds())
		c.SetContentType("application/json")
		c.Write(b)
	})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := s.ListenAndServe(ctx); err != nil {
		log.Fatal(err)
	}
}
