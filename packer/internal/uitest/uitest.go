// Package uitest is a packer.Ui that records what a component says, for
// tests that check the user is told what happened (progress, clean-up).
package uitest

import (
	"fmt"
	"io"
	"strings"
	"sync"
)

// UI records every line. It is safe for concurrent use, as the Packer RPC
// server calls it from several goroutines.
type UI struct {
	mu    sync.Mutex
	lines []string
}

func (u *UI) add(kind, s string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.lines = append(u.lines, kind+": "+s)
}

// Lines returns the recorded lines, each prefixed with its kind ("say",
// "error", "machine").
func (u *UI) Lines() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.lines...)
}

// Text is all lines joined with newlines.
func (u *UI) Text() string { return strings.Join(u.Lines(), "\n") }

// Contains reports whether any line contains s.
func (u *UI) Contains(s string) bool { return strings.Contains(u.Text(), s) }

func (u *UI) Ask(q string) (string, error) { return "", fmt.Errorf("uitest: no input for %q", q) }
func (u *UI) Askf(q string, args ...any) (string, error) {
	return u.Ask(fmt.Sprintf(q, args...))
}
func (u *UI) Say(s string)                     { u.add("say", s) }
func (u *UI) Sayf(f string, args ...any)       { u.add("say", fmt.Sprintf(f, args...)) }
func (u *UI) Message(s string)                 { u.add("say", s) }
func (u *UI) Error(s string)                   { u.add("error", s) }
func (u *UI) Errorf(f string, args ...any)     { u.add("error", fmt.Sprintf(f, args...)) }
func (u *UI) Machine(t string, args ...string) { u.add("machine", t+" "+strings.Join(args, ",")) }

// TrackProgress passes the stream through untracked.
func (u *UI) TrackProgress(src string, cur, total int64, stream io.ReadCloser) io.ReadCloser {
	return stream
}
