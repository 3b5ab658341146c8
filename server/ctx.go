package server

import (
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hotpath-dev/hotpath/server/http1"
	"github.com/hotpath-dev/hotpath/server/jsonenc"
)

// JSONAppender is a value that appends its own JSON encoding, normally
// written with a jsonenc.Encoder (see Example).
type JSONAppender = jsonenc.Appender

const maxRespHeaders = 16

// Ctx is one request and the response being built for it. A worker reuses
// one Ctx for all its requests: keep nothing from it after the handler
// returns.
type Ctx struct {
	w *worker
	c *conn

	req http1.Request

	status      int
	contentType string
	headers     [maxRespHeaders][2]string
	nheaders    int
	closeConn   bool
}

// Method returns the request method.
func (c *Ctx) Method() []byte { return c.req.Method }

// Path returns the request path, without the query.
func (c *Ctx) Path() []byte { return c.req.Path }

// Query returns the raw query string (after '?'), or nil.
func (c *Ctx) Query() []byte { return c.req.Query }

// Header returns the first request header named name (case-insensitive).
func (c *Ctx) Header(name string) []byte { return c.req.Header(name) }

// Body returns the request body (Content-Length bytes, or the decoded
// chunked body; empty when none).
func (c *Ctx) Body() []byte { return c.req.Body }

// Request gives access to the whole parsed request.
func (c *Ctx) Request() *http1.Request { return &c.req }

// SetStatus sets the response status (200-599); the default is 200.
func (c *Ctx) SetStatus(code int) { c.status = code }

// SetContentType sets the Content-Type header. A value with a control
// character (CR, LF, ...) is refused: it reports false and changes nothing.
func (c *Ctx) SetContentType(ct string) bool {
	if !http1.ValidFieldValue(ct) {
		return false
	}
	c.contentType = ct
	return true
}

// AddHeader adds a response header and reports whether it did. It refuses
// a name that is not a token, a value with a control character (a CR or
// LF would let the value write headers of its own, or a whole response),
// the headers that frame the response and are the server's own (Server,
// Date, Content-Length, Transfer-Encoding, Connection), and more than 16
// headers.
func (c *Ctx) AddHeader(name, value string) bool {
	if c.nheaders == maxRespHeaders || !http1.ValidFieldName(name) || !http1.ValidFieldValue(value) || reservedHeader(name) {
		return false
	}
	c.headers[c.nheaders] = [2]string{name, value}
	c.nheaders++
	return true
}

func reservedHeader(name string) bool {
	for _, r := range [...]string{"Server", "Date", "Content-Length", "Transfer-Encoding", "Connection"} {
		if len(name) == len(r) && strings.EqualFold(name, r) {
			return true
		}
	}
	return false
}

// Close makes the server close the connection after this response.
func (c *Ctx) Close() { c.closeConn = true }

// Write appends p to the response body; it never fails.
func (c *Ctx) Write(p []byte) (int, error) {
	c.w.body = append(c.w.body, p...)
	return len(p), nil
}

// WriteString appends s to the response body.
func (c *Ctx) WriteString(s string) { c.w.body = append(c.w.body, s...) }

// ResponseBody returns the response body so far, for appending to with
// append-style encoders; hand the result back with SetResponseBody:
//
//	ctx.SetResponseBody(strconv.AppendInt(ctx.ResponseBody(), n, 10))
func (c *Ctx) ResponseBody() []byte { return c.w.body }

// SetResponseBody replaces the response body. A b made by appending to
// ResponseBody (in the worker's own buffer) is adopted as it is; any other
// slice is copied. Adopting the handler's memory would let the next
// response be written into it: a cached []byte would be overwritten.
func (c *Ctx) SetResponseBody(b []byte) {
	if cap(b) > 0 && unsafe.SliceData(b) == unsafe.SliceData(c.w.body[:cap(c.w.body)]) {
		c.w.body = b
		return
	}
	c.w.body = append(c.w.body[:0], b...)
}

// Text sets a text/plain body.
func (c *Ctx) Text(s string) {
	c.contentType = "text/plain"
	c.w.body = append(c.w.body[:0], s...)
}

// JSON sets v's encoding as the body, with Content-Type application/json.
// Passing a value through the interface makes it escape, so a value built
// per request is allocated; use WriteJSON for a zero-allocation path.
func (c *Ctx) JSON(v JSONAppender) { WriteJSON(c, v) }

// WriteJSON is Ctx.JSON without the allocation: being generic, it calls
// T's AppendJSON directly, so a value type with a value receiver stays on
// the handler's stack (TestWriteJSONNoAllocs checks it). A pointer type
// still escapes.
func WriteJSON[T JSONAppender](c *Ctx, v T) {
	c.contentType = jsonType
	c.w.body = v.AppendJSON(c.w.body[:0])
}

// Error answers with code and a plain-text message.
func (c *Ctx) Error(code int, msg string) {
	c.status = code
	c.Text(msg)
}

// WorkerCPU returns the CPU of the worker serving this request.
func (c *Ctx) WorkerCPU() int { return c.w.cpu }

// IncomingCPU returns the socket's SO_INCOMING_CPU: the CPU that last
// processed a packet for this connection. It costs a system call.
func (c *Ctx) IncomingCPU() (int, error) {
	return unix.GetsockoptInt(c.c.fd, unix.SOL_SOCKET, unix.SO_INCOMING_CPU)
}

// serve routes the parsed request, runs the handler and appends the
// response to out.
func (w *worker) serve(out []byte, cn *conn) []byte {
	c := &w.ctx
	c.c = cn
	c.status = 200
	c.contentType = ""
	c.nheaders = 0
	c.closeConn = !c.req.KeepAlive || w.draining
	w.body = w.body[:0]

	r := w.route
	if r == nil || string(c.req.Path) != r.path {
		if r = w.srv.routes[string(c.req.Path)]; r != nil {
			w.route = r
		}
	}
	var h Handler
	if r != nil {
		h = r.lookup(c.req.Method)
	}
	switch {
	case h != nil:
		w.inHandler = true // a panic in h is recovered in respond
		h(c)
		w.inHandler = false
	case r != nil:
		c.Error(405, "method not allowed\n")
		c.AddHeader("Allow", r.allow)
	default:
		c.Error(404, "not found\n")
	}
	if c.status < 200 || c.status > 599 {
		// 1xx cannot be a final response; anything else is not a status.
		c.status = 500
	}
	if c.closeConn {
		cn.closeAfter = true
	}
	out = w.appendResponse(out, c, string(c.req.Method) == "HEAD")
	w.bodyHigh = max(w.bodyHigh, len(w.body))
	return out
}

// handlerPanicked answers the request whose handler panicked (p) with
// 500 and closes the connection after it, instead of taking the whole
// worker down. respond recovers the panic: one deferred call per turn of
// a connection rather than one per request (a deferred closure and
// runtime.gorecover were 42 of the 1,640 instructions a pipelined /json
// request cost, cachegrind). What the handler wrote is dropped.
func (w *worker) handlerPanicked(out []byte, cn *conn, p any) []byte {
	w.inHandler = false
	c := &w.ctx
	c.status = 500
	c.nheaders = 0
	c.closeConn = true
	c.contentType = "text/plain"
	w.body = append(w.body[:0], "internal server error\n"...)
	w.logPanic(p)
	cn.closeAfter = true
	return w.appendResponse(out, c, string(c.req.Method) == "HEAD")
}

func (w *worker) logPanic(p any) {
	w.srv.cfg.Log.Write([]byte("hotpath: handler panic: " + panicString(p) + "\n"))
}

func panicString(p any) string {
	switch v := p.(type) {
	case error:
		return v.Error()
	case string:
		return v
	default:
		return "non-error value"
	}
}

// jsonType is the Content-Type of WriteJSON's responses.
const jsonType = "application/json"

func (w *worker) appendResponse(out []byte, c *Ctx, head bool) []byte {
	if c.status == 200 && c.contentType == jsonType && c.nheaders == 0 && !c.closeConn && c.req.Minor == 1 {
		// The most common head, whole, in one append (see headJSON): it
		// saves the length's formatting and three appends, about 80 of
		// 1,800 instructions a pipelined /json request (cachegrind).
		if len(w.body) != w.headJSONLen {
			w.headJSON = append(w.headJSON[:0], w.head200JSON...)
			w.headJSON = strconv.AppendInt(w.headJSON, int64(len(w.body)), 10)
			w.headJSON = append(w.headJSON, "\r\n\r\n"...)
			w.headJSONLen = len(w.body)
		}
		out = append(out, w.headJSON...)
		if !head {
			out = append(out, w.body...)
		}
		return out
	}
	// 1xx, 204 and 304 responses carry neither a body nor its length.
	hasBody := c.status >= 200 && c.status != 204 && c.status != 304
	switch {
	case c.status == 200 && c.contentType == jsonType:
		// The head up to the length, in one append.
		out = append(out, w.head200JSON...)
		out = strconv.AppendInt(out, int64(len(w.body)), 10)
		out = append(out, "\r\n"...)
	default:
		if c.status == 200 {
			out = append(out, w.head200...)
		} else {
			out = appendStatusLine(out, c.status)
			out = append(out, w.srv.serverHeader...)
			out = append(out, w.date...)
		}
		if c.contentType != "" {
			out = append(out, "Content-Type: "...)
			out = append(out, c.contentType...)
			out = append(out, "\r\n"...)
		}
		if hasBody {
			out = append(out, "Content-Length: "...)
			out = strconv.AppendInt(out, int64(len(w.body)), 10)
			out = append(out, "\r\n"...)
		}
	}
	for i := range c.nheaders {
		out = append(out, c.headers[i][0]...)
		out = append(out, ": "...)
		out = append(out, c.headers[i][1]...)
		out = append(out, "\r\n"...)
	}
	switch {
	case c.closeConn:
		out = append(out, "Connection: close\r\n"...)
	case c.req.Minor == 0:
		out = append(out, "Connection: keep-alive\r\n"...)
	}
	out = append(out, "\r\n"...)
	if hasBody && !head {
		out = append(out, w.body...)
	}
	return out
}

// appendError appends the response to a request that could not be parsed
// or served; the connection closes after it. The answer to HEAD carries the
// length of the body it does not send.
func (w *worker) appendError(out []byte, status int, reason string, head bool) []byte {
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
