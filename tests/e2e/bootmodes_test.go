package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/image"
	"github.com/hotpath-dev/hotpath/image/bios"
	"github.com/hotpath-dev/hotpath/image/disk"
	"github.com/hotpath-dev/hotpath/image/netboot"
	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/vm"
)

// TestBootModes builds the default x86 image once and boots it the ways
// the machines it targets do: the disk under SeaBIOS (EC2 .metal, older
// dedicated servers: the MBR's GRUB loads the kernel from the ESP), the
// same disk file under OVMF (virtualized EC2), and the EFI binary alone by
// UEFI HTTP boot with no disk attached (a dedicated server booted from the
// network), and by UEFI PXE over TFTP (pxe: the same binary written by
// netboot's WriteTFTP into the root of QEMU's built-in TFTP server). Four
// boots, one build. Both disk boots use one copy of the disk, attached
// writable (no snapshot), whose sha256 must still be the manifest's after
// them: the appliance never writes its disk (GRUB's environment block,
// the ESP's FAT: nothing). Subtests: -run 'TestBootModes$/bios'.
//
// Why a fourth boot for PXE: it is the only check of what `serve
// -tftp-dir` writes and of a boot file given as a TFTP name, the way most
// rented servers boot from the network, and it costs less than feared:
// under TCG on 2 loaded cores the TFTP transfer of the 11 MB binary took
// 15.8 s and the boot report came 58 s after QEMU started (104 s with the
// host's load average at 11); the whole test went from 284 s to 330 s.
func TestBootModes(t *testing.T) {
	requireE2E(t)
	res := buildWith(t, image.Options{})
	if !res.M.BootsBIOS() {
		t.Fatal("the default amd64 image has no BIOS boot code (manifest disk.bios_boot missing)")
	}
	checkDiskSum(t, res, res.Disk)
	const cpus = 2
	// A copy, attached without snapshot=on (a snapshot would take every
	// write and the check below could not fail); the build's disk stays
	// for the network boots.
	written := filepath.Join(t.TempDir(), "written.img")
	if err := copyFile(res.Disk, written); err != nil {
		t.Fatal(err)
	}
	t.Run("bios", func(t *testing.T) {
		b := bootConfig(t, vm.Config{Disk: written, DiskWritable: true, CPUs: cpus, Firmware: "bios"}, 0)
		// GRUB's linux loader, and only it, adds BOOT_IMAGE= after the
		// built-in words: the kernel did come through the BIOS path, and
		// the comparison the inspector makes (BuiltCmdline) takes it.
		got, built := b.rep.Facts.Cmdline, res.M.Kernel.Cmdline
		if want := bios.BootImageArg(disk.BootPath); !strings.HasSuffix(got, " "+want) {
			t.Errorf("kernel command line %q lacks %s: not booted by the disk's GRUB", got, want)
		}
		if !BuiltCmdline(got, built) {
			t.Errorf("kernel command line %q is not the built-in %q and GRUB's word", got, built)
		}
		checkAppliance(t, b)
	})
	t.Run("uefi", func(t *testing.T) {
		b := bootConfig(t, vm.Config{Disk: written, DiskWritable: true, CPUs: cpus}, 0)
		if got, built := b.rep.Facts.Cmdline, res.M.Kernel.Cmdline; got != built {
			t.Errorf("kernel command line %q under UEFI, the built-in one is %q", got, built)
		}
		checkAppliance(t, b)
	})
	checkDiskSum(t, res, written)
	t.Run("httpboot", func(t *testing.T) { testHTTPBoot(t, filepath.Dir(res.Disk), cpus) })
	t.Run("pxe", func(t *testing.T) { testPXEBoot(t, filepath.Dir(res.Disk), cpus) })
}

// checkDiskSum hashes the disk file path and compares it with the build's.
func checkDiskSum(t *testing.T, res *image.Result, path string) {
	t.Helper()
	d, err := disk.Hash(path)
	if err != nil {
		t.Fatal(err)
	}
	if d.SHA256 != res.DiskSHA256 || d.SHA256 != res.M.Disk.SHA256 {
		t.Fatalf("disk %s: sha256 %s, the build said %s (manifest %s): written to", path, d.SHA256, res.DiskSHA256, res.M.Disk.SHA256)
	}
	fmt.Fprintf(os.Stderr, "e2e: bootmodes: %s sha256 %s\n", filepath.Base(path), d.SHA256)
}

// copyFile copies src to dst.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
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
	url := fmt.Sprintf("http://%s:%d/%s", vm.UserNetHostAddr, ln.Addr().(*net.TCPAddr).Port, im.Name)
	b := bootNet(t, ns, &vm.UserNet{BootFile: url}, cpus, "HTTP boot of "+url, func() string {
		return fmt.Sprintf("EFI binary requested %d times, %d bytes sent", gets.Load(), sent.Load())
	})
	if b == nil {
		return
	}
	if gets.Load() == 0 || sent.Load() < int64(len(im.EFI)) {
		t.Errorf("the firmware fetched the EFI binary %d times, %d bytes (it has %d): booted from somewhere else?", gets.Load(), sent.Load(), len(im.EFI))
	}
	checkNetBooted(t, b)
}

// testPXEBoot writes the image's TFTP root as `hotpath-image serve
// -tftp-dir` does and boots OVMF with no disk on user networking whose
// DHCP names the EFI binary as the boot file and whose built-in TFTP
// server serves that root; no HTTP server exists, so the guest can only
// have come from TFTP, and QEMU is seen reading the binary (WatchFile).
// It also times the TFTP transfer itself: from QEMU opening the file to
// its last sight open.
func testPXEBoot(t *testing.T, dir string, cpus int) {
	im, err := netboot.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := im.WriteTFTP(root, fmt.Sprintf("http://%s:8000", vm.UserNetHostAddr)); err != nil {
		t.Fatal(err)
	}
	efi := filepath.Join(root, im.Name)
	reads := make(chan vm.FileReads, 1)
	b := bootNet(t, vm.NewNetns(t), &vm.UserNet{TFTPDir: root, BootFile: im.Name}, cpus, "PXE (TFTP) boot of "+im.Name,
		func() string { return "no HTTP server" }, func(ctx context.Context, v *vm.VM) { reads <- v.WatchFile(ctx, efi) })
	// bootNet has returned and ended its context: the watcher is done.
	seen := <-reads
	took := seen.Last.Sub(seen.First).Round(10 * time.Millisecond)
	fmt.Fprintf(os.Stderr, "e2e: PXE: QEMU's TFTP server had %s open %d times for %v, read up to byte %d of %d\n",
		im.Name, seen.Opens, took, seen.MaxPos, len(im.EFI))
	if b == nil {
		return
	}
	// libslirp closes the file right after reading the last block, so
	// a 20 ms poll can miss the last few hundred KiB, not a tenth.
	if seen.Opens == 0 || seen.MaxPos < int64(len(im.EFI))*9/10 {
		t.Errorf("QEMU's TFTP server read up to byte %d of the EFI binary's %d (%d opens): booted from somewhere else?", seen.MaxPos, len(im.EFI), seen.Opens)
	}
	checkNetBooted(t, b)
}

// bootNet boots OVMF with no disk, its NIC on user networking un inside
// the namespace ns, the workload port forwarded to the namespace's
// loopback, and waits for the boot report. what names the boot in the
// log; progress says how the fetch went (for the log and a failure);
// watch, when given, runs alongside the boot. nil means the test failed.
func bootNet(t *testing.T, ns *vm.Netns, un *vm.UserNet, cpus int, what string, progress func() string, watch ...func(context.Context, *vm.VM)) *booted {
	t.Helper()
	port := config.Default().WorkloadPort
	un.HostFwd = append(un.HostFwd, fmt.Sprintf("tcp:127.0.0.1:%d-:%d", port, port))
	cfg := vm.Config{CPUs: cpus, Accel: vm.Accel(), Netns: ns, Dir: shortDir(t), UserNet: un}
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
	t.Logf("%s under %s, no disk (console: %s)", what, v.Accel, filepath.Join(v.Dir, "console.log"))
	for _, w := range watch {
		go w(ctx, v)
	}
	rep, err := v.Console.WaitReport(ctx)
	if err != nil {
		t.Errorf("no boot report within %v: %v (%s)", timeout, err, progress())
		return nil
	}
	fmt.Fprintf(os.Stderr, "e2e: %s, %d vCPUs under %s: boot report after %v wall time (QEMU start to report), %s\n",
		what, cpus, v.Accel, time.Since(v.Started).Round(time.Millisecond), progress())
	return &booted{Guest: &vm.Guest{VM: v, Netns: ns, Addr: "127.0.0.1"}, rep: rep, cpus: cpus, port: fmt.Sprint(port)}
}

// checkNetBooted checks an appliance booted from the network, from
// outside: the report, /json, the policy, the IPv6 address slirp's router
// advertisement gives (the make run network's), and a clean power-off.
func checkNetBooted(t *testing.T, b *booted) {
	rep, cpus := b.rep, b.cpus
	t.Run("report", func(t *testing.T) { reportErrs(t, CheckReport(rep, cpus)) })
	t.Run("ipv6", func(t *testing.T) {
		// In the background (IPv4 is on): the workload did not wait.
		if s := stepsOf(rep)["net-ipv6"]; s.Status != report.Background {
			t.Errorf("net-ipv6 in the report: %+v, want background", s)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := checkSLAAC(waitStepDone(ctx, t, b, "net-ipv6"), vm.UserNetPrefix6); err != nil {
			t.Error(err)
		}
	})
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
