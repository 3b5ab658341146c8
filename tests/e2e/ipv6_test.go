package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/inspector"
	"github.com/hotpath-dev/hotpath/tests/vm"
	"github.com/insomniacslk/dhcp/dhcpv6"
)

// TestIPv6DualStack boots the inspector in a dual-stack subnet as EC2
// makes one: a DHCPv4 server, router advertisements with the managed flag
// and a DHCPv6 server on the tap. One boot; its checks: the guest took
// its IPv6 address by DHCPv6 (report and server log: one exchange per
// family, no renewal), the workload answers over both families from
// outside, no AF_PACKET socket is open after the leases (the inspector
// reads /proc/net/packet), and an IPv6 flow is received and served on
// the same CPU (RPS/XPS/IRQ tuning is family-neutral).
func TestIPv6DualStack(t *testing.T) {
	requireE2E(t)
	disk := buildImage(t, inspectorPkg) // net.ipv6=auto, the default
	const cpus = 2
	var ra *vm.RouterAdvertiser
	var d6 *vm.DHCP6Server
	b := bootConfig(t, vm.Config{Disk: disk, CPUs: cpus, Prepare: func(ns *vm.Netns) error {
		var err error
		ra, d6, err = ns.StartDualStack()
		if err != nil {
			return err
		}
		t.Cleanup(func() { d6.Close(); ra.Close() })
		return nil
	}}, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: b.Netns.DialContext, DisableKeepAlives: true}}
	v4 := "http://" + net.JoinHostPort(b.Addr, b.port)
	v6 := "http://" + net.JoinHostPort(vm.GuestAddr6, b.port)

	t.Run("report", func(t *testing.T) {
		steps := stepsOf(b.rep)
		s6, s4 := steps["net-ipv6"], steps["net-dhcp"]
		if s4.Status != report.Applied {
			t.Errorf("net-dhcp: %+v", s4)
		}
		d := s6.Detail
		if s6.Status != report.Applied || d["address"] != vm.GuestAddr6+"/128" || d["ra"] != "managed" ||
			d["valid_lft"] != "forever" || d["exchange"] != "solicit,advertise,request,reply" {
			t.Errorf("net-ipv6: %+v", s6)
		}
		t.Logf("net-ipv6 %v (router advertisements sent %d, solicitations %d)", d, ra.Sent(), ra.Solicitations())
	})
	t.Run("both-families", func(t *testing.T) {
		for _, base := range []string{v4, v6} {
			var snap inspector.Snapshot
			if err := getJSON(ctx, client, base+"/inspect", &snap); err != nil {
				t.Errorf("%s: %v", base, err)
				continue
			}
			// The witness of case study step 7, for both clients.
			if n := inspector.TableRows(snap.Files["/proc/net/packet"]); n != 0 {
				t.Errorf("%d AF_PACKET sockets open after the DHCPv4 and DHCPv6 leases:\n%s", n, snap.Files["/proc/net/packet"])
			}
		}
	})
	t.Run("mgmt", func(t *testing.T) {
		// The management port (default 9100) listens on both families:
		// a dual-stack NLB's health check may come over either.
		for _, host := range []string{b.Addr, vm.GuestAddr6} {
			resp, err := client.Get("http://" + net.JoinHostPort(host, "9100") + "/healthz")
			if err != nil {
				t.Errorf("/healthz on %s: %v", host, err)
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("/healthz on %s: %s", host, resp.Status)
			}
		}
	})
	t.Run("v6-flow", func(t *testing.T) {
		for range 4 * cpus {
			var c inspector.Conn
			if err := getJSON(ctx, client, v6+"/conn", &c); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(c.Remote, "["+vm.HostAddr6+"]:") {
				t.Errorf("connection from %s, want the host's IPv6 address %s", c.Remote, vm.HostAddr6)
			}
			if c.IncomingCPU < 0 || c.IncomingCPU != c.CPU {
				t.Errorf("IPv6 connection received on cpu %d, accepted on cpu %d", c.IncomingCPU, c.CPU)
			}
		}
	})
	t.Run("lease-log", func(t *testing.T) {
		reportErrs(t, CheckLeaseLog(b.DHCP.Log(), b.DHCP.Leases(), b.DHCP.Errors(), vm.GuestMAC, b.Addr))
		reportErrs(t, CheckLease6Log(d6.Log(), d6.Leases(), d6.Errors()))
	})
	t.Run("shutdown", func(t *testing.T) { checkShutdown(t, b, "inspector: SIGTERM") })
}

// CheckLease6Log checks the test's DHCPv6 server's log of one boot: one
// SOLICIT, one REQUEST, one lease, no RENEW, REBIND or second exchange.
func CheckLease6Log(log []vm.Message6, leases int, errs []error) []error {
	var out []error
	out = append(out, errs...)
	if len(log) != 2 || log[0].Type != dhcpv6.MessageTypeSolicit || log[1].Type != dhcpv6.MessageTypeRequest {
		out = append(out, fmt.Errorf("DHCPv6 log %v, want one SOLICIT then one REQUEST", log))
	}
	if leases != 1 {
		out = append(out, fmt.Errorf("%d DHCPv6 leases, want 1", leases))
	}
	return out
}
