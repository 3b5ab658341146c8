// Package consolelog reads a saved serial console log of a hotpath
// appliance (the QEMU console file, or EC2's get-console-output, as text
// or as the JSON the AWS CLI prints) and turns it into a checklist: the
// boot steps with their outcome, the facts of the boot report, the
// workload's events, and the problems in the order they appeared, so that
// what failed first is at the top of the list.
//
// It works on what a console can hold: EC2 keeps only the last 64 KiB, so
// a log may start after the kernel's first lines or the step lines; the
// boot report, when present, is the complete account of the steps, and
// without it (a boot that never got its workload ready) the steps are
// taken from the init's "step" log lines.
package consolelog

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/hotpath-dev/hotpath/init/console"
	"github.com/hotpath-dev/hotpath/init/report"
)

// Step is one boot step as the log tells it.
type Step struct {
	Name   string
	Status report.Status
	Why    string // the skip reason or the error
	Line   int    // console line of the init's step line, 0 if only in the report
}

// Event is a workload event with its console line.
type Event struct {
	report.Event
	Line int
}

// Problem is something that went wrong, in console order.
type Problem struct {
	Line int
	What string
}

// Log is what a console log says about the last boot in it.
type Log struct {
	Boots     int    // kernel starts seen ("Linux version" lines)
	Kernel    string // the kernel's version line of the last boot
	Truncated bool   // the log starts after the kernel's first line (e.g. EC2's 64 KiB tail)
	Report    *report.Report
	Steps     []Step
	Events    []Event
	Problems  []Problem
	LastInit  string // the last line the init logged
	Lines     int
}

// kernelProblem matches kernel lines that mean trouble.
var kernelProblem = regexp.MustCompile(`Kernel panic|BUG: |Oops|general protection fault|WARNING: CPU|Out of memory|hung_task|soft lockup|RCU stall|segfault`)

// stepLine matches the init's step log lines (init/main.go logStep).
var stepLine = regexp.MustCompile(`^step (.+?): (applied|skipped: |FAILED: )(.*)$`)

// ansi matches terminal escape sequences (firmware output on the console).
var ansi = regexp.MustCompile(`\x1b\[[0-9;?=]*[A-Za-z]`)

// Read reads a console log; see Parse for what it accepts.
func Read(r io.Reader) (*Log, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("consolelog: %w", err)
	}
	return Parse(b)
}

// Parse parses a console log: plain text, or the JSON of
// `aws ec2 get-console-output` ({"Output": "..."}, the text itself or,
// from the raw API, base64 of it).
func Parse(b []byte) (*Log, error) {
	text, err := unwrap(b)
	if err != nil {
		return nil, err
	}
	l := &Log{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 8<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimRight(ansi.ReplaceAllString(sc.Text(), ""), "\r")
		l.line(n, line)
	}
	l.Lines = n
	if err := sc.Err(); err != nil {
		return l, fmt.Errorf("consolelog: %w", err)
	}
	l.finish()
	return l, nil
}

func unwrap(b []byte) ([]byte, error) {
	t := bytes.TrimSpace(b)
	if len(t) == 0 || t[0] != '{' {
		return b, nil
	}
	var out struct {
		Output *string `json:"Output"`
	}
	if err := json.Unmarshal(t, &out); err != nil || out.Output == nil {
		return b, nil // a log that starts with "{" is still a log
	}
	s := *out.Output
	if !strings.Contains(s, "\n") {
		if dec, err := base64.StdEncoding.DecodeString(s); err == nil {
			return dec, nil
		}
	}
	return []byte(s), nil
}

func (l *Log) line(n int, line string) {
	if i := strings.Index(line, "Linux version "); i >= 0 {
		// A new boot: what came before belongs to an earlier one.
		l.Boots++
		*l = Log{Boots: l.Boots, Kernel: strings.TrimSpace(line[i:])}
		return
	}
	if i := strings.Index(line, report.ReportPrefix); i >= 0 {
		var rep report.Report
		if err := json.Unmarshal([]byte(line[i+len(report.ReportPrefix):]), &rep); err != nil {
			l.Problems = append(l.Problems, Problem{n, "boot report line does not parse: " + err.Error()})
			return
		}
		l.Report = &rep
		return
	}
	if i := strings.Index(line, report.EventPrefix); i >= 0 {
		var ev report.Event
		if err := json.Unmarshal([]byte(line[i+len(report.EventPrefix):]), &ev); err != nil {
			l.Problems = append(l.Problems, Problem{n, "event line does not parse: " + err.Error()})
			return
		}
		l.Events = append(l.Events, Event{ev, n})
		switch {
		case ev.Kind == report.EventCrashLoop:
			l.Problems = append(l.Problems, Problem{n, fmt.Sprintf("workload crash loop: %d exits within the window (last: %s)", ev.Exits, ev.Detail)})
		case ev.Kind == report.EventUnresponsive:
			l.Problems = append(l.Problems, Problem{n, fmt.Sprintf("workload pid %d stopped answering the liveness probe: %s", ev.PID, ev.Detail)})
		case ev.Kind == report.EventExit && ev.Detail != "exit status 0" && !l.stopping():
			l.Problems = append(l.Problems, Problem{n, fmt.Sprintf("workload pid %d exited: %s", ev.PID, ev.Detail)})
		}
		return
	}
	if i := strings.Index(line, console.Prefix); i >= 0 {
		msg := line[i+len(console.Prefix):]
		l.LastInit = msg
		if m := stepLine.FindStringSubmatch(msg); m != nil {
			s := Step{Name: m[1], Line: n, Why: m[3]}
			switch m[2] {
			case "applied":
				s.Status, s.Why = report.Applied, ""
			case "skipped: ":
				s.Status = report.Skipped
			default:
				s.Status = report.Failed
				l.Problems = append(l.Problems, Problem{n, "step " + s.Name + " failed: " + s.Why})
			}
			l.Steps = append(l.Steps, s)
			return
		}
		switch {
		case strings.HasPrefix(msg, "PANIC"):
			l.Problems = append(l.Problems, Problem{n, "init: " + msg})
		case strings.HasPrefix(msg, "UNKNOWN configuration keys"):
			l.Problems = append(l.Problems, Problem{n, "init: " + msg})
		case strings.HasPrefix(msg, "init in fallback mode"),
			strings.HasPrefix(msg, "NOT READY"),
			strings.HasPrefix(msg, "user-data REJECTED"):
			l.Problems = append(l.Problems, Problem{n, "init: " + msg})
		}
		return
	}
	if kernelProblem.MatchString(line) {
		l.Problems = append(l.Problems, Problem{n, "kernel: " + strings.TrimSpace(line)})
	}
}

// stopping reports whether a shutdown began: exits after it are expected.
func (l *Log) stopping() bool {
	for _, e := range l.Events {
		if e.Kind == report.EventShutdown {
			return true
		}
	}
	return false
}

// finish merges the boot report's steps (the complete list) with the step
// lines seen, and notes what is missing.
func (l *Log) finish() {
	l.Truncated = l.Boots == 0
	if l.Report != nil {
		seen := map[string]int{}
		for i, s := range l.Steps {
			seen[s.Name] = i
		}
		steps := make([]Step, 0, len(l.Report.Steps))
		for _, rs := range l.Report.Steps {
			s := Step{Name: rs.Name, Status: rs.Status, Why: rs.Reason + rs.Error}
			if i, ok := seen[rs.Name]; ok {
				s.Line = l.Steps[i].Line
			}
			if s.Status == report.Failed && s.Line == 0 {
				// Its step line was cut off: the report is the only witness.
				l.Problems = append([]Problem{{0, "step " + s.Name + " failed: " + s.Why}}, l.Problems...)
			}
			steps = append(steps, s)
		}
		l.Steps = steps
		if l.Report.ReadyError != "" {
			l.Problems = append(l.Problems, Problem{0, "workload not ready: " + l.Report.ReadyError})
		}
		return
	}
	last := "nothing"
	if l.LastInit != "" {
		last = fmt.Sprintf("%q", l.LastInit)
	}
	l.Problems = append(l.Problems, Problem{l.Lines, "no boot report: the workload never became ready (or the log ends before); the init's last line was " + last})
}

// FirstFailure returns the earliest problem, or false if there is none.
func (l *Log) FirstFailure() (Problem, bool) {
	if len(l.Problems) == 0 {
		return Problem{}, false
	}
	return l.Problems[0], true
}
