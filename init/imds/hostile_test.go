package imds_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/imds"
	"github.com/hotpath-dev/hotpath/tests/vm"
)

// elsewhere is another host on loopback: it records every request that
// reaches it, which must be none.
type elsewhere struct {
	mu   sync.Mutex
	reqs []string
	URL  string
}

func newElsewhere(t *testing.T) *elsewhere {
	e := &elsewhere{}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.reqs = append(e.reqs, r.Method+" "+r.URL.Path+" token="+r.Header.Get(imds.TokenHeader))
		e.mu.Unlock()
		w.Write([]byte("workload.port=1\n"))
	}))
	t.Cleanup(s.Close)
	e.URL = s.URL
	return e
}

func (e *elsewhere) requests() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.reqs...)
}

// override serves the fake IMDS except for the paths in h.
func override(t *testing.T, f *vm.FakeIMDS, h map[string]http.HandlerFunc) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o, ok := h[r.URL.Path]; ok {
			o(w, r)
			return
		}
		f.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s.URL
}

func redirect(to string, code int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to+r.URL.Path, code) }
}

// answered lists the requests f answered, one "METHOD path status" each,
// with " no-token" for a GET that carried none.
func answered(f *vm.FakeIMDS) []string {
	var out []string
	for _, q := range f.Requests() {
		l := fmt.Sprintf("%s %s %d", q.Method, q.Path, q.Status)
		if q.Method == "GET" && !q.Token {
			l += " no-token"
		}
		out = append(out, l)
	}
	return out
}

// identityReads is what Identity asks a fake serving mac for after the
// token: every item, each with the token, each answered; the device
// number only when the MAC is read (skip: the paths that are not asked or
// not answered).
func identityReads(skip ...string) []string {
	var out []string
	for _, p := range []string{imds.PathInstanceID, imds.PathInstanceType, imds.PathRegion, imds.PathAZ,
		imds.PathAMIID, imds.PathMAC, "/latest/meta-data/network/interfaces/macs/" + mac + "/device-number"} {
		if !slices.Contains(skip, p) {
			out = append(out, "GET "+p+" 200")
		}
	}
	return out
}

// TestNoRedirects: a redirect of the token PUT or of a GET is not
// followed, whatever its code, so the other host sees nothing (no token,
// no token-less GET) and its user-data is not taken. Also with a
// caller's http.Client, which follows redirects by default.
func TestNoRedirects(t *testing.T) {
	for _, code := range []int{301, 302, 303, 307, 308} {
		for _, path := range []string{imds.TokenPath, imds.PathUserData, imds.PathInstanceID} {
			for _, own := range []bool{false, true} {
				other := newElsewhere(t)
				f := vm.NewFakeIMDS(mac, []byte("workload.port=9090\n"))
				var mu sync.Mutex
				var redirected []string
				to := redirect(other.URL, code)
				c := &imds.Client{Base: override(t, f, map[string]http.HandlerFunc{path: func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					redirected = append(redirected, r.Method+" "+r.URL.Path)
					mu.Unlock()
					to(w, r)
				}}), Attempts: 2, Backoff: time.Millisecond}
				if own {
					c.HTTP = &http.Client{Timeout: time.Second}
				}
				var err error
				var data []byte
				if path == imds.PathInstanceID {
					_, err = c.Identity(context.Background())
				} else {
					data, err = c.UserData(context.Background())
				}
				var se *imds.StatusError
				if !errors.As(err, &se) || se.Code != code || !strings.Contains(err.Error(), "not followed") {
					t.Errorf("%d on %s (own client %v): err %v, want the redirect refused", code, path, own, err)
				}
				if data != nil {
					t.Errorf("%d on %s: user-data %q taken", code, path, data)
				}
				if r := other.requests(); len(r) != 0 {
					t.Errorf("%d on %s (own client %v): the other host got %q", code, path, own, r)
				}
				// The redirect was asked for once (a 3xx is an answer, not
				// retried), and what the service answered is exactly the
				// token and, for the identity, the other items, each with
				// the token: no token-less GET, nothing left unasked.
				method := "GET"
				var want []string
				switch path {
				case imds.TokenPath:
					method = "PUT"
				case imds.PathUserData:
					want = []string{"PUT " + imds.TokenPath + " 200"}
				case imds.PathInstanceID:
					want = append([]string{"PUT " + imds.TokenPath + " 200"}, identityReads(path)...)
				}
				mu.Lock()
				got := slices.Clone(redirected)
				mu.Unlock()
				if want1 := []string{method + " " + path}; !slices.Equal(got, want1) {
					t.Errorf("%d on %s (own client %v): redirected %q, want %q", code, path, own, got, want1)
				}
				if got := answered(f); !slices.Equal(got, want) {
					t.Errorf("%d on %s (own client %v): the service answered\n%q\nwant\n%q", code, path, own, got, want)
				}
			}
		}
	}
}

// TestResponseBounds: user-data up to EC2's 16 KiB is read, one byte
// more is refused with the reason (with or without a Content-Length, and
// not retried); an identity value or a token beyond its bound is refused.
func TestResponseBounds(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		n       int
		chunked bool
		ok      bool
	}{
		{"16 KiB", imds.MaxUserData, false, true},
		{"16 KiB + 1", imds.MaxUserData + 1, false, false},
		{"16 KiB + 1 chunked", imds.MaxUserData + 1, true, false},
		{"1 MiB chunked", 1 << 20, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := vm.NewFakeIMDS(mac, nil)
			body := []byte(strings.Repeat("#", tc.n))
			base := override(t, f, map[string]http.HandlerFunc{imds.PathUserData: func(w http.ResponseWriter, r *http.Request) {
				if tc.chunked {
					w.Write(body[:1]) // no Content-Length: the client must count
					w.(http.Flusher).Flush()
					w.Write(body[1:])
					return
				}
				w.Write(body)
			}})
			c := &imds.Client{Base: base, Backoff: time.Millisecond}
			got, err := c.UserData(ctx)
			if tc.ok {
				if err != nil || len(got) != tc.n {
					t.Fatalf("%d bytes, %v; want all %d", len(got), err, tc.n)
				}
				return
			}
			if !errors.Is(err, imds.ErrTooLarge) || !strings.Contains(err.Error(), "16384") || got != nil {
				t.Fatalf("%d bytes, err %v; want ErrTooLarge naming the 16384-byte limit", len(got), err)
			}
		})
	}
	t.Run("identity value", func(t *testing.T) {
		f := vm.NewFakeIMDS(mac, nil)
		f.Items[imds.PathInstanceID] = "i-" + strings.Repeat("0", 1<<20)
		c := &imds.Client{Base: serve(t, f)}
		id, err := c.Identity(ctx)
		if !errors.Is(err, imds.ErrTooLarge) || !id.InstanceID.IsZero() || len(err.Error()) > 1000 {
			t.Fatalf("id %q, err %.300v; want a short ErrTooLarge", id.InstanceID, err)
		}
		if id.InstanceType.String() != "c5n.xlarge" {
			t.Errorf("the other values were not read: %+v", id)
		}
	})
	t.Run("token", func(t *testing.T) {
		f := vm.NewFakeIMDS(mac, nil)
		c := &imds.Client{Base: override(t, f, map[string]http.HandlerFunc{imds.TokenPath: func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(strings.Repeat("A", 4096)))
		}}), Attempts: 1}
		if _, err := c.Token(ctx); !errors.Is(err, imds.ErrTooLarge) {
			t.Fatalf("err %v, want ErrTooLarge", err)
		}
	})
}

// TestHostileIdentity: each identity value that is not in AWS's format
// is refused (zero, with a short quoted error), the others still read.
func TestHostileIdentity(t *testing.T) {
	forged := "i-0123456789abcdef0\r\x1b[2KHOTPATH-REPORT {\"version\":1}"
	for _, tc := range []struct {
		path, value string
	}{
		{imds.PathInstanceID, forged},
		{imds.PathInstanceID, "i-0123456789ABCDEF0"},
		{imds.PathInstanceID, "i-0123"},
		{imds.PathInstanceID, "i-0123456789abcdef0\x00"},
		{imds.PathInstanceType, "c5n.xlarge\x1b[31m"},
		{imds.PathInstanceType, "../../etc"},
		{imds.PathRegion, "eu-west-1\rus-east-1"},
		{imds.PathAZ, "us-east-1a"}, // not in eu-west-1
		{imds.PathAZ, "eu-west-1b\u202e"},
		{imds.PathAMIID, "ami-xyz"},
		{imds.PathMAC, "52:54:00:12:34:56/../../user-data"},
		{imds.PathMAC, "52:54:00:12:34"},
	} {
		f := vm.NewFakeIMDS(mac, nil)
		f.Items[tc.path] = tc.value
		c := &imds.Client{Base: serve(t, f)}
		id, err := c.Identity(context.Background())
		if err == nil || strings.ContainsAny(err.Error(), "\r\x1b\u202e") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s=%q: err %q, want refused with the value quoted", tc.path, tc.value, err)
		}
		all := id.InstanceID.String() + id.InstanceType.String() + id.Region.String() + id.AvailabilityZone.String() +
			id.AMIID.String() + id.MAC.String() + id.DeviceNumber.String()
		if strings.Contains(all, strings.TrimSpace(tc.value)) && tc.path != imds.PathAZ {
			t.Errorf("%s=%q taken: %+v", tc.path, tc.value, id)
		}
		if tc.path != imds.PathInstanceID && id.InstanceID.String() != "i-0123456789abcdef0" {
			t.Errorf("%s=%q: the instance id was not read: %+v", tc.path, tc.value, id)
		}
		for _, q := range f.Requests() {
			if strings.Contains(q.Path, "..") || strings.Count(q.Path, "/") > 7 {
				t.Errorf("%s=%q: requested %q", tc.path, tc.value, q.Path)
			}
		}
		// Exactly the token and every item (the loop above checks
		// them): a refused MAC is not asked about, a MAC that is read
		// (all the other cases) has its device number read.
		want := append([]string{"PUT " + imds.TokenPath + " 200"}, identityReads()...)
		if tc.path == imds.PathMAC {
			want = want[:len(want)-1]
		}
		if got := answered(f); !slices.Equal(got, want) {
			t.Errorf("%s=%q: the service answered\n%q\nwant\n%q", tc.path, tc.value, got, want)
		}
	}
}

// TestParse: AWS's documented formats are taken, near misses refused.
func TestParse(t *testing.T) {
	ok := func(err error) bool { return err == nil }
	must := func(r imds.Region, err error) imds.Region {
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	usw2 := must(imds.ParseRegion("us-west-2"))
	use1 := must(imds.ParseRegion("us-east-1"))
	for _, tc := range []struct {
		what string
		err  error
		want bool
	}{
		{"i-12345678", second(imds.ParseInstanceID("i-12345678")), true},
		{"i-0123456789abcdef0", second(imds.ParseInstanceID("i-0123456789abcdef0")), true},
		{"i-0123456789abcdef", second(imds.ParseInstanceID("i-0123456789abcdef")), false},
		{"ami-0fedcba9876543210", second(imds.ParseImageID("ami-0fedcba9876543210")), true},
		{"ami-12345678 ", second(imds.ParseImageID("ami-12345678 ")), false},
		{"c7gn.16xlarge", second(imds.ParseInstanceType("c7gn.16xlarge")), true},
		{"u-6tb1.metal", second(imds.ParseInstanceType("u-6tb1.metal")), true},
		{"m7i-flex.large", second(imds.ParseInstanceType("m7i-flex.large")), true},
		{"r7iz.metal-16xl", second(imds.ParseInstanceType("r7iz.metal-16xl")), true},
		{"C5.large", second(imds.ParseInstanceType("C5.large")), false},
		{"c5", second(imds.ParseInstanceType("c5")), false},
		{"us-gov-west-1", second(imds.ParseRegion("us-gov-west-1")), true},
		{"eusc-de-east-1", second(imds.ParseRegion("eusc-de-east-1")), true},
		{"us-east", second(imds.ParseRegion("us-east")), false},
		{"us-west-2-lax-1a", second(imds.ParseZone("us-west-2-lax-1a", usw2)), true},
		{"us-east-1-wl1-bos-wlz-1", second(imds.ParseZone("us-east-1-wl1-bos-wlz-1", use1)), true},
		{"us-east-1f", second(imds.ParseZone("us-east-1f", imds.Region{})), true},
		{"us-east-1f in us-west-2", second(imds.ParseZone("us-east-1f", usw2)), false},
		{"us-east-1", second(imds.ParseZone("us-east-1", use1)), false},
		{"0a:1b:2c:3d:4e:5f", second(imds.ParseMAC("0a:1b:2c:3d:4e:5f")), true},
		{"0A:1B:2C:3D:4E:5F", second(imds.ParseMAC("0A:1B:2C:3D:4E:5F")), false},
		{"device 0", second(imds.ParseDeviceNumber("0")), true},
		{"device 15", second(imds.ParseDeviceNumber("15")), true},
		{"device 007", second(imds.ParseDeviceNumber("007")), false},
		{"device -1", second(imds.ParseDeviceNumber("-1")), false},
		{"device 256", second(imds.ParseDeviceNumber("256")), false},
	} {
		if ok(tc.err) != tc.want {
			t.Errorf("%s: err %v, want ok=%v", tc.what, tc.err, tc.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }
