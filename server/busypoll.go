package server

import (
	"errors"
	"fmt"

	"github.com/hotpath-dev/hotpath/server/busypoll"
)

// setEpollBusyPoll gives a worker's epoll instance the configured busy-poll
// parameters (Config.PreferBusyPoll, BusyPollBudget) and records what the
// kernel took in s.busyPoll, for the ready log. A kernel without
// EPIOCSPARAMS (before 6.9) is not an error: the worker runs with plain
// epoll, which busy-polls per net.core.busy_poll, and the log says so.
// Start runs it for one worker after another, before any runs.
func (s *Server) setEpollBusyPoll(epfd int) error {
	if !s.cfg.PreferBusyPoll && s.cfg.BusyPollBudget == 0 {
		return nil
	}
	if s.cfg.BusyPollBudget < 0 || s.cfg.BusyPollBudget > 1<<16-1 {
		return fmt.Errorf("busy-poll budget %d: want 0..65535", s.cfg.BusyPollBudget)
	}
	p := busypoll.Params{Usecs: uint32(max(s.cfg.BusyPoll, 0)), Budget: uint16(s.cfg.BusyPollBudget)}
	if s.cfg.PreferBusyPoll {
		p.Prefer = 1
	}
	got, err := busypoll.SetEpoll(epfd, p)
	switch {
	case errors.Is(err, busypoll.ErrUnsupported):
		s.busyPoll = fmt.Sprintf("not set: %v; plain epoll (net.core.busy_poll), no preference over interrupts", err)
		return nil
	case err != nil:
		return fmt.Errorf("epoll busy-poll parameters %v: %w", p, err)
	}
	s.busyPoll = got.String() + " (read back from the kernel)"
	return nil
}

// preferSockets sets SO_PREFER_BUSY_POLL on the listeners (accepted
// sockets inherit it), which the recv busy loop reads (sk_busy_loop). It is
// best effort: the option needs CAP_NET_ADMIN (net/core/sock.c
// sk_setsockopt), which the appliance's workload does not have, and the
// preference that matters for a worker, which waits in epoll_wait, is the
// epoll instance's (setEpollBusyPoll, no privilege needed). The ready log
// says which it got. (SO_BUSY_POLL_BUDGET is not set at all: any value
// above a socket's 0 needs CAP_NET_ADMIN too.)
func (s *Server) preferSockets(fds []int) {
	if !s.cfg.PreferBusyPoll {
		return
	}
	var err error
	for _, fd := range fds {
		if err = busypoll.SetSocket(fd, true, 0); err != nil {
			break
		}
	}
	if err != nil {
		s.sockPrefer = fmt.Sprintf("; sockets: %v (the epoll instance's preference applies)", err)
	} else {
		s.sockPrefer = "; sockets: SO_PREFER_BUSY_POLL=1"
	}
}
