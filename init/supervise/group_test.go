package supervise

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/report"
	"golang.org/x/sys/unix"
)

const groupHelperEnv = "HOTPATH_SUPERVISE_GROUP"

// TestHelperGroup is not a test: it is a workload that forks, for the
// process-group tests (the test binary re-executed with
// HOTPATH_SUPERVISE_GROUP). The leader starts two children in its own
// process group, one that drains on SIGTERM ("graceful": it leaves a mark)
// and one that ignores SIGTERM ("stubborn"), waits until both have their
// signal dispositions set, then serves like the "serve" helper: "exit N"
// exits, "hang" stops answering, SIGTERM exits 0 once the graceful child
// has.
func TestHelperGroup(t *testing.T) {
	mode := os.Getenv(groupHelperEnv)
	if mode == "" {
		t.Skip("helper process for the process-group tests")
	}
	mark := os.Getenv("HOTPATH_MARK")
	switch mode {
	case "leader":
		groupLeader(mark)
	case "graceful":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		os.WriteFile(mark+".graceful", []byte("ready"), 0o644)
		<-c
		os.WriteFile(mark+".graceful", []byte("sigterm"), 0o644)
		os.Exit(0)
	case "stdio":
		// What the supervisor gave it as fds 0, 1 and 2.
		in, _ := os.Readlink("/proc/self/fd/0")
		os.WriteFile(mark, []byte(in), 0o644)
		fmt.Fprintln(os.Stdout, "to stdout")
		fmt.Fprintln(os.Stderr, "to stderr")
		os.Exit(0)
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		os.WriteFile(mark+".stubborn", []byte("ready"), 0o644)
		select {}
	}
	os.Exit(99)
}

func groupLeader(mark string) {
	var pids []string
	for _, child := range []string{"graceful", "stubborn"} {
		env := []string{groupHelperEnv + "=" + child}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, groupHelperEnv+"=") { // the first of a key wins
				env = append(env, kv)
			}
		}
		pid, err := syscall.ForkExec(os.Args[0], []string{os.Args[0], "-test.run=^TestHelperGroup$"},
			&syscall.ProcAttr{Env: env, Files: []uintptr{0, 1, 2}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(10)
		}
		pids = append(pids, strconv.Itoa(pid))
	}
	for _, child := range []string{"graceful", "stubborn"} {
		for b, _ := os.ReadFile(mark + "." + child); string(b) != "ready"; b, _ = os.ReadFile(mark + "." + child) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	os.WriteFile(mark, []byte(strings.Join(pids, " ")), 0o644) // before listening: readiness implies it
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM)
	go func() {
		// A workload that drains: it waits for the child that drains on
		// SIGTERM (which has its own SIGTERM from the group signal), not
		// for the one that ignores it.
		// Bounded: a child that got no SIGTERM must fail the test, not
		// hang it.
		<-c
		pid, _ := strconv.Atoi(pids[0])
		drained := make(chan struct{})
		go func() {
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, 0, nil)
			close(drained)
		}()
		select {
		case <-drained:
		case <-time.After(5 * time.Second):
		}
		os.Exit(0)
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("HOTPATH_PORT"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(11)
	}
	hung := make(chan struct{})
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(12)
		}
		select {
		case <-hung:
			continue // accepted by the kernel, never answered
		default:
		}
		line, _ := bufio.NewReader(c).ReadString('\n')
		if n, ok := strings.CutPrefix(strings.TrimSpace(line), "exit "); ok {
			code, _ := strconv.Atoi(n)
			os.Exit(code)
		}
		if strings.TrimSpace(line) == "hang" {
			close(hung)
		}
		c.Close()
	}
}

// groupMembers lists the processes whose process group is pgid, zombies
// included, from /proc: what the kernel holds, not what the supervisor
// believes.
func groupMembers(t *testing.T, pgid int) []string {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) {
			out = append(out, d.Name()+" "+f[0])
		}
	}
	return out
}

// waitGroupGone waits up to 10 s for process group pgid to have no
// process left, and fails the test naming those that stay.
func waitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := groupMembers(t, pgid)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("process group %d still holds %v (pid state) 10 s after the workload ended", pgid, left)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestProcessGroupLeftEmpty: a workload that forks, one of its children
// ignoring SIGTERM. Whether the supervisor stops it, it exits by itself
// and is restarted, or the liveness probe kills it, no process of its
// group is left afterwards (a leftover child would keep the port, CPU and
// memory of a workload that is gone, and hand the next one EADDRINUSE),
// and on a stop the children get SIGTERM first, so they can drain.
func TestProcessGroupLeftEmpty(t *testing.T) {
	// Stand in for PID 1: the orphaned children come to this process and
	// the supervisor's reaper, so "gone" includes "reaped".
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("subreaper: %v", err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	tests := []struct {
		name     string
		liveness *Liveness
		end      func(t *testing.T, s *Supervisor, rec *recorder)
		graceful string // the graceful child's mark afterwards; "" any
	}{
		{"stop", nil, func(t *testing.T, s *Supervisor, rec *recorder) {
			s.Stop("test")
			<-s.Done()
		}, "sigterm"},
		{"exit and restart", nil, func(t *testing.T, s *Supervisor, rec *recorder) {
			exitVia(t, s, 7)
			rec.next(t, report.EventRestart)
		}, ""},
		{"liveness kill", &Liveness{Interval: 20 * time.Millisecond, Timeout: 200 * time.Millisecond, Failures: 2, Path: "/healthz"},
			func(t *testing.T, s *Supervisor, rec *recorder) {
				c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.cfg.Port))
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(c, "hang\n")
				c.Close()
				rec.next(t, report.EventUnresponsive)
				rec.next(t, report.EventRestart)
			}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, rec, mark := setup(t, "", func(c *Config) {
				c.Args = []string{"-test.run=^TestHelperGroup$"}
				c.Env = append(c.Env, groupHelperEnv+"=leader")
				c.Liveness = tt.liveness
			})
			go s.Run()
			leader := rec.next(t, report.EventReady).PID
			b, err := os.ReadFile(mark)
			if err != nil {
				t.Fatal(err)
			}
			children := strings.Fields(string(b))
			t.Cleanup(func() { // whatever the supervisor left
				for _, p := range children {
					if pid, _ := strconv.Atoi(p); pid > 0 {
						unix.Kill(pid, unix.SIGKILL)
					}
				}
			})
			if got := groupMembers(t, leader); len(got) != 3 {
				t.Fatalf("workload group %d before the end: %v, want the leader and its 2 children %v", leader, got, children)
			}
			tt.end(t, s, rec)
			waitGroupGone(t, leader)
			if b, _ := os.ReadFile(mark + ".graceful"); tt.graceful != "" && string(b) != tt.graceful {
				t.Errorf("the graceful child's mark is %q, want %q: it got no SIGTERM before the SIGKILL", b, tt.graceful)
			}
		})
	}
}

// TestWorkloadStdio: the workload's stdin is /dev/null, its stdout and
// stderr are the files the init gives it (the console), so what it logs
// reaches the console.
func TestWorkloadStdio(t *testing.T) {
	dir := t.TempDir()
	files := map[string]*os.File{}
	for _, n := range []string{"stdout", "stderr"} {
		f, err := os.Create(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files[n] = f
	}
	s, _, rec, mark := setup(t, "", func(c *Config) {
		c.Args = []string{"-test.run=^TestHelperGroup$"}
		c.Env = append(c.Env, groupHelperEnv+"=stdio")
		c.Stdout, c.Stderr = files["stdout"], files["stderr"]
	})
	go s.Run()
	if ex := rec.next(t, report.EventExit); ex.Detail != "exit status 0" {
		t.Fatalf("exit %+v", ex)
	}
	if b, _ := os.ReadFile(mark); string(b) != os.DevNull {
		t.Errorf("workload's stdin is %q, want %s", b, os.DevNull)
	}
	for n, want := range map[string]string{"stdout": "to stdout\n", "stderr": "to stderr\n"} {
		// The test binary prints its own PASS/skip lines too: the
		// workload's line must be there.
		if b, _ := os.ReadFile(filepath.Join(dir, n)); !strings.Contains(string(b), want) {
			t.Errorf("workload's %s got %q, want %q in it", n, b, want)
		}
	}
}

// TestReaperQuietWhileChildRuns: with the workload running and nothing to
// reap, wait4 answers 0; the reaper goes back to waiting for SIGCHLD
// instead of taking 0 for a child (a busy loop logging "orphan pid 0").
func TestReaperQuietWhileChildRuns(t *testing.T) {
	s, _, rec, _ := setup(t, "serve", nil)
	go s.Run()
	rec.next(t, report.EventReady)
	// A SIGCHLD with nothing to reap (another child of PID 1 stopped or
	// continued, a signal coalesced): the reaper runs wait4 now.
	if err := unix.Kill(os.Getpid(), unix.SIGCHLD); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, l := range rec.logs {
		if strings.Contains(l, "orphan") {
			t.Fatalf("%d log lines, among them %q", len(rec.logs), l)
		}
	}
}
