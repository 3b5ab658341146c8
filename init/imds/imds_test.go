package imds_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/imds"
	"github.com/hotpath-dev/hotpath/tests/vm"
)

const mac = "52:54:00:12:34:56"

// clock is a settable time source shared by a test, the fake and the
// client where a test wants them to agree.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func serve(t *testing.T, f *vm.FakeIMDS) string {
	t.Helper()
	s := httptest.NewServer(f)
	t.Cleanup(s.Close)
	return s.URL
}

// TestFakeIsStrict checks the fake itself refuses what EC2 refuses, so that
// the client tests below prove something.
func TestFakeIsStrict(t *testing.T) {
	f := vm.NewFakeIMDS(mac, nil)
	base := serve(t, f)
	do := func(method, path string, hdr map[string]string) int {
		req, _ := http.NewRequest(method, base+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name, method, path string
		hdr                map[string]string
		want               int
	}{
		{"imdsv1 get", "GET", imds.PathInstanceID, nil, 401},
		{"bogus token", "GET", imds.PathInstanceID, map[string]string{imds.TokenHeader: "nope"}, 401},
		{"token without ttl", "PUT", imds.TokenPath, nil, 400},
		{"ttl 0", "PUT", imds.TokenPath, map[string]string{imds.TokenTTLHeader: "0"}, 400},
		{"ttl above 6h", "PUT", imds.TokenPath, map[string]string{imds.TokenTTLHeader: "21601"}, 400},
		{"forwarded", "PUT", imds.TokenPath, map[string]string{imds.TokenTTLHeader: "60", "X-Forwarded-For": "10.0.0.1"}, 403},
		{"get token", "GET", imds.TokenPath, map[string]string{imds.TokenTTLHeader: "60"}, 405},
		{"ttl 6h", "PUT", imds.TokenPath, map[string]string{imds.TokenTTLHeader: "21600"}, 200},
	} {
		if got := do(tc.method, tc.path, tc.hdr); got != tc.want {
			t.Errorf("%s: %s %s = %d, want %d", tc.name, tc.method, tc.path, got, tc.want)
		}
	}
}

func TestIdentityAndTokenProtocol(t *testing.T) {
	f := vm.NewFakeIMDS(mac, nil)
	c := &imds.Client{Base: serve(t, f), TokenTTL: 90 * time.Second}
	id, err := c.Identity(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := [...]string{id.InstanceID.String(), id.InstanceType.String(), id.Region.String(), id.AvailabilityZone.String(),
		id.AMIID.String(), id.MAC.String(), id.DeviceNumber.String()}
	want := [...]string{"i-0123456789abcdef0", "c5n.xlarge", "eu-west-1", "eu-west-1b", "ami-0fedcba9876543210", mac, "0"}
	if got != want {
		t.Errorf("identity %q, want %q", got, want)
	}
	reqs := f.Requests()
	if len(reqs) != 8 {
		t.Fatalf("%d requests, want 1 PUT and 7 GETs: %+v", len(reqs), reqs)
	}
	if r := reqs[0]; r.Method != "PUT" || r.TTL != "90" || r.Status != 200 {
		t.Errorf("first request %+v, want PUT of the token with TTL 90", r)
	}
	for _, r := range reqs[1:] {
		if r.Method != "GET" || !r.Token || r.Status != 200 {
			t.Errorf("request %+v: want a GET with the token, answered 200", r)
		}
	}
	if n := c.TokensFetched(); n != 1 {
		t.Errorf("%d tokens fetched for one session, want 1", n)
	}
}

func TestUserData(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		want []byte
	}{
		{"none (404)", nil, nil},
		{"empty", []byte{}, []byte{}},
		{"lines", []byte("workload.port=9090\n"), []byte("workload.port=9090\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := vm.NewFakeIMDS(mac, tc.data)
			c := &imds.Client{Base: serve(t, f)}
			got, err := c.UserData(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tc.want == nil) || string(got) != string(tc.want) {
				t.Errorf("user-data %q (nil %v), want %q (nil %v)", got, got == nil, tc.want, tc.want == nil)
			}
			if tc.data == nil && f.Count("GET", 404) != 1 {
				t.Errorf("want exactly one 404, not retried: %+v", f.Requests())
			}
		})
	}
}

// TestTokenExpiredAtService: the service forgets the token (it expired by
// the service's clock, or was revoked) while the client still thinks it
// valid; the client gets a 401, fetches a new token and succeeds.
func TestTokenExpiredAtService(t *testing.T) {
	svc := &clock{t: time.Unix(1e9, 0)}
	f := vm.NewFakeIMDS(mac, nil)
	f.Now = svc.Now
	c := &imds.Client{Base: serve(t, f), TokenTTL: time.Minute}
	ctx := context.Background()
	if _, err := c.Get(ctx, imds.PathInstanceID); err != nil {
		t.Fatal(err)
	}
	svc.Add(61 * time.Second)
	b, err := c.Get(ctx, imds.PathInstanceType)
	if err != nil || string(b) != "c5n.xlarge" {
		t.Fatalf("after expiry: %q, %v", b, err)
	}
	if f.Count("GET", 401) != 1 || c.TokensFetched() != 2 {
		t.Errorf("want one 401 and a second token; 401s %d, tokens %d: %+v", f.Count("GET", 401), c.TokensFetched(), f.Requests())
	}
	f.RevokeTokens()
	if _, err := c.Get(ctx, imds.PathAMIID); err != nil {
		t.Fatalf("after revocation: %v", err)
	}
	if c.TokensFetched() != 3 {
		t.Errorf("tokens %d after revocation, want 3", c.TokensFetched())
	}
}

// TestTokenRenewedBeforeExpiry: the client's own clock says the token is
// about to expire, so it fetches a new one before the service refuses it.
func TestTokenRenewedBeforeExpiry(t *testing.T) {
	cl := &clock{t: time.Unix(1e9, 0)}
	f := vm.NewFakeIMDS(mac, nil)
	c := &imds.Client{Base: serve(t, f), TokenTTL: 100 * time.Second, Now: cl.Now}
	ctx := context.Background()
	for range 3 {
		if _, err := c.Get(ctx, imds.PathInstanceID); err != nil {
			t.Fatal(err)
		}
	}
	if c.TokensFetched() != 1 {
		t.Fatalf("tokens %d, want 1 within the TTL", c.TokensFetched())
	}
	cl.Add(91 * time.Second) // within the last tenth of the life
	if _, err := c.Get(ctx, imds.PathInstanceID); err != nil {
		t.Fatal(err)
	}
	if c.TokensFetched() != 2 || f.Count("GET", 401) != 0 {
		t.Errorf("tokens %d, 401s %d: want a renewal without a refusal", c.TokensFetched(), f.Count("GET", 401))
	}
}

func TestFailingEndpoint(t *testing.T) {
	t.Run("recovers within the attempts", func(t *testing.T) {
		f := vm.NewFakeIMDS(mac, nil)
		f.FailFirst = 2
		c := &imds.Client{Base: serve(t, f), Attempts: 3, Backoff: time.Millisecond}
		if _, err := c.Get(context.Background(), imds.PathInstanceID); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("gives up after the attempts", func(t *testing.T) {
		f := vm.NewFakeIMDS(mac, nil)
		f.FailFirst = 100
		c := &imds.Client{Base: serve(t, f), Attempts: 3, Backoff: time.Millisecond}
		_, err := c.Get(context.Background(), imds.PathInstanceID)
		var se *imds.StatusError
		if !errors.As(err, &se) || se.Code != 500 {
			t.Fatalf("err %v, want the 500", err)
		}
		if n := len(f.Requests()); n != 3 {
			t.Errorf("%d requests, want exactly 3 attempts", n)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		s := httptest.NewServer(http.NotFoundHandler())
		base := s.URL
		s.Close()
		c := &imds.Client{Base: base, Attempts: 2, Backoff: time.Millisecond}
		if _, err := c.UserData(context.Background()); err == nil || !strings.Contains(err.Error(), "2 attempts") {
			t.Fatalf("err %v, want a failure after 2 attempts", err)
		}
	})
}

// TestSlowEndpoint: an endpoint slower than the per-attempt timeout fails
// after the bounded attempts; the cost is Attempts x Timeout plus back-off,
// not the endpoint's delay.
func TestSlowEndpoint(t *testing.T) {
	f := vm.NewFakeIMDS(mac, nil)
	f.Delay = 5 * time.Second
	c := &imds.Client{Base: serve(t, f), Timeout: 50 * time.Millisecond, Attempts: 2, Backoff: time.Millisecond}
	start := time.Now()
	_, err := c.Get(context.Background(), imds.PathInstanceID)
	if err == nil {
		t.Fatal("a slow endpoint answered within the timeout")
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("gave up after %v: the attempts are not bounded by the timeout", d)
	}
	// A context deadline ends the retries too.
	f.Delay = 200 * time.Millisecond
	c = &imds.Client{Base: c.Base, Timeout: time.Second, Attempts: 50, Backoff: 10 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Get(ctx, imds.PathInstanceID); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v, want the context deadline", err)
	}
}
