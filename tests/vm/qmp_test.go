package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeQMP serves the QMP protocol on a unix socket the way QEMU does:
// greeting, capabilities negotiation enforced, events interleaved before
// replies, errors for unknown commands, and the socket closed on quit.
type fakeQMP struct {
	path     string
	ln       net.Listener
	commands chan string
	stall    bool // never answer commands after negotiation
}

func newFakeQMP(t *testing.T, stall bool) *fakeQMP {
	t.Helper()
	path := filepath.Join(shortTempDir(t), "qmp.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeQMP{path: path, ln: ln, commands: make(chan string, 16), stall: stall}
	t.Cleanup(func() { ln.Close() })
	go f.serve()
	return f
}

func (f *fakeQMP) serve() {
	c, err := f.ln.Accept()
	if err != nil {
		return
	}
	defer c.Close()
	w := func(s string) { c.Write([]byte(s + "\r\n")) }
	w(`{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7}, "package": "Debian"}, "capabilities": ["oob"]}}`)
	sc := bufio.NewScanner(c)
	negotiated := false
	for sc.Scan() {
		var req struct {
			Execute string `json:"execute"`
		}
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			w(`{"error": {"class": "GenericError", "desc": "JSON parse error"}}`)
			continue
		}
		f.commands <- req.Execute
		switch {
		case !negotiated && req.Execute != "qmp_capabilities":
			w(`{"error": {"class": "CommandNotFound", "desc": "Expecting capabilities negotiation with 'qmp_capabilities'"}}`)
		case req.Execute == "qmp_capabilities":
			negotiated = true
			w(`{"return": {}}`)
		case f.stall:
		case req.Execute == "system_powerdown":
			w(`{"timestamp": {"seconds": 1700000000, "microseconds": 5}, "event": "POWERDOWN"}`)
			w(`{"return": {}}`)
		case req.Execute == "query-status":
			w(`{"return": {"status": "running", "singlestep": false, "running": true}}`)
		case req.Execute == "quit":
			w(`{"return": {}}`)
			return
		default:
			w(`{"error": {"class": "CommandNotFound", "desc": "The command ` + req.Execute + ` has not been found"}}`)
		}
	}
}

func TestQMP(t *testing.T) {
	f := newFakeQMP(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := DialQMP(ctx, f.path)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if got := <-f.commands; got != "qmp_capabilities" {
		t.Fatalf("first command = %q, want qmp_capabilities", got)
	}
	if v := q.Greeting.QMP.Version.QEMU; v.Major != 7 || v.Minor != 2 {
		t.Errorf("greeting version = %+v", v)
	}
	st, err := q.Status(ctx)
	if err != nil || st != "running" {
		t.Errorf("Status = %q, %v; want running", st, err)
	}
	if err := q.SystemPowerdown(ctx); err != nil {
		t.Fatal(err)
	}
	if ev := q.Events(); len(ev) != 1 || ev[0].Event != "POWERDOWN" || ev[0].Timestamp.Seconds != 1700000000 {
		t.Errorf("events = %+v, want one POWERDOWN", ev)
	}
	_, err = q.Execute(ctx, "no-such-command", map[string]any{"x": 1})
	var qe *QMPError
	if !errors.As(err, &qe) || qe.Class != "CommandNotFound" || !strings.Contains(err.Error(), "no-such-command") {
		t.Errorf("unknown command: err = %v, want CommandNotFound naming it", err)
	}
	if err := q.Quit(ctx); err != nil {
		t.Errorf("Quit: %v", err)
	}
}

func TestQMPDeadline(t *testing.T) {
	f := newFakeQMP(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := DialQMP(ctx, f.path)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	short, cancel2 := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel2()
	start := time.Now()
	if err := q.SystemPowerdown(short); err == nil {
		t.Fatal("a command the server never answers succeeded")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("command took %v past its deadline", d)
	}
}

func TestQMPDialWaitsForSocket(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := DialQMP(ctx, filepath.Join(t.TempDir(), "absent.sock"))
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial of an absent socket: err = %v, want deadline exceeded", err)
	}
}

func TestQMPRejectsNonQMP(t *testing.T) {
	path := filepath.Join(shortTempDir(t), "x.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("SSH-2.0-OpenSSH\r\n"))
			time.Sleep(time.Second)
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := DialQMP(ctx, path); err == nil || !strings.Contains(err.Error(), "greeting") {
		t.Fatalf("err = %v, want a greeting error", err)
	}
}
