package vm

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/beevik/ntp"
)

func TestArgsRTCAndSMBIOS(t *testing.T) {
	cfg := Config{Disk: "/d.img", CPUs: 2, Accel: "tcg", OVMFCode: "/c.fd",
		RTCBase: "2020-01-01T00:00:00", SMBIOS: []string{"type=1,manufacturer=Amazon EC2"}}
	got := strings.Join(cfg.Args("/v.fd", "/q.sock"), " ")
	for _, want := range []string{"-rtc base=2020-01-01T00:00:00", "-smbios type=1,manufacturer=Amazon EC2"} {
		if !strings.Contains(got, want) {
			t.Errorf("args lack %q:\n%s", want, got)
		}
	}
	if got := strings.Join((&Config{Disk: "/d.img"}).Args("/v", "/q"), " "); strings.Contains(got, "-rtc") || strings.Contains(got, "-smbios") {
		t.Errorf("-rtc/-smbios without being asked: %s", got)
	}
}

// TestIMDSAndNTPInNamespace reaches the fake metadata service and the NTP
// server the way a guest does: from another namespace, through its default
// route to the namespace that holds the link-local addresses.
func TestIMDSAndNTPInNamespace(t *testing.T) {
	requireRoot(t)
	srv, cli := NewNetns(t), NewNetns(t)
	if err := srv.AddVeth("veth0", "10.78.0.1/24", cli, "veth1", "10.78.0.2/24"); err != nil {
		t.Fatal(err)
	}
	if err := ip("-n", cli.Name, "route", "add", "default", "via", "10.78.0.1"); err != nil {
		t.Fatal(err)
	}
	f := NewFakeIMDS(GuestMAC, []byte("workload.port=9090\n"))
	hs, err := srv.StartIMDS(f)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	ns, err := srv.StartNTP()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()

	c := cli.HTTPClient(5 * time.Second)
	do := func(method, path string, hdr map[string]string) (int, string) {
		req, _ := http.NewRequest(method, "http://"+IMDSAddr+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := do("GET", "/latest/user-data", nil); code != 401 {
		t.Errorf("IMDSv1 GET answered %d, want 401", code)
	}
	code, tok := do("PUT", "/latest/api/token", map[string]string{"X-aws-ec2-metadata-token-ttl-seconds": "60"})
	if code != 200 {
		t.Fatalf("token: %d", code)
	}
	if code, body := do("GET", "/latest/user-data", map[string]string{"X-aws-ec2-metadata-token": tok}); code != 200 || body != "workload.port=9090\n" {
		t.Errorf("user-data: %d %q", code, body)
	}

	var r *ntp.Response
	err = cli.Do(func() error {
		var err error
		r, err = ntp.QueryWithOptions(TimeSyncAddr, ntp.QueryOptions{Timeout: 2 * time.Second,
			Dialer: func(_, ra string) (net.Conn, error) { return net.Dial("udp4", ra) }})
		return err
	})
	if err != nil {
		t.Fatalf("ntp from the client namespace: %v", err)
	}
	if err := r.Validate(); err != nil || r.ClockOffset.Abs() > 100*time.Millisecond || r.Stratum != 1 {
		t.Errorf("ntp answer: offset %v stratum %d valid %v", r.ClockOffset, r.Stratum, err)
	}
	if ns.Answers() != 1 {
		t.Errorf("%d answers", ns.Answers())
	}
}
