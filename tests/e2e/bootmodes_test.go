package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/image"
	"github.com/hotpath-dev/hotpath/image/disk"
	"github.com/hotpath-dev/hotpath/image/netboot"
	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/tests/vm"
)

// TestBootModes builds the default x86 image once and boots it the ways
// the machines it targets do: the disk under SeaBIOS (EC2 .metal, older
// dedicated servers: the MBR's GRUB loads the kernel from the ESP), the
// same disk file under OVMF (virtualized EC2), and the EFI binary alone by
// UEFI HTTP boot with no disk attached (a dedicated server booted from the
// network). Three boots, one build; the disk's sha256 is the manifest's
// before and after both disk boots. Subtests: -run 'TestBootModes$/bios'.
func TestBootModes(t *testing.T) {
	requireE2E(t)
	res := buildWith(t, image.Options{})
	if !res.M.BootsBIOS() {
		t.Fatal("the default amd64 image has no BIOS boot code (manifest disk.bios_boot missing)")
	}
	checkDiskSum(t, res)
	const cpus = 2
	t.Run("bios", func(t *testing.T) {
		b := bootConfig(t, vm.Config{Disk: res.Disk, CPUs: cpus, Firmware: "bios"}, 0)
		// GRUB's linux loader, and only it, adds BOOT_IMAGE= after the
		// built-in words: the kernel did come through the BIOS path.
		if want := "BOOT_IMAGE=/" + disk.BootPath; !strings.Contains(b.rep.Facts.Cmdline, want) {
			t.Errorf("kernel command line %q lacks %s: not booted by the disk's GRUB", b.rep.Facts.Cmdline, want)
		}
		checkAppliance(t, b)
	})
	t.Run("uefi", func(t *testing.T) {
		b := bootConfig(t, vm.Config{Disk: res.Disk, CPUs: cpus}, 0)
		if strings.Contains(b.rep.Facts.Cmdline, "BOOT_IMAGE=") {
			t.Errorf("kernel command line %q: a boot loader's words under UEFI", b.rep.Facts.Cmdline)
		}
		checkAppliance(t, b)
	})
	checkDiskSum(t, res)
	t.Run("httpboot", func(t *testing.T) { testHTTPBoot(t, filepath.Dir(res.Disk), cpus) })
}

// checkDiskSum hashes the disk file and compares it with the build's.
func checkDiskSum(t *testing.T, res *image.Result) {
	t.Helper()
	d, err := disk.Hash(res.Disk)
	if err != nil {
		t.Fatal(err)
	}
	if d.SHA256 != res.DiskSHA256 || d.SHA256 != res.M.Disk.SHA256 {
		t.Fatalf("disk sha256 %s, the build said %s (manifest %s)", d.SHA256, res.DiskSHA256, res.M.Disk.SHA256)
	}
	fmt.Fprintf(os.Stderr, "e2e: bootmodes: disk sha256 %s\n", d.SHA256)
}

// testHTTPBoot serves the image's EFI binary (netboot, as `hotpath-image
// serve` does) on the loopback of a namespace made for this test, and
// boots OVMF in that namespace with user networking whose DHCP names the
// binary's URL, no disk attached. The guest is reached through a hostfwd
// on the namespace's loopback.
func testHTTPBoot(t *testing.T, dir string, cpus int) {
	im, err := netboot.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ns := vm.NewNetns(t)
	var ln net.Listener
	if err := ns.Do(func() (err error) { ln, err = net.Listen("tcp", "127.0.0.1:0"); return err }); err != nil {
		t.Fatal(err)
	}
	var gets, sent atomic.Int64
	h := im.Handler()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/"+im.Name {
			gets.Add(1)
		}
		cw := &countingWriter{ResponseWriter: w, n: &sent}
		h.ServeHTTP(cw, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := config.Default().WorkloadPort
	url := fmt.Sprintf("http://%s:%d/%s", vm.UserNetHostAddr, ln.Addr().(*net.TCPAddr).Port, im.Name)
	cfg := vm.Config{CPUs: cpus, Accel: vm.Accel(), Netns: ns, Dir: shortDir(t), UserNet: &vm.UserNet{
		BootFile: url, HostFwd: []string{fmt.Sprintf("tcp:127.0.0.1:%d-:%d", port, port)},
	}}
	timeout := bootTimeout(cfg.Accel)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	v, err := vm.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		v.Close()
		if t.Failed() {
			t.Logf("console log: %s\n--- console tail ---\n%s\n--- qemu stderr ---\n%s", filepath.Join(v.Dir, "console.log"), v.Console.Tail(60), v.Stderr())
		}
	})
	t.Logf("HTTP boot of %s under %s, no disk (console: %s)", url, v.Accel, filepath.Join(v.Dir, "console.log"))
	rep, err := v.Console.WaitReport(ctx)
	if err != nil {
		t.Fatalf("no boot report within %v: %v (EFI binary requested %d times, %d bytes sent)", timeout, err, gets.Load(), sent.Load())
	}
	fmt.Fprintf(os.Stderr, "e2e: HTTP boot, %d vCPUs under %s: boot report after %v wall time (QEMU start to report), EFI binary fetched %d times, %d bytes\n",
		cpus, v.Accel, time.Since(v.Started).Round(time.Millisecond), gets.Load(), sent.Load())
	if gets.Load() == 0 || sent.Load() < int64(len(im.EFI)) {
		t.Errorf("the firmware fetched the EFI binary %d times, %d bytes (it has %d): booted from somewhere else?", gets.Load(), sent.Load(), len(im.EFI))
	}
	b := &booted{Guest: &vm.Guest{VM: v, Netns: ns, Addr: "127.0.0.1"}, rep: rep, cpus: cpus, port: fmt.Sprint(port)}
	t.Run("report", func(t *testing.T) { reportErrs(t, CheckReport(rep, cpus)) })
	t.Run("http", func(t *testing.T) { checkHTTP(t, b) })
	t.Run("policy", func(t *testing.T) { reportErrs(t, CheckPolicy(&rep.Facts)) })
	t.Run("shutdown", func(t *testing.T) { checkShutdown(t, b, "") })
}

// countingWriter counts the body bytes a handler writes.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// shortDir is a temporary directory short enough for QEMU's QMP socket,
// kept when the test fails.
func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "hpvm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(d)
		}
	})
	return d
}
