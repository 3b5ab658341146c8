package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"time"
)

// DialFunc opens a new TCP connection to the guest's HTTP port.
type DialFunc func(ctx context.Context) (net.Conn, error)

// Expect is one endpoint and the response it must give.
type Expect struct {
	Path        string
	ContentType string // prefix, e.g. "text/plain" matches "text/plain; charset=utf-8"
	Body        string
}

// The TechEmpower endpoints of the default workload.
var (
	JSON      = Expect{"/json", "application/json", `{"message":"Hello, World!"}`}
	Plaintext = Expect{"/plaintext", "text/plain", "Hello, World!"}
)

func request(path string) string {
	return "GET " + path + " HTTP/1.1\r\nHost: hotpath\r\nUser-Agent: hotpath-e2e\r\n\r\n"
}

// Response is a response read byte by byte off the wire.
type Response struct {
	Status string // status line without CRLF
	Header textproto.MIMEHeader
	Body   []byte
}

// ReadResponse reads one HTTP/1.1 response strictly: CRLF line ends, no
// folded or malformed header lines, no duplicate Content-Length, and a
// body of exactly Content-Length bytes (the only framing hotpath uses).
func ReadResponse(r *bufio.Reader) (*Response, error) {
	readLine := func() (string, error) {
		l, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		if !strings.HasSuffix(l, "\r\n") {
			return "", fmt.Errorf("line %q does not end in CRLF", l)
		}
		return strings.TrimSuffix(l, "\r\n"), nil
	}
	status, err := readLine()
	if err != nil {
		return nil, fmt.Errorf("status line: %w", err)
	}
	resp := &Response{Status: status, Header: textproto.MIMEHeader{}}
	for {
		l, err := readLine()
		if err != nil {
			return nil, fmt.Errorf("header: %w", err)
		}
		if l == "" {
			break
		}
		k, v, ok := strings.Cut(l, ":")
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("malformed header line %q", l)
		}
		resp.Header.Add(k, strings.TrimLeft(v, " \t"))
	}
	cls := resp.Header.Values("Content-Length")
	if len(cls) != 1 {
		return nil, fmt.Errorf("%s: %d Content-Length headers, want 1", status, len(cls))
	}
	n, err := strconv.Atoi(cls[0])
	if err != nil || n < 0 {
		return nil, fmt.Errorf("Content-Length %q", cls[0])
	}
	resp.Body = make([]byte, n)
	if _, err := io.ReadFull(r, resp.Body); err != nil {
		return nil, fmt.Errorf("body of %d bytes: %w", n, err)
	}
	return resp, nil
}

// Check verifies resp against e: 200, content type, exact body, a valid
// Date in the HTTP format.
func (e Expect) Check(resp *Response) error {
	var errs []error
	if resp.Status != "HTTP/1.1 200 OK" {
		errs = append(errs, fmt.Errorf("status %q, want HTTP/1.1 200 OK", resp.Status))
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, e.ContentType) {
		errs = append(errs, fmt.Errorf("Content-Type %q, want %s", ct, e.ContentType))
	}
	if string(resp.Body) != e.Body {
		errs = append(errs, fmt.Errorf("body %q, want %q", resp.Body, e.Body))
	}
	d := resp.Header.Get("Date")
	if t, err := time.Parse(http.TimeFormat, d); err != nil || t.Format(http.TimeFormat) != d {
		errs = append(errs, fmt.Errorf("Date %q is not in the HTTP date format", d))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("GET %s: %w", e.Path, err)
	}
	return nil
}

func dialDeadline(ctx context.Context, dial DialFunc) (net.Conn, error) {
	c, err := dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	return c, nil
}

// CheckGet sends one request on a new connection and checks the response.
func CheckGet(ctx context.Context, dial DialFunc, e Expect) error {
	c, err := dialDeadline(ctx, dial)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := io.WriteString(c, request(e.Path)); err != nil {
		return err
	}
	resp, err := ReadResponse(bufio.NewReader(c))
	if err != nil {
		return fmt.Errorf("GET %s: %w", e.Path, err)
	}
	return e.Check(resp)
}

// CheckPipelined writes every request in one write and checks that the
// responses come back in order, then that the connection stays open for
// one more request (keep-alive).
func CheckPipelined(ctx context.Context, dial DialFunc, reqs []Expect) error {
	c, err := dialDeadline(ctx, dial)
	if err != nil {
		return err
	}
	defer c.Close()
	var all bytes.Buffer
	for _, e := range reqs {
		all.WriteString(request(e.Path))
	}
	if _, err := c.Write(all.Bytes()); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	for i, e := range reqs {
		resp, err := ReadResponse(r)
		if err != nil {
			return fmt.Errorf("pipelined response %d of %d (%s): %w", i+1, len(reqs), e.Path, err)
		}
		if err := e.Check(resp); err != nil {
			return fmt.Errorf("pipelined response %d of %d: %w", i+1, len(reqs), err)
		}
	}
	if r.Buffered() != 0 {
		return fmt.Errorf("%d bytes after the last pipelined response", r.Buffered())
	}
	if _, err := io.WriteString(c, request(reqs[0].Path)); err != nil {
		return fmt.Errorf("keep-alive after pipelining: %w", err)
	}
	resp, err := ReadResponse(r)
	if err != nil {
		return fmt.Errorf("keep-alive after pipelining: %w", err)
	}
	return reqs[0].Check(resp)
}

// CheckStatus sends raw bytes and checks the status code; with wantClose,
// it also checks that the server then closes the connection.
func CheckStatus(ctx context.Context, dial DialFunc, raw string, code int, wantClose bool) error {
	c, err := dialDeadline(ctx, dial)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	resp, err := ReadResponse(r)
	if err != nil {
		return fmt.Errorf("request %q: %w", raw, err)
	}
	if !strings.HasPrefix(resp.Status, "HTTP/1.1 "+strconv.Itoa(code)+" ") {
		return fmt.Errorf("request %q: status %q, want %d", raw, resp.Status, code)
	}
	if !wantClose {
		return nil
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	n, err := r.Read(b[:])
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, syscallECONNRESET):
		return nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("request %q: connection still open 5s after the %d", raw, code)
	case n > 0:
		return fmt.Errorf("request %q: more bytes after the %d response", raw, code)
	default:
		return fmt.Errorf("request %q: after the response: %w", raw, err)
	}
}
