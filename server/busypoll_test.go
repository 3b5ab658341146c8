package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hotpath-dev/hotpath/server"
	"github.com/hotpath-dev/hotpath/server/busypoll"
)

// TestPreferBusyPoll: with -prefer-busy-poll each worker's epoll instance
// gets prefer_busy_poll, the budget and the usecs, and the ready log says
// what the kernel took (read back with EPIOCGPARAMS); on a kernel without
// EPIOCSPARAMS it says the worker runs with plain epoll, and serves.
func TestPreferBusyPoll(t *testing.T) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	_, getErr := busypoll.GetEpoll(fd)
	unix.Close(fd)

	var log lockedBuffer
	cfg := server.DefaultConfig()
	cfg.CPUs, cfg.Port, cfg.Log = []int{0}, 0, &log
	cfg.PreferBusyPoll, cfg.BusyPoll, cfg.BusyPollBudget = true, 25, 16
	s := server.New(cfg)
	s.Handle("GET", "/x", func(c *server.Ctx) { c.Text("x") })
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.ListenAndServe(ctx) }()
	defer func() { cancel(); <-errc }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(log.String(), "ready:") {
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %s", log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	want := "hotpath: epoll busy polling: busy_poll_usecs=25 busy_poll_budget=16 prefer_busy_poll=1 (read back from the kernel)"
	if errors.Is(getErr, busypoll.ErrUnsupported) {
		want = "hotpath: epoll busy polling: not set: EPIOCSPARAMS: not supported by this kernel"
	}
	if !strings.Contains(log.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, log.String())
	}
}

func TestBusyPollBudgetRange(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.CPUs, cfg.Port, cfg.BusyPollBudget = []int{0}, 0, 70000
	s := server.New(cfg)
	err := s.ListenAndServe(context.Background())
	if err == nil || !strings.Contains(err.Error(), "busy-poll budget 70000: want 0..65535") {
		t.Fatalf("err %v", err)
	}
}
