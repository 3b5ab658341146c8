package server

import (
	"net/netip"
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
// returns. A deferred request (Defer) gets a Ctx of its own, with a copy
// of the request, which the function passed to Deferred.Finish receives.
type Ctx struct {
	w *worker
	c *conn

	req http1.Request

	status      int
	contentType string
	headers     [maxRespHeaders][2]string
	nheaders    int
	closeConn   bool

	leaf  *leaf                // the matched route; nil for the server's own responses
	vals  [maxWildcards][]byte // the wildcards' values, in leaf.pat.names order
	value any                  // SetValue's
}

// Method returns the request method.
func (c *Ctx) Method() []byte { return c.req.Method }

// Path returns the request path, without the query.
func (c *Ctx) Path() []byte { return c.req.Path }

// Query returns the raw query string (after '?'), or nil.
func (c *Ctx) Query() []byte { return c.req.Query }

// PathValue returns the value of the wildcard name in the matched pattern
// ("/v1/items/{id}": PathValue("id")), or nil when the pattern has no such
// wildcard. The value is percent-decoded (a '+' stays a '+', as in a
// path). It is a slice of the request (or of the worker's scratch space
// when the segment held an escape): valid until the handler returns.
func (c *Ctx) PathValue(name string) []byte {
	if c.leaf == nil {
		return nil
	}
	for i, n := range c.leaf.pat.names {
		if n == name {
			return c.vals[i]
		}
	}
	return nil
}

// Pattern returns the pattern of the matched route as registered, method
// first ("GET /v1/items/{id}"; just the path for a route registered for
// every method): a label for per-route metrics that cannot grow with the
// paths clients send. It is "" in Config.ErrorHandler for a request no
// route took (404, 405, and errors before routing).
func (c *Ctx) Pattern() string {
	if c.leaf == nil {
		return ""
	}
	return c.leaf.pat.label
}

// QueryValue returns the first value of the query parameter name, and
// whether the query has it (a "name" without '=' has the value ""). Names
// and values are decoded as net/url.ParseQuery decodes them: '+' is a
// space, %XX a byte; a pair holding a ';' or a bad escape is skipped, as
// ParseQuery skips it (the request parser refuses a target with a bad
// escape with 400 anyway). A value that needs decoding is decoded into the
// worker's scratch space, which the next request reuses: the slice is
// valid until the handler returns. It does not allocate; each call scans
// the query, which is short.
func (c *Ctx) QueryValue(name string) ([]byte, bool) {
	return queryValue(c.req.Query, name, &c.w.scratch)
}

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

// Status returns the response status the handler set, 200 if it set
// none: what a middleware wrapping it reads after calling it. It is 0
// after Defer: the response is made later (a middleware sees it in a
// Deferred.OnDone function: see Ctx.Deferred).
func (c *Ctx) Status() int { return c.status }

// ResponseLen returns the length of the response body so far (what is
// sent; for HEAD, the Content-Length of the body that is not).
func (c *Ctx) ResponseLen() int { return len(c.w.body) }

// RemoteAddr returns the client's address and port, as accept4 gave them
// when the connection was accepted (no system call per request). An
// IPv4 client of a dual-stack listener is shown as IPv4 (not
// ::ffff:a.b.c.d); an IPv6 link-local address carries no zone.
func (c *Ctx) RemoteAddr() netip.AddrPort { return c.c.remote }

// Value returns what SetValue stored for this request; nil at the start of
// every request. It is how a middleware hands something to the handler it
// wraps (or the handler back to the middleware), like a value in
// net/http's Request.Context.
func (c *Ctx) Value() any { return c.value }

// SetValue stores v for this request. Storing a pointer (or a small
// scalar) does not allocate; a struct or string converted to an interface
// does: keep per-worker state behind a pointer.
func (c *Ctx) SetValue(v any) { c.value = v }

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

	w.scratch = w.scratch[:0]
	if c.value != nil {
		c.value = nil // a load rather than a store with its write barrier check
	}

	// The fast path, inline: the exact route of the previous request
	// (pipelines repeat one path). findRoute does the rest.
	var l *leaf
	if r := w.route; r != nil && equalShort(c.req.Path, r.path) {
		if m := c.req.Method; len(m) == 3 && m[0] == 'G' && m[1] == 'E' && m[2] == 'T' && r.get != nil {
			l = r.get
		} else {
			l = r.lookup(m)
		}
	}
	if l == nil {
		l = w.findRoute(c)
	}
	if c.leaf != l {
		c.leaf = l
	}
	if l != nil {
		if l.maxBody != 0 && int64(len(c.req.Body)) > l.maxBody {
			// The route's lower limit, for a body that arrived with
			// its head or a chunked one (awaitBody refuses the others
			// before they are buffered).
			return w.routeTooLarge(out, cn)
		}
		// A panic in l.h unwinds to the loop (recoverTurn), which
		// answers it 500 after the responses before it: they are out[:turnOut] of
		// w.out, kept on out's array when an append moved it.
		if cap(out) != cap(w.out) {
			w.out = out[:0]
		}
		w.turnOut = len(out)
		w.inHandler = true
		l.h(c)
		w.inHandler = false
	} else {
		w.notRouted(c)
	}
	if c.status < 200 || c.status > 599 {
		if w.pendingDefer != nil && c.status == 0 {
			return w.hold(out, cn) // Ctx.Defer: answered later
		}
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

// routeTooLarge refuses a request whose body is over its route's limit:
// 413 and a close. Out of line, so that serve does not pay for it.
//
//go:noinline
func (w *worker) routeTooLarge(out []byte, cn *conn) []byte {
	cn.closeAfter = true
	return w.appendError(out, cn, 413, http1.ErrBodyTooLarge.Reason, string(w.ctx.req.Method) == "HEAD", true)
}

// findRoute returns the route of the request in c, or nil, when the
// route of the previous request (serve's fast path) is not it. A request
// for an exact path registered for its method costs one map lookup; the
// tree is searched only for the other requests.
func (w *worker) findRoute(c *Ctx) *leaf {
	rt := &w.srv.routes
	r := rt.exact[string(c.req.Path)]
	if r != nil {
		w.route = r
		if l := r.lookup(c.req.Method); l != nil {
			return l
		}
	} else if len(rt.wild) == 0 {
		return nil // nothing else could match
	}
	return rt.find(c.req.Method, c.req.Path, &c.vals, &w.scratch)
}

// notRouted answers a request no route takes: 405 with Allow when routes
// of other methods match its path, else 404.
func (w *worker) notRouted(c *Ctx) {
	w.allow = w.srv.routes.appendAllow(w.allow[:0], c.req.Path, &c.vals, &w.scratch)
	if len(w.allow) == 0 {
		w.serverError(c, 404, "not found")
		return
	}
	// The worker's own buffer, rewritten only by the next 405.
	c.AddHeader("Allow", unsafe.String(unsafe.SliceData(w.allow), len(w.allow)))
	w.serverError(c, 405, "method not allowed")
}

// handlerPanicked answers the request whose handler panicked (p) with
// 500 and closes the connection after it, instead of taking the whole
// worker down. The loop recovers the panic (loopOnce, recoverTurn): no
// deferred call per request, nor per turn of a connection (one per turn
// in respond was ~30 of the ~1,300 instructions a plain /json request
// cost, cachegrind). What the handler wrote is dropped.
func (w *worker) handlerPanicked(out []byte, cn *conn, p any) []byte {
	w.inHandler = false
	w.abandonPending()
	c := &w.ctx
	c.status = 500
	c.nheaders = 0
	c.closeConn = true
	w.logPanic(p)
	w.serverError(c, 500, "internal server error")
	cn.closeAfter = true
	return w.appendResponse(out, c, string(c.req.Method) == "HEAD")
}

// jsonType is the Content-Type of WriteJSON's responses.
const jsonType = "application/json"

func (w *worker) appendResponse(out []byte, c *Ctx, head bool) []byte {
	// WriteJSON's Content-Type is the constant itself: comparing where
	// the strings' bytes are, not the bytes, spares a call to memequal.
	// Any other "application/json" takes the general path below, which
	// writes the same bytes.
	isJSON := unsafe.StringData(c.contentType) == unsafe.StringData(jsonType) && len(c.contentType) == len(jsonType)
	if isJSON && c.status == 200 && c.nheaders == 0 && !c.closeConn && c.req.Minor == 1 {
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
