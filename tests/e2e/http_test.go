package e2e

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawServer answers every request it reads (any number per read) with
// respond's bytes, closing the connection when respond says so.
func rawServer(t *testing.T, respond func(reqLine string) (string, bool)) DialFunc {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					for { // skip the header block
						l, err := r.ReadString('\n')
						if err != nil || l == "\r\n" {
							break
						}
					}
					out, closeConn := respond(strings.TrimSpace(line))
					c.Write([]byte(out))
					if closeConn {
						return
					}
				}
			}()
		}
	}()
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", ln.Addr().String())
	}
}

func ok(ct, body string) string {
	return "HTTP/1.1 200 OK\r\nServer: x\r\nDate: " + time.Now().UTC().Format(http.TimeFormat) +
		"\r\nContent-Type: " + ct + "\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

func goodServer(line string) (string, bool) {
	switch {
	case strings.HasPrefix(line, "GET /json "):
		return ok("application/json", JSON.Body), false
	case strings.HasPrefix(line, "GET /plaintext "):
		return ok("text/plain", Plaintext.Body), false
	case strings.HasPrefix(line, "GET "):
		return "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", false
	}
	return "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", true
}

func TestHTTPChecksPass(t *testing.T) {
	dial := rawServer(t, goodServer)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, e := range []Expect{JSON, Plaintext} {
		if err := CheckGet(ctx, dial, e); err != nil {
			t.Error(err)
		}
	}
	if err := CheckPipelined(ctx, dial, []Expect{JSON, Plaintext, JSON, JSON}); err != nil {
		t.Error(err)
	}
	if err := CheckStatus(ctx, dial, "BOGUS\r\n\r\n", 400, true); err != nil {
		t.Error(err)
	}
	if err := CheckStatus(ctx, dial, request("/nope"), 404, false); err != nil {
		t.Error(err)
	}
}

func TestHTTPChecksFail(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name  string
		srv   func(string) (string, bool)
		check func(DialFunc) error
		want  string
	}{
		{"wrong body", func(string) (string, bool) { return ok("application/json", `{"message":"Hello World"}`), false },
			func(d DialFunc) error { return CheckGet(ctx, d, JSON) }, "body"},
		{"long content-length", func(string) (string, bool) {
			return strings.Replace(ok("application/json", JSON.Body), "Length: 27", "Length: 28", 1), true
		}, func(d DialFunc) error { return CheckGet(ctx, d, JSON) }, "body of 28 bytes"},
		{"LF only", func(string) (string, bool) {
			return strings.ReplaceAll(ok("application/json", JSON.Body), "\r\n", "\n"), false
		}, func(d DialFunc) error { return CheckGet(ctx, d, JSON) }, "CRLF"},
		{"bad date", func(string) (string, bool) {
			return strings.Replace(ok("application/json", JSON.Body), "GMT", "UTC", 1), false
		}, func(d DialFunc) error { return CheckGet(ctx, d, JSON) }, "Date"},
		{"content type", func(string) (string, bool) { return ok("text/html", JSON.Body), false },
			func(d DialFunc) error { return CheckGet(ctx, d, JSON) }, "Content-Type"},
		{"no pipelining", func(string) (string, bool) { return ok("application/json", JSON.Body), true },
			func(d DialFunc) error { return CheckPipelined(ctx, d, []Expect{JSON, JSON}) }, "pipelined response 2"},
		{"400 kept open", func(l string) (string, bool) {
			return "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", false
		}, func(d DialFunc) error { return CheckStatus(ctx, d, "BOGUS\r\n\r\n", 400, true) }, "still open"},
		{"200 for garbage", func(string) (string, bool) { return ok("text/plain", "x"), true },
			func(d DialFunc) error { return CheckStatus(ctx, d, "BOGUS\r\n\r\n", 400, true) }, "want 400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check(rawServer(t, tc.srv))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
