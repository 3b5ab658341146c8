package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"

	"path/filepath"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/image"
	"github.com/hotpath-dev/hotpath/image/manifest"
	"github.com/hotpath-dev/hotpath/tests/inspector"
	"github.com/hotpath-dev/hotpath/tests/vm"
)

// inspectorPkg is the independent witness: a workload that serves what it
// reads of the guest.
const inspectorPkg = "github.com/hotpath-dev/hotpath/tests/workloads/inspector"

// inspectLease is the DHCP lease of the inspector boot: short, so that a
// client still renewing (T1 at half of it) shows in the server's log
// before the test ends.
const inspectLease = 30 * time.Second

// TestInspect boots an image whose workload is the inspector and checks
// every tuning three ways: the inspector's reading against what the test
// set up (QEMU's -smp and queues, the DHCP lease, the manifest), the boot
// report against the inspector, and the DHCP server's log (one exchange,
// no renewal, the address the guest serves on).
func TestInspect(t *testing.T) {
	requireE2E(t)
	disk := buildImage(t, inspectorPkg)
	m, err := manifest.ReadFile(filepath.Join(filepath.Dir(disk), image.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	const cpus = 2
	b := bootConfig(t, vm.Config{Disk: disk, CPUs: cpus, DHCPLease: inspectLease}, 0)
	g, rep := b.Guest, b.rep
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dc := g.DHCP.Config()
	ones, _ := dc.Mask.Size()
	exp := Expectation{
		CPUs: cpus, Queues: cpus, // vm.Config gives one queue pair per vCPU
		Addr: fmt.Sprintf("%s/%d", dc.ClientIP, ones), Gateway: dc.Router.String(), MTU: int(dc.MTU),
		Kernel: m.Kernel.Version, Cmdline: m.Kernel.Cmdline, Config: m.InitConfig.Effective,
	}

	// Fresh connections, so that each is accepted (and described) anew.
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: g.Netns.DialContext, DisableKeepAlives: true}}
	base := "http://" + net.JoinHostPort(g.Addr, b.port)
	var snap inspector.Snapshot
	if err := getJSON(ctx, client, base+"/inspect", &snap); err != nil {
		t.Fatal(err)
	}
	var conns []inspector.Conn
	for range 4 * cpus {
		var c inspector.Conn
		if err := getJSON(ctx, client, base+"/conn", &c); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	t.Logf("inspector: kernel %s, %d files, errors %v, process %+v, connections %+v", snap.Release, len(snap.Files), snap.Errors, snap.Process, conns)
	if truth, err := FactsFromSnapshot(&snap, exp.Addr); err == nil {
		b, _ := json.Marshal(truth)
		t.Logf("the inspector's facts (expected %+v): %s", exp, b)
	}
	t.Run("report", func(t *testing.T) { reportErrs(t, CheckReport(rep, cpus)) })
	t.Run("inspect", func(t *testing.T) { reportErrs(t, CompareInspection(exp, rep, &snap, conns)) })
	// The default kernel, and step 10's kernel half as the manifest asks
	// for it, the report claims it and sysfs holds it.
	t.Run("step10", func(t *testing.T) {
		reportErrs(t, CheckKernelSeries(rep, &snap))
		want, err := Step10FromConfig(exp.Config)
		if err != nil {
			t.Fatal(err)
		}
		truth, err := FactsFromSnapshot(&snap, exp.Addr)
		if err != nil || truth.NIC == nil {
			t.Fatalf("inspector: no primary NIC: %v", err)
		}
		reportErrs(t, CheckStep10(want, rep, &snap, truth.NIC.Name))
	})
	t.Run("dhcp", func(t *testing.T) {
		// Past T1 and T2 of the first lease: a client that renews or
		// rebinds has done so by now.
		if ls := g.DHCP.Leases(); len(ls) > 0 {
			wait := time.Until(ls[0].At.Add(inspectLease + 5*time.Second))
			if wait > 0 {
				t.Logf("waiting %v for the lease to run out", wait.Round(time.Second))
				time.Sleep(wait)
			}
		}
		reportErrs(t, CheckLeaseLog(g.DHCP.Log(), g.DHCP.Leases(), g.DHCP.Errors(), vm.GuestMAC, g.Addr))
		// And the guest still serves on that address.
		var c inspector.Conn
		if err := getJSON(ctx, client, base+"/conn", &c); err != nil {
			t.Errorf("after the lease ran out: %v", err)
		}
	})
	t.Run("shutdown", func(t *testing.T) { checkShutdown(t, b, "inspector: SIGTERM") })
}

func getJSON(ctx context.Context, c *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}
