package server

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
)

// The responses the server makes on its own (a request it cannot parse,
// route or take, a timeout, a handler's panic), in one place: rendered by
// Config.ErrorHandler when there is one, as text/plain otherwise.

// ErrorHandler renders a response the server makes on its own, in the
// API's format. See Config.ErrorHandler.
type ErrorHandler func(c *Ctx, code int, msg string)

// MaxErrorResponse bounds what an ErrorHandler may write: body bytes plus
// the added headers' names and values. Beyond it the default response is
// sent instead (and logged): an error response must stay small, whatever
// the request that caused it.
const MaxErrorResponse = 4 << 10

// serverError makes the response of c the server's own response code,
// with msg (today's text, without the newline) as its reason: through
// the ErrorHandler when there is one and it succeeds, else as msg and a
// newline in text/plain. c.nheaders holds the headers the response must
// carry whatever renders it (405's Allow).
func (w *worker) serverError(c *Ctx, code int, msg string) {
	if h := w.srv.cfg.ErrorHandler; h != nil && w.runErrorHandler(h, c, code, msg) {
		return
	}
	c.status = code
	c.contentType = "text/plain"
	w.body = append(append(w.body[:0], msg...), '\n')
}

// runErrorHandler runs h for the response code and reports whether what
// it made may be sent: not when it panicked or wrote more than
// MaxErrorResponse. Whatever it does, the status stays code and a
// connection the server closes stays closed; on failure c's headers are
// back to those it had before.
func (w *worker) runErrorHandler(h ErrorHandler, c *Ctx, code int, msg string) (ok bool) {
	keep, closeConn := c.nheaders, c.closeConn
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(w.srv.cfg.Log, "hotpath: ErrorHandler panic for %d (sent the default response): %s\n", code, panicString(p))
			ok = false
		}
		if !ok {
			c.nheaders = keep
			c.closeConn = closeConn
		}
	}()
	c.status = code
	c.contentType = ""
	w.body = w.body[:0]
	h(c, code, msg)
	c.status = code
	c.closeConn = c.closeConn || closeConn
	size := len(w.body) + len(c.contentType)
	for i := range c.nheaders {
		size += len(c.headers[i][0]) + len(c.headers[i][1])
	}
	if size > MaxErrorResponse {
		fmt.Fprintf(w.srv.cfg.Log, "hotpath: ErrorHandler wrote %d bytes for %d, more than %d (sent the default response)\n", size, code, MaxErrorResponse)
		return false
	}
	return true
}

// appendError appends the response to a request that could not be parsed
// or served, or to a connection that sent none in time; the connection
// closes after it. The answer to HEAD carries the length of the body it
// does not send. withReq: w.ctx.req holds cn's request as far as it was
// parsed; otherwise the ErrorHandler sees an empty request.
func (w *worker) appendError(out []byte, cn *conn, status int, reason string, head, withReq bool) []byte {
	if h := w.srv.cfg.ErrorHandler; h != nil {
		c := &w.ctx
		c.c = cn
		if !withReq {
			r := &c.req
			r.Method, r.Target, r.Path, r.Query, r.Host, r.Body = nil, nil, nil, nil, nil, nil
			r.NumHeaders, r.ContentLength, r.Minor = 0, -1, 1
		}
		c.leaf, c.value = nil, nil
		c.nheaders = 0
		c.closeConn = true
		w.scratch = w.scratch[:0]
		if w.runErrorHandler(h, c, status, reason) {
			c.closeConn = true
			return w.appendResponse(out, c, head)
		}
	}
	out = appendStatusLine(out, status)
	out = append(out, w.srv.serverHeader...)
	out = append(out, w.date...)
	out = append(out, "Content-Type: text/plain\r\nContent-Length: "...)
	out = strconv.AppendInt(out, int64(len(reason)+1), 10)
	out = append(out, "\r\nConnection: close\r\n\r\n"...)
	if head {
		return out
	}
	out = append(out, reason...)
	return append(out, '\n')
}

// panicFrames is how many frames of a panicking handler's stack the log
// line shows: the panic's site and its callers up to the worker.
const panicFrames = 8

// logPanic writes one log entry for a handler's panic: its value and the
// first frames of the stack from the panic's site (the runtime's own
// frames left out), each "function (file:line)". It runs on the panic
// path only, so it may allocate. Called from the loop's deferred recover
// (loopOnce, readRecovering: recoverTurn),
// where the panicking frames are still on the stack.
func (w *worker) logPanic(p any) {
	var pcs [64]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	var b strings.Builder
	b.WriteString("hotpath: handler panic: ")
	b.WriteString(panicString(p))
	b.WriteString(" (500 sent, connection closed)")
	afterPanic, shown := false, 0
	for {
		f, more := frames.Next()
		switch {
		case !afterPanic:
			afterPanic = f.Function == "runtime.gopanic" || strings.HasPrefix(f.Function, "runtime.panic") || f.Function == "runtime.sigpanic"
		case strings.HasPrefix(f.Function, "runtime."):
		case strings.HasSuffix(f.Function, "server.(*worker).serve"):
			more = false
		default:
			fmt.Fprintf(&b, "\n\t%s (%s:%d)", f.Function, f.File, f.Line)
			shown++
		}
		if !more || shown == panicFrames {
			break
		}
	}
	b.WriteByte('\n')
	w.srv.cfg.Log.Write([]byte(b.String()))
}

// panicString is p for the log, at most 256 bytes of it. fmt recovers a
// panic in p's Error or String method, which here would be a second panic
// in a deferred call and end the worker.
func panicString(p any) string {
	s := fmt.Sprint(p)
	if len(s) > 256 {
		s = s[:256] + "..."
	}
	return s
}
