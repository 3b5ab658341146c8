// Package imds is the init's client of the EC2 instance metadata service,
// IMDSv2 only: every request carries a session token obtained with
// PUT /latest/api/token, and a plain (IMDSv1) GET is never sent. Redirects
// are never followed: the service does not send any, and following one
// would send the session token (or a request without it) to another host
// and take user-data from there. AMIs that
// hotpath registers require IMDSv2, so an IMDSv1 request would only be a
// 401 on EC2; not sending one also means a metadata proxy that strips the
// PUT cannot trick the init into the weaker protocol.
//
// Every request is short (the service answers in well under a millisecond
// on EC2) and bounded: a timeout per attempt and a small number of attempts
// with back-off, so that a missing or broken endpoint costs the boot a
// known few seconds at most. The base URL and the clock are fields, so that
// tests run the client against a strict fake on loopback and drive token
// expiry without sleeping.
package imds

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultBase is the link-local address of the EC2 instance metadata
// service.
const DefaultBase = "http://169.254.169.254"

// Header names of the IMDSv2 session protocol.
const (
	TokenHeader    = "X-aws-ec2-metadata-token"
	TokenTTLHeader = "X-aws-ec2-metadata-token-ttl-seconds"
	TokenPath      = "/latest/api/token"
)

// MaxTokenTTL is the longest session EC2 grants (6 hours).
const MaxTokenTTL = 6 * time.Hour

// Bounds of one response body: nothing larger is read. EC2 limits
// user-data to 16 KiB (before base64) and serves it decoded; a session
// token is 56 bytes; an identity value is smaller still (MaxValue). Get,
// for any other item, allows MaxItem.
const (
	MaxUserData = 16 << 10
	MaxToken    = 256
	MaxItem     = 4 << 10
)

// ErrTooLarge is wrapped by the error of a response beyond its bound.
var ErrTooLarge = errors.New("imds: response too large")

// ErrNotFound is returned for a 404: the item does not exist (for
// user-data: the instance has none).
var ErrNotFound = errors.New("imds: not found")

// Client talks IMDSv2. The zero value is usable: DefaultBase, a 6-hour
// token, 1-second attempts, 3 attempts per request.
type Client struct {
	// Base is the service's URL without a trailing slash.
	Base string
	// TokenTTL is the session length asked for (1 s to 6 h).
	TokenTTL time.Duration
	// Timeout bounds one attempt (connect, request, response).
	Timeout time.Duration
	// Attempts is how many times a request is tried before it fails;
	// back-off between attempts starts at Backoff and doubles.
	Attempts int
	Backoff  time.Duration
	// HTTP is the transport; nil: one client with no proxy whose idle
	// connection closes 10 s after the last request.
	HTTP *http.Client
	// Now is the clock that decides when the token expires.
	Now func() time.Time

	httpOnce sync.Once
	hc       *http.Client

	mu      sync.Mutex
	session string // the current session token
	expires time.Time
	// Tokens counts the tokens fetched, for the report and tests.
	tokens int
}

func (c *Client) base() string {
	if c.Base == "" {
		return DefaultBase
	}
	return strings.TrimRight(c.Base, "/")
}

func (c *Client) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

func (c *Client) ttl() time.Duration {
	switch {
	case c.TokenTTL <= 0 || c.TokenTTL > MaxTokenTTL:
		return MaxTokenTTL
	case c.TokenTTL < time.Second:
		return time.Second
	}
	return c.TokenTTL.Truncate(time.Second)
}

func (c *Client) attempts() int {
	if c.Attempts <= 0 {
		return 3
	}
	return c.Attempts
}

func (c *Client) backoff() time.Duration {
	if c.Backoff <= 0 {
		return 100 * time.Millisecond
	}
	return c.Backoff
}

func (c *Client) http() *http.Client {
	c.httpOnce.Do(func() {
		if c.HTTP != nil {
			// A caller's client, made not to follow redirects either.
			hc := *c.HTTP
			hc.CheckRedirect = refuseRedirect
			c.hc = &hc
			return
		}
		t := c.Timeout
		if t <= 0 {
			t = time.Second
		}
		// No proxy from the environment: the service is link-local and a
		// proxy would see the token. One connection is reused for the
		// boot's few requests and closed soon after.
		c.hc = &http.Client{Timeout: t, CheckRedirect: refuseRedirect, Transport: &http.Transport{Proxy: nil,
			DisableCompression: true, MaxIdleConns: 1, IdleConnTimeout: 10 * time.Second}}
	})
	return c.hc
}

// refuseRedirect makes the client return a redirect as it is (an error
// for do) instead of following it.
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// TokensFetched returns how many session tokens the client has obtained.
func (c *Client) TokensFetched() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tokens
}

// StatusError is a response status the client does not retry on.
type StatusError struct {
	Method, Path string
	Code         int
	Body         string
	// Location is where a redirect (3xx) pointed; it was not followed.
	Location string
}

func (e *StatusError) Error() string {
	if e.Location != "" {
		return fmt.Sprintf("imds: %s %s: %d %s to %q: redirects are not followed", e.Method, e.Path, e.Code,
			http.StatusText(e.Code), e.Location)
	}
	return fmt.Sprintf("imds: %s %s: %d %s: %q", e.Method, e.Path, e.Code, http.StatusText(e.Code), e.Body)
}

// retryable says whether an attempt that ended with err may be repeated:
// transport errors and server-side statuses, not a client error.
func retryable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code >= 500 || se.Code == http.StatusTooManyRequests
	}
	return !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrTooLarge)
}

// retry runs fn up to Attempts times with doubling back-off.
func (c *Client) retry(ctx context.Context, fn func() error) error {
	wait := c.backoff()
	var err error
	for i := 0; i < c.attempts(); i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w (after %d attempts: %v)", ctx.Err(), i, err)
			case <-time.After(wait):
			}
			wait *= 2
		}
		if err = fn(); err == nil || !retryable(err) {
			return err
		}
	}
	return fmt.Errorf("%w (gave up after %d attempts)", err, c.attempts())
}

// do sends one request and returns the body of a 200, which may hold at
// most limit bytes.
func (c *Client) do(ctx context.Context, method, path string, hdr http.Header, limit int) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base()+path, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("imds: %s %s: %w", method, path, err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("imds: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		loc := resp.Header.Get("Location")
		if len(loc) > 200 {
			loc = loc[:200]
		}
		return nil, nil, &StatusError{Method: method, Path: path, Code: resp.StatusCode, Location: loc}
	}
	if resp.ContentLength > int64(limit) {
		return nil, nil, fmt.Errorf("%w: %s %s: %d bytes, more than the %d accepted", ErrTooLarge, method, path, resp.ContentLength, limit)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil {
		return nil, nil, fmt.Errorf("imds: %s %s: read body: %w", method, path, err)
	}
	if len(body) > limit {
		return nil, nil, fmt.Errorf("%w: %s %s: more than the %d bytes accepted", ErrTooLarge, method, path, limit)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return body, resp.Header, nil
	case http.StatusNotFound:
		return nil, nil, fmt.Errorf("%w: %s", ErrNotFound, path)
	}
	if len(body) > 200 {
		body = body[:200]
	}
	return nil, nil, &StatusError{Method: method, Path: path, Code: resp.StatusCode, Body: string(bytes.TrimSpace(body))}
}

// Token returns a valid session token, fetching a new one (with the
// client's attempts) when there is none or the current one is within a
// tenth of its life (at most a minute) of expiring.
func (c *Client) Token(ctx context.Context) (string, error) {
	var tok string
	err := c.retry(ctx, func() error {
		var err error
		tok, err = c.token(ctx)
		return err
	})
	return tok, err
}

// token is one attempt of Token.
func (c *Client) token(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	margin := min(c.ttl()/10, time.Minute)
	if c.session != "" && c.now().Add(margin).Before(c.expires) {
		return c.session, nil
	}
	ttl := c.ttl()
	tok, hdr, err := c.do(ctx, http.MethodPut, TokenPath,
		http.Header{TokenTTLHeader: {strconv.Itoa(int(ttl / time.Second))}}, MaxToken)
	if err != nil {
		return "", err
	}
	tok = bytes.TrimSpace(tok)
	if len(tok) == 0 {
		return "", fmt.Errorf("imds: PUT %s: empty token", TokenPath)
	}
	// The token goes back in a header: printable ASCII only.
	for _, b := range tok {
		if b <= ' ' || b >= 0x7f {
			return "", fmt.Errorf("imds: PUT %s: token with byte %#02x is not a token", TokenPath, b)
		}
	}
	// The service echoes the TTL it granted; trust the shorter.
	if s, e := strconv.Atoi(hdr.Get(TokenTTLHeader)); e == nil && s > 0 && time.Duration(s)*time.Second < ttl {
		ttl = time.Duration(s) * time.Second
	}
	c.session, c.expires = string(tok), c.now().Add(ttl)
	c.tokens++
	return c.session, nil
}

// forget drops tok if it is still the current token (the service refused
// it: expired early or revoked).
func (c *Client) forget(tok string) {
	c.mu.Lock()
	if c.session == tok {
		c.session = ""
	}
	c.mu.Unlock()
}

// Get returns the item at path (e.g. /latest/meta-data/instance-id), at
// most MaxItem bytes (more is ErrTooLarge). A 401 (the token expired or
// was revoked on the service's side) fetches a new token and tries once
// more; a 404 is ErrNotFound.
func (c *Client) Get(ctx context.Context, path string) ([]byte, error) {
	return c.get(ctx, path, MaxItem)
}

// get is Get with a bound of limit bytes.
func (c *Client) get(ctx context.Context, path string, limit int) ([]byte, error) {
	var body []byte
	err := c.retry(ctx, func() error {
		for fresh := 0; ; fresh++ {
			tok, err := c.token(ctx)
			if err != nil {
				return err
			}
			body, _, err = c.do(ctx, http.MethodGet, path, http.Header{TokenHeader: {tok}}, limit)
			var se *StatusError
			if errors.As(err, &se) && se.Code == http.StatusUnauthorized && fresh == 0 {
				c.forget(tok)
				continue
			}
			return err
		}
	})
	return body, err
}

// UserData returns the instance's user-data as stored (EC2 serves it
// decoded from the base64 it was given), or nil when the instance has none.
// More than MaxUserData bytes (EC2's own limit, so not from EC2) is an
// error wrapping ErrTooLarge, and none of it is returned.
func (c *Client) UserData(ctx context.Context) ([]byte, error) {
	b, err := c.get(ctx, PathUserData, MaxUserData)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}
