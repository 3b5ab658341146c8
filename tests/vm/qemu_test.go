package vm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func requireQEMU(t *testing.T) {
	t.Helper()
	requireRoot(t)
	if testing.Short() {
		t.Skip("boots QEMU; skipped in -short mode")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Fatal("qemu-system-x86_64 not installed (image/deps.sh test)")
	}
	if _, err := os.Stat(DefaultOVMFCode); err != nil {
		t.Fatal("OVMF not installed (image/deps.sh test)")
	}
}

// TestBootFirmware exercises the whole harness without a hotpath image: a
// blank disk boots OVMF (through the same arguments an image boot uses,
// multi-queue NIC on a tap in a fresh namespace included) up to its boot
// manager, whose messages must arrive on the captured serial console; QMP
// answers; the tap gets its carrier once QEMU holds it; quit ends QEMU; and
// the cleanups remove the namespace.
func TestBootFirmware(t *testing.T) {
	requireQEMU(t)
	disk := filepath.Join(t.TempDir(), "blank.img")
	if err := os.Truncate(createFile(t, disk), 64<<20); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var nsName string
	t.Run("boot", func(t *testing.T) {
		g := Boot(ctx, t, Config{Disk: disk, CPUs: 2})
		nsName = g.Netns.Name
		t.Logf("accelerator: %s", g.Accel)
		if _, err := g.Console.WaitString(ctx, 0, "BdsDxe"); err != nil {
			t.Fatal(err)
		}
		t.Logf("firmware boot manager after %v", time.Since(g.Started).Round(time.Millisecond))
		if st, err := g.QMP.Status(ctx); err != nil || st != "running" {
			t.Errorf("query-status = %q, %v", st, err)
		}
		out, err := exec.Command("ip", "-n", g.Netns.Name, "link", "show", TapName).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "LOWER_UP") {
			t.Errorf("tap while QEMU holds it: %v\n%s", err, out)
		}
		if err := g.QMP.Quit(ctx); err != nil {
			t.Fatal(err)
		}
		wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
		defer wcancel()
		if err := g.Wait(wctx); err != nil {
			t.Errorf("QEMU after quit: %v", err)
		}
	})
	if nsName != "" && netnsExists(t, nsName) {
		t.Errorf("namespace %s left behind", nsName)
	}
}

func createFile(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	return path
}

func TestArgs(t *testing.T) {
	cfg := Config{Disk: "/d.img", CPUs: 4, MemoryMB: 512, Accel: "tcg", OVMFCode: "/c.fd",
		Netns: &Netns{Name: "x"}, Tap: "tap0"}
	got := strings.Join(cfg.Args("/v.fd", "/q.sock"), " ")
	for _, want := range []string{
		"-machine q35,accel=tcg",
		"-smp 4",
		"-serial stdio",
		"-qmp unix:/q.sock,server=on,wait=off",
		"if=pflash,format=raw,unit=0,readonly=on,file=/c.fd",
		"if=pflash,format=raw,unit=1,file=/v.fd",
		"snapshot=on,file=/d.img",
		"tap,id=net0,ifname=tap0,script=no,downscript=no,queues=4,vhost=off",
		"virtio-net-pci,netdev=net0,mq=on,vectors=10,",
		"-no-reboot",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("args lack %q:\n%s", want, got)
		}
	}
}

func TestArgsOptions(t *testing.T) {
	for _, tc := range []struct {
		cfg       Config
		want, not []string
	}{
		{Config{Accel: "tcg"}, []string{"-cpu max", "-no-reboot"}, []string{"virtio-rng", "qemu64"}},
		{Config{Accel: "kvm"}, []string{"-cpu host"}, nil},
		{Config{Accel: "tcg", CPUModel: "qemu64", VirtioRNG: true, AllowReboot: true},
			[]string{"-cpu qemu64", "rng-random,id=rng0,filename=/dev/urandom", "virtio-rng-pci,rng=rng0"},
			[]string{"-no-reboot", "-cpu max"}},
		{Config{Accel: "tcg", CPUs: 4, Queues: 2, Netns: &Netns{Name: "x"}, Tap: "tap0"},
			[]string{"queues=2,vhost=off", "vectors=6,"}, []string{"queues=4"}},
	} {
		tc.cfg.Disk = "/d.img"
		if tc.cfg.CPUs == 0 {
			tc.cfg.CPUs = 2
		}
		got := strings.Join(tc.cfg.Args("/v.fd", "/q.sock"), " ")
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%+v: args lack %q:\n%s", tc.cfg, w, got)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(got, n) {
				t.Errorf("%+v: args have %q:\n%s", tc.cfg, n, got)
			}
		}
	}
}
