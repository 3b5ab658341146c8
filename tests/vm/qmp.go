package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// QMP is a client of the QEMU Machine Protocol over a unix socket: one JSON
// object per line; the server greets, the client negotiates capabilities,
// then each command gets one "return" or "error" reply, with asynchronous
// "event" messages interleaved anywhere. The harness needs only a few
// commands, so this small client is simpler than a dependency.
type QMP struct {
	conn net.Conn
	r    *bufio.Reader

	mu       sync.Mutex // serialises commands
	Greeting QMPGreeting
	events   []QMPEvent
	evmu     sync.Mutex
}

// QMPGreeting is the server's first message.
type QMPGreeting struct {
	QMP struct {
		Version struct {
			QEMU struct {
				Major int `json:"major"`
				Minor int `json:"minor"`
				Micro int `json:"micro"`
			} `json:"qemu"`
		} `json:"version"`
		Capabilities []string `json:"capabilities"`
	} `json:"QMP"`
}

// QMPEvent is an asynchronous event (e.g. POWERDOWN, SHUTDOWN).
type QMPEvent struct {
	Event     string          `json:"event"`
	Data      json.RawMessage `json:"data"`
	Timestamp struct {
		Seconds      int64 `json:"seconds"`
		Microseconds int64 `json:"microseconds"`
	} `json:"timestamp"`
}

// QMPError is an error reply.
type QMPError struct {
	Class string `json:"class"`
	Desc  string `json:"desc"`
}

func (e *QMPError) Error() string { return "qmp: " + e.Class + ": " + e.Desc }

type qmpMessage struct {
	QMP    json.RawMessage `json:"QMP"`
	Return json.RawMessage `json:"return"`
	Error  *QMPError       `json:"error"`
	QMPEvent
}

// DialQMP connects to the socket at path, retrying until it exists or ctx
// ends (QEMU creates it shortly after starting), reads the greeting and
// negotiates capabilities.
func DialQMP(ctx context.Context, path string) (*QMP, error) {
	var conn net.Conn
	for {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", path)
		if err == nil {
			conn = c
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("qmp dial %s: %w (last error: %v)", path, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	q := &QMP{conn: conn, r: bufio.NewReader(conn)}
	if err := q.handshake(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return q, nil
}

func (q *QMP) handshake(ctx context.Context) error {
	stop := q.deadline(ctx)
	defer stop()
	line, err := q.r.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("qmp greeting: %w", err)
	}
	if err := json.Unmarshal(line, &q.Greeting); err != nil || q.Greeting.QMP.Version.QEMU.Major == 0 {
		return fmt.Errorf("qmp greeting: not a QMP greeting: %q", line)
	}
	if _, err := q.execute("qmp_capabilities", nil); err != nil {
		return fmt.Errorf("qmp_capabilities: %w", err)
	}
	return nil
}

// deadline makes blocking reads and writes end when ctx does.
func (q *QMP) deadline(ctx context.Context) (stop func()) {
	if d, ok := ctx.Deadline(); ok {
		q.conn.SetDeadline(d)
	} else {
		q.conn.SetDeadline(time.Time{})
	}
	cancel := context.AfterFunc(ctx, func() { q.conn.SetDeadline(time.Now()) })
	return func() { cancel() }
}

// Execute runs one command and returns its "return" value. Events that
// arrive meanwhile are kept (see Events).
func (q *QMP) Execute(ctx context.Context, cmd string, args any) (json.RawMessage, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	stop := q.deadline(ctx)
	defer stop()
	ret, err := q.execute(cmd, args)
	if err != nil {
		return nil, fmt.Errorf("qmp %s: %w", cmd, err)
	}
	return ret, nil
}

func (q *QMP) execute(cmd string, args any) (json.RawMessage, error) {
	req := map[string]any{"execute": cmd}
	if args != nil {
		req["arguments"] = args
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, err := q.conn.Write(append(b, '\n')); err != nil {
		return nil, err
	}
	for {
		line, err := q.r.ReadBytes('\n')
		if err != nil {
			return nil, err
		}
		var m qmpMessage
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, fmt.Errorf("bad message %q: %w", line, err)
		}
		switch {
		case m.Error != nil:
			return nil, m.Error
		case m.Return != nil:
			return m.Return, nil
		case m.Event != "":
			q.evmu.Lock()
			q.events = append(q.events, m.QMPEvent)
			q.evmu.Unlock()
		default:
			return nil, fmt.Errorf("unexpected message %q", line)
		}
	}
}

// Events returns the events received so far.
func (q *QMP) Events() []QMPEvent {
	q.evmu.Lock()
	defer q.evmu.Unlock()
	return append([]QMPEvent(nil), q.events...)
}

// SystemPowerdown presses the ACPI power button.
func (q *QMP) SystemPowerdown(ctx context.Context) error {
	_, err := q.Execute(ctx, "system_powerdown", nil)
	return err
}

// Status returns the VM's run state ("running", "paused", ...).
func (q *QMP) Status(ctx context.Context) (string, error) {
	ret, err := q.Execute(ctx, "query-status", nil)
	if err != nil {
		return "", err
	}
	var st struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(ret, &st); err != nil {
		return "", fmt.Errorf("qmp query-status: %w", err)
	}
	return st.Status, nil
}

// Quit stops QEMU at once. QEMU may close the socket before or right after
// its reply; both mean success.
func (q *QMP) Quit(ctx context.Context) error {
	_, err := q.Execute(ctx, "quit", nil)
	if err != nil && (errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isConnReset(err)) {
		return nil
	}
	return err
}

func isConnReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

// Close closes the connection.
func (q *QMP) Close() error { return q.conn.Close() }
