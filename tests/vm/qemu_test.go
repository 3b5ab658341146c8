package vm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/image/machine"
)

func requireQEMU(t *testing.T) {
	t.Helper()
	requireMachine(t, "amd64")
}

// requireMachine fails unless QEMU and the firmware of arch are installed
// (skips in -short mode and fails without root, like every boot).
func requireMachine(t *testing.T, arch string) {
	t.Helper()
	requireRoot(t)
	if testing.Short() {
		t.Skip("boots QEMU; skipped in -short mode")
	}
	m, err := machine.For(arch)
	if err != nil {
		t.Fatal(err)
	}
	// Missing is a failure, not a skip: `make test` installs both
	// architectures' QEMU and firmware first (image/deps.sh test arm64).
	if _, err := exec.LookPath(m.QEMU); err != nil {
		t.Fatalf("%s not installed (image/deps.sh %s)", m.QEMU, m.DepsGroup)
	}
	if _, err := os.Stat(m.Code); err != nil {
		t.Fatalf("%s firmware not installed (image/deps.sh %s)", arch, m.DepsGroup)
	}
}

// TestBootFirmware exercises the whole harness without a hotpath image: a
// blank disk boots OVMF (through the same arguments an image boot uses,
// multi-queue NIC on a tap in a fresh namespace included) up to its boot
// manager, whose messages must arrive on the captured serial console; QMP
// answers; the tap gets its carrier once QEMU holds it; quit ends QEMU; and
// the cleanups remove the namespace. The same for each architecture's
// machine and firmware (OVMF on q35, AAVMF on virt).
func TestBootFirmware(t *testing.T) {
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) { testBootFirmware(t, arch) })
	}
}

func testBootFirmware(t *testing.T, arch string) {
	requireMachine(t, arch)
	disk := filepath.Join(t.TempDir(), "blank.img")
	if err := os.Truncate(createFile(t, disk), 64<<20); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var nsName string
	t.Run("boot", func(t *testing.T) {
		g := Boot(ctx, t, Config{Disk: disk, CPUs: 2, Arch: arch})
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
		"-machine q35",
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
	// A disk whose writes must show is attached without the snapshot.
	cfg.DiskWritable = true
	if got := strings.Join(cfg.Args("/v.fd", "/q.sock"), " "); !strings.Contains(got, "if=none,id=disk0,format=raw,file=/d.img") || strings.Contains(got, "snapshot") {
		t.Errorf("DiskWritable: %s", got)
	}
}

// TestAccelArgs: one TCG thread where the vCPUs are as many as the host's
// CPUs or more on x86 (see accelArgs); KVM and arm64 keep -machine accel=.
func TestAccelArgs(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		host int
		want string
	}{
		{Config{Accel: "tcg", CPUs: 2}, 4, "-machine q35,accel=tcg"},
		{Config{Accel: "tcg", CPUs: 2}, 2, "-machine q35 -accel tcg,thread=single"},
		{Config{Accel: "tcg", CPUs: 4}, 2, "-machine q35 -accel tcg,thread=single"},
		{Config{Accel: "tcg", CPUs: 4}, 4, "-machine q35 -accel tcg,thread=single"},
		{Config{Accel: "tcg", CPUs: 4}, 8, "-machine q35,accel=tcg"},
		{Config{Accel: "kvm", CPUs: 4}, 2, "-machine q35,accel=kvm"},
		{Config{Accel: "tcg", CPUs: 4, Arch: "arm64"}, 2, "-machine virt,accel=tcg"},
	} {
		mach := "q35"
		if tc.cfg.Arch == "arm64" {
			mach = "virt"
		}
		if got := strings.Join(tc.cfg.accelArgs(mach, tc.host), " "); got != tc.want {
			t.Errorf("%+v on %d host CPUs: %q, want %q", tc.cfg, tc.host, got, tc.want)
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
		{Config{Accel: "tcg", CPUModel: "qemu64", AllowReboot: true},
			[]string{"-cpu qemu64"}, []string{"-no-reboot", "-cpu max", "virtio-rng"}},
		{Config{Accel: "tcg", Arch: "arm64"}, []string{"-cpu neoverse-n1", "virtio-rng-pci"}, []string{"-cpu max"}},
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

func TestArgsArm64(t *testing.T) {
	cfg := Config{Disk: "/d.img", CPUs: 2, MemoryMB: 512, Accel: "tcg", Arch: "arm64", OVMFCode: "/c.fd",
		Netns: &Netns{Name: "x"}, Tap: "tap0"}
	args := cfg.Args("/v.fd", "/q.sock")
	got := strings.Join(args, " ")
	for _, want := range []string{
		"-machine virt,gic-version=3,accel=tcg",
		"-cpu neoverse-n1",
		"-serial stdio",
		"if=pflash,format=raw,unit=0,readonly=on,file=/c.fd",
		"if=pflash,format=raw,unit=1,file=/v.fd",
		"tap,id=net0,ifname=tap0,script=no,downscript=no,queues=2,vhost=off",
		"virtio-net-pci,netdev=net0,mq=on,vectors=6,",
		"-device virtio-rng-pci",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("args lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "q35") || strings.Contains(got, "-cpu max") {
		t.Errorf("x86 machine in arm64 args:\n%s", got)
	}
}

// An arm64 guest on this x86-64 host can only be emulated: asking for KVM
// is an error, not a hang; an unknown architecture is refused.
func TestStartRefuses(t *testing.T) {
	ctx := context.Background()
	if _, err := Start(ctx, Config{Disk: "/nonexistent", Arch: "arm64", Accel: "kvm"}); err == nil || !strings.Contains(err.Error(), "cannot run under KVM on an x86-64 host") {
		t.Errorf("arm64 under KVM: %v", err)
	}
	if _, err := Start(ctx, Config{Disk: "/nonexistent", Arch: "mips"}); err == nil || !strings.Contains(err.Error(), `architecture "mips": hotpath builds for amd64 or arm64`) {
		t.Errorf("unknown architecture: %v", err)
	}
}
