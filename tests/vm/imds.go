package vm

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// IMDSAddr is the link-local address of the EC2 instance metadata service;
// StartIMDS puts it on the namespace's loopback, so the guest reaches it
// through its default route like on EC2.
const IMDSAddr = "169.254.169.254"

// FakeIMDS is a strict IMDSv2-only metadata service, as EC2 runs it for an
// instance launched with HttpTokens=required:
//
//   - PUT /latest/api/token needs X-aws-ec2-metadata-token-ttl-seconds
//     between 1 and 21600 (else 400) and no X-Forwarded-For (else 403, as
//     EC2 does to keep proxied requests out); it answers a fresh token and
//     echoes the TTL;
//   - every GET needs a token that was issued and has not expired (else
//     401): an IMDSv1 GET is refused;
//   - any other method is 405; an unknown path is 404, user-data included
//     when the instance has none.
//
// It is an http.Handler: unit tests serve it on loopback with httptest,
// QEMU boots serve it inside the guest's namespace with StartIMDS.
type FakeIMDS struct {
	// Items maps a metadata path (e.g. /latest/meta-data/instance-id) to
	// its content.
	Items map[string]string
	// UserData is served at /latest/user-data; nil: 404.
	UserData []byte
	// Delay is added before every answer (a slow endpoint).
	Delay time.Duration
	// FailFirst answers that many requests with 500 before behaving.
	FailFirst int
	// Now is the fake's clock for token expiry; nil: time.Now.
	Now func() time.Time

	mu       sync.Mutex
	tokens   map[string]time.Time // token -> expiry
	requests []IMDSRequest
}

// IMDSRequest records one request the fake answered.
type IMDSRequest struct {
	Method, Path string
	TTL          string // the TTL header of a PUT
	Token        bool   // a token header was present
	Status       int
}

// NewFakeIMDS returns a fake serving the identity of an instance with the
// given MAC (the guest's NIC) and user-data (nil: none).
func NewFakeIMDS(mac string, userData []byte) *FakeIMDS {
	return &FakeIMDS{
		Items: map[string]string{
			"/latest/meta-data/instance-id":                                       "i-0123456789abcdef0",
			"/latest/meta-data/instance-type":                                     "c5n.xlarge",
			"/latest/meta-data/placement/region":                                  "eu-west-1",
			"/latest/meta-data/placement/availability-zone":                       "eu-west-1b",
			"/latest/meta-data/ami-id":                                            "ami-0fedcba9876543210",
			"/latest/meta-data/mac":                                               mac,
			"/latest/meta-data/network/interfaces/macs/" + mac + "/device-number": "0",
		},
		UserData: userData,
	}
}

func (f *FakeIMDS) now() time.Time {
	if f.Now == nil {
		return time.Now()
	}
	return f.Now()
}

// Requests returns what the fake answered so far.
func (f *FakeIMDS) Requests() []IMDSRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]IMDSRequest(nil), f.requests...)
}

// Count returns how many requests had the method and the status.
func (f *FakeIMDS) Count(method string, status int) int {
	n := 0
	for _, r := range f.Requests() {
		if r.Method == method && r.Status == status {
			n++
		}
	}
	return n
}

// RevokeTokens invalidates every issued token (as if they expired).
func (f *FakeIMDS) RevokeTokens() {
	f.mu.Lock()
	f.tokens = nil
	f.mu.Unlock()
}

func (f *FakeIMDS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.Delay > 0 {
		select {
		case <-time.After(f.Delay):
		case <-r.Context().Done():
			return
		}
	}
	code, body, hdr := f.answer(r)
	f.mu.Lock()
	f.requests = append(f.requests, IMDSRequest{Method: r.Method, Path: r.URL.Path,
		TTL: r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds"), Token: r.Header.Get("X-aws-ec2-metadata-token") != "", Status: code})
	f.mu.Unlock()
	for k, v := range hdr {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(code)
	w.Write(body)
}

func (f *FakeIMDS) answer(r *http.Request) (int, []byte, map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.FailFirst > 0 {
		f.FailFirst--
		return http.StatusInternalServerError, []byte("injected failure"), nil
	}
	switch {
	case r.URL.Path == "/latest/api/token":
		if r.Method != http.MethodPut {
			return http.StatusMethodNotAllowed, nil, nil
		}
		if r.Header.Get("X-Forwarded-For") != "" {
			return http.StatusForbidden, []byte("forwarded request"), nil
		}
		ttl, err := strconv.Atoi(r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds"))
		if err != nil || ttl < 1 || ttl > 21600 {
			return http.StatusBadRequest, []byte("bad or missing token TTL"), nil
		}
		var b [24]byte
		rand.Read(b[:])
		tok := hex.EncodeToString(b[:])
		if f.tokens == nil {
			f.tokens = map[string]time.Time{}
		}
		f.tokens[tok] = f.now().Add(time.Duration(ttl) * time.Second)
		return http.StatusOK, []byte(tok), map[string]string{"X-aws-ec2-metadata-token-ttl-seconds": strconv.Itoa(ttl)}
	case r.Method != http.MethodGet:
		return http.StatusMethodNotAllowed, nil, nil
	}
	exp, ok := f.tokens[r.Header.Get("X-aws-ec2-metadata-token")]
	if !ok || !f.now().Before(exp) {
		// IMDSv1 (no token), an unknown or an expired token.
		return http.StatusUnauthorized, nil, nil
	}
	if r.URL.Path == "/latest/user-data" {
		if f.UserData == nil {
			return http.StatusNotFound, nil, nil
		}
		return http.StatusOK, f.UserData, nil
	}
	if v, ok := f.Items[r.URL.Path]; ok {
		return http.StatusOK, []byte(v), nil
	}
	return http.StatusNotFound, nil, nil
}

// StartIMDS serves f at http://169.254.169.254:80 inside the namespace (the
// address is added to the namespace's loopback). Stop it with Close on the
// returned server.
func (n *Netns) StartIMDS(f *FakeIMDS) (*http.Server, error) {
	if err := n.AddLocalAddr(IMDSAddr); err != nil {
		return nil, err
	}
	var l net.Listener
	err := n.Do(func() error {
		var err error
		l, err = net.Listen("tcp4", IMDSAddr+":80")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("fake imds in %s: %w", n.Name, err)
	}
	srv := &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Printf("fake imds: %v\n", err)
		}
	}()
	return srv, nil
}

// AddLocalAddr puts addr (a /32) on the namespace's loopback, so that
// packets routed into the namespace for it are delivered locally. Adding
// an address that is already there is not an error.
func (n *Netns) AddLocalAddr(addr string) error {
	err := ip("-n", n.Name, "addr", "add", addr+"/32", "dev", "lo")
	if err != nil && strings.Contains(err.Error(), "File exists") {
		return nil
	}
	return err
}
