package logship

import (
	"bytes"
	"io"
	"strings"
	"sync"

	"github.com/hotpath-dev/hotpath/init/console"
	"github.com/hotpath-dev/hotpath/init/report"
)

// maxLine is the longest line kept whole; a longer one is shipped in
// pieces of at least this size.
const maxLine = 64 << 10

// Copy copies the workload's output from r (the read end of its stdout or
// stderr pipe) to out (the console) as it comes, a partial line included,
// and calls line for each line of it (without the newline; the rest of an
// unterminated last line when r ends). It returns when r ends. A line is
// shipped only after its console write: the console is the primary log,
// and when it is slow the workload waits for it exactly as when it wrote to
// the console itself.
func Copy(out io.Writer, r io.Reader, line func(string)) error {
	w := &LineWriter{Out: out, Line: line}
	_, err := io.Copy(w, r)
	w.Flush()
	return err
}

// LineWriter is an io.Writer that passes every write to Out and calls
// Line for each complete line written (without the newline). The init's
// console writes whole lines, so nothing usually waits in it.
type LineWriter struct {
	Out  io.Writer
	Line func(string)

	mu      sync.Mutex
	partial []byte
}

// Write implements io.Writer.
func (w *LineWriter) Write(p []byte) (int, error) {
	n, err := len(p), error(nil)
	if w.Out != nil {
		n, err = w.Out.Write(p)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			w.partial = append(w.partial, rest...)
			if len(w.partial) >= maxLine {
				w.emit(w.partial)
				w.partial = w.partial[:0]
			}
			break
		}
		if len(w.partial) > 0 {
			w.partial = append(w.partial, rest[:i]...)
			w.emit(w.partial)
			w.partial = w.partial[:0]
		} else {
			w.emit(rest[:i])
		}
		rest = rest[i+1:]
	}
	return n, err
}

// Flush passes on a partial last line.
func (w *LineWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.emit(w.partial)
	w.partial = w.partial[:0]
}

func (w *LineWriter) emit(b []byte) {
	if l := strings.TrimRight(string(b), "\r"); l != "" {
		w.Line(l)
	}
}

// Init names the init in APP-NAME.
const Init = "hotpath-init"

// InitMessage makes a message of one line the init wrote to the console
// (as console.OnLine hands it over): a log line ("hotpath-init: ..."), the
// boot report (MSGID "report") or an event (MSGID "event"), with the
// console's prefix taken off the text of log lines. Severity: a failed
// step, a panic or a crash loop is an error (or critical for a panic); a
// crash-loop event a warning; other events notice; the rest info. Any
// other line is not the init's and is not shipped: ok false.
func InitMessage(line string) (m Message, ok bool) {
	m = Message{Facility: FacilityDaemon, Severity: SeverityInfo, App: Init}
	switch {
	case strings.HasPrefix(line, report.ReportPrefix):
		m.MsgID = "report"
		m.Severity = SeverityNotice
		m.Text = strings.TrimSpace(line)
	case strings.HasPrefix(line, report.EventPrefix):
		m.MsgID = "event"
		m.Severity = SeverityNotice
		m.Text = strings.TrimSpace(line)
		if strings.Contains(m.Text, `"kind":"`+report.EventCrashLoop+`"`) {
			m.Severity = SeverityWarning
		}
	case strings.HasPrefix(line, console.Prefix):
		m.MsgID = "log"
		m.Text = strings.TrimPrefix(line, console.Prefix)
		switch {
		case strings.HasPrefix(m.Text, "PANIC"):
			m.Severity = SeverityCrit
		case strings.Contains(m.Text, "FAILED") || strings.HasPrefix(m.Text, "CRASH LOOP"):
			m.Severity = SeverityErr
		}
	default:
		return Message{}, false
	}
	return m, true
}
