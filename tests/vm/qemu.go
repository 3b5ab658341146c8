package vm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/image/machine"
)

// Debian's ovmf package: the 4 MiB flash layout, without Secure Boot or SMM.
const (
	DefaultOVMFCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	DefaultOVMFVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
)

// GuestMAC is the virtio-net MAC address the harness gives the guest.
const GuestMAC = "52:54:00:12:34:56"

// Accel returns the accelerator to use: TCG, unless HOTPATH_KVM=1 and a
// probe boot under KVM reaches the firmware's boot manager. On the
// project's CI machines /dev/kvm exists but guests hang under it, so KVM is
// opt-in and verified rather than assumed. The probe runs once per process.
func Accel() string {
	accelOnce.Do(func() {
		accel = "tcg"
		if os.Getenv("HOTPATH_KVM") != "1" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := ProbeKVM(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "vm: HOTPATH_KVM=1 but KVM does not work here (%v); using TCG\n", err)
			return
		}
		accel = "kvm"
	})
	return accel
}

var (
	accelOnce sync.Once
	accel     string
)

// ProbeKVM boots the firmware under KVM from a blank disk and waits for its
// boot manager's first message on the serial console.
func ProbeKVM(ctx context.Context) error {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	f.Close()
	dir, err := os.MkdirTemp("", "hpkvm")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	disk := filepath.Join(dir, "blank.img")
	if err := os.WriteFile(disk, nil, 0o644); err != nil {
		return err
	}
	if err := os.Truncate(disk, 1<<20); err != nil {
		return err
	}
	v, err := Start(ctx, Config{Disk: disk, CPUs: 1, MemoryMB: 256, Accel: "kvm", Dir: dir})
	if err != nil {
		return err
	}
	defer v.Close()
	if _, err := v.Console.WaitString(ctx, 0, "BdsDxe"); err != nil {
		return fmt.Errorf("probe boot under KVM: no firmware output: %w", ctx.Err())
	}
	return nil
}

// snapshot is the -drive option that keeps the guest's writes out of the
// disk file, or nothing with DiskWritable.
func (cfg *Config) snapshot() string {
	if cfg.DiskWritable {
		return ""
	}
	return "snapshot=on,"
}

// Config describes one guest.
type Config struct {
	// Disk is the raw disk image booted through OVMF. It is attached with
	// snapshot=on, so the image file is never written, unless
	// DiskWritable.
	Disk string
	// DiskWritable attaches Disk as it is, without snapshot=on: what the
	// guest writes reaches the file. For tests that check the appliance
	// never writes its disk (give them a copy: a snapshot would hide
	// every write, and the check could not fail).
	DiskWritable bool
	// Kernel, when Disk is empty, is a bzImage booted with -kernel
	// (firmware-less; for debugging the harness itself).
	Kernel string
	Initrd string // initramfs with Kernel
	Append string // kernel command line with Kernel

	CPUs     int // vCPUs (default 2)
	MemoryMB int // default 1024
	Accel    string
	// CPUModel is QEMU's -cpu; "" means the machine's (amd64: host under
	// KVM, max under TCG; max has RDRAND, qemu64 has none: a guest whose
	// CRNG must seed itself from jitter and interrupts).
	CPUModel string
	// Queues is the number of virtio-net queue pairs; 0 means one per vCPU.
	Queues int
	// AllowReboot lets a guest that reboots (a panic with panic=N) boot
	// again instead of ending QEMU (-no-reboot).
	AllowReboot bool
	// Arch is the guest's GOARCH: "amd64" (default, "") or "arm64", which
	// boots QEMU's virt machine under TCG (see image/machine).
	Arch string

	// Netns and Tap attach a multi-queue virtio-net NIC with one queue
	// pair per vCPU to the tap device Tap inside Netns. QEMU then runs
	// inside the namespace. Without Netns the guest has no NIC.
	Netns *Netns
	Tap   string
	// DHCPLease is the lease time StartGuest's DHCP server gives
	// (default an hour); a short one makes a client that renews show.
	DHCPLease time.Duration
	// NoDHCPv4 starts no DHCPv4 server: an IPv6-only subnet (Prepare
	// sets up the IPv6 side, e.g. Netns.StartDualStack).
	NoDHCPv4 bool

	OVMFCode, OVMFVars string // default: the Machine's (Debian's OVMF or AAVMF)
	// Dir holds the firmware variables copy, the QMP socket and the
	// console log (console.log). Default: a new temporary directory,
	// removed by Close.
	Dir string
	// Log, if set, receives QEMU's own stderr.
	Log io.Writer

	// RTCBase starts the guest's RTC at this time (QEMU -rtc base=, e.g.
	// "2020-01-01T00:00:00"): a guest with a wrong clock.
	RTCBase string
	// SMBIOS are QEMU -smbios values, e.g. "type=1,manufacturer=Amazon EC2"
	// for a guest whose DMI says it is an EC2 instance.
	SMBIOS []string
	// Nitro-like rigs (nitro.go): the disk on NVMe, NUMA nodes with the
	// NIC on one of them, Graviton's PCI UART, no virtio-rng.
	Nitro
	// Switch, if set, replaces the virtio-net NIC on Tap by the NICs of a
	// dedicated server (model, count, VLAN) behind a userspace switch to
	// the tap (switch.go); StartGuest starts it.
	Switch *SwitchConfig
	// Prepare runs in StartGuest once the namespace, tap and DHCP server
	// exist and before QEMU starts: services the guest will reach (a fake
	// metadata service, an NTP server) start here.
	Prepare func(*Netns) error

	// SecureBoot boots Debian's snakeoil OVMF, which enforces UEFI Secure
	// Boot with the snakeoil certificate in db (OVMFCode and OVMFVars
	// default to it), on q35 with SMM (secureboot.go). amd64 only.
	SecureBoot bool
	// TPM gives the guest a software TPM 2.0 with SHA-256 and SHA-384
	// banks (swtpm, started per guest; tpm.go).
	TPM bool
	// Firmware is "uefi" (the default, "": OVMF or AAVMF on pflash) or
	// "bios": QEMU's built-in SeaBIOS, no pflash (amd64 only), the way an
	// EC2 .metal instance or an older server boots the disk.
	Firmware string
	// UserNet, instead of Tap, gives the guest a virtio-net NIC on QEMU's
	// user networking, with a DHCP boot file for network boot; with Netns
	// set (and no Tap) QEMU runs inside that namespace, so the guest
	// reaches only the namespace's loopback (10.0.2.2 is its 127.0.0.1).
	// Without Disk the guest boots from the network (see bootmodes.go).
	UserNet *UserNet
}

// VM is a running QEMU.
type VM struct {
	Console *Console
	// Serial0 is the machine's own UART when Console follows the PCI
	// UART (Config.PCISerial); nil otherwise.
	Serial0 *Console
	QMP     *QMP
	Accel   string
	Started time.Time
	Dir     string

	cmd     *exec.Cmd
	stderr  *Console
	done    chan struct{}
	waitErr error
	rmDir   bool
	logFile *os.File
	// TPM is the guest's software TPM when Config.TPM is set.
	TPM *SWTPM
}

// accelArgs are -machine with the accelerator, or for an x86 guest under
// TCG with as many vCPUs as the host has CPUs or more, -machine without it
// and "-accel tcg,thread=single" (QEMU refuses both forms at once).
//
// Why: Linux patches its own code at run time (static keys: text_poke_bp
// writes an int3, syncs every CPU with an IPI, writes the rest, syncs
// again), which is safe on hardware and under KVM. Under multi-threaded
// TCG with vCPU threads overcommitted on the host's cores, a vCPU can
// still run a stale translation holding the int3 after the patch is
// done, and the kernel dies of "Oops: int3" ("Fatal exception in
// interrupt"). Seen (December 2026, not a measured rate): in 2 of about
// 16 4-vCPU boots on a 2-core machine (sched_clock_cpu, from an IPI on an
// idle CPU), and once in a 2-vCPU boot on the same machine under load
// 11-16 (hrtimer_start_range_ns, during initramfs unpacking): vCPUs as
// many as the cores are overcommitted as soon as anything else runs,
// QEMU's own I/O thread included. Then multi-threading gains little over
// one thread that runs the vCPUs in turn, and the one thread has no such
// race. arm64 patches under stop_machine and is not affected.
func (cfg *Config) accelArgs(mach string, hostCPUs int) []string {
	if cfg.Accel != "tcg" || cfg.Arch == "arm64" || cfg.CPUs < hostCPUs {
		return []string{"-machine", mach + ",accel=" + cfg.Accel}
	}
	return []string{"-machine", mach, "-accel", "tcg,thread=single"}
}

// Args returns QEMU's arguments for cfg, with the given paths for the
// firmware variables copy and the QMP socket.
func (cfg *Config) Args(varsPath, qmpPath string) []string {
	m, _ := machine.For(cfg.Arch) // Start has checked it
	args := []string{
		"-name", "hotpath-test",
	}
	args = append(args, cfg.accelArgs(m.Machine, runtime.NumCPU())...)
	args = append(args,
		"-smp", cfg.smp(),
		"-m", strconv.Itoa(cfg.MemoryMB),
		"-display", "none",
		"-vga", "none",
		"-monitor", "none",
		"-serial", cfg.serial(),
		"-qmp", "unix:"+qmpPath+",server=on,wait=off",
		"-nodefaults",
	)
	if !cfg.AllowReboot {
		// A guest that reboots (a panic, a failed power off) ends the
		// test instead of booting again.
		args = append(args, "-no-reboot")
	}
	cpu := m.CPUFor(cfg.Accel)
	if cfg.CPUModel != "" {
		cpu = cfg.CPUModel
	}
	args = append(args, "-cpu", cpu)
	args = append(args, cfg.devices(m.Devices)...)
	args = append(args, cfg.numaArgs()...)
	if cfg.usesPflash() {
		args = append(args,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+cfg.OVMFCode,
			"-drive", "if=pflash,format=raw,unit=1,file="+varsPath)
	}
	if cfg.netBoot() {
		args = append(args, cfg.UserNet.args()...)
	} else if cfg.Disk != "" {
		args = append(args,
			"-drive", "if=none,id=disk0,format=raw,"+cfg.snapshot()+"file="+cfg.Disk,
			"-device", cfg.diskDevice(),
		)
	} else {
		args = append(args, "-kernel", cfg.Kernel)
		if cfg.Initrd != "" {
			args = append(args, "-initrd", cfg.Initrd)
		}
		if cfg.Append != "" {
			args = append(args, "-append", cfg.Append)
		}
	}
	if cfg.RTCBase != "" {
		args = append(args, "-rtc", "base="+cfg.RTCBase)
	}
	for _, v := range cfg.SMBIOS {
		args = append(args, "-smbios", v)
	}
	args = append(args, cfg.secureBootArgs()...)
	if cfg.UserNet != nil && !cfg.netBoot() {
		args = append(args, cfg.UserNet.args()...)
	}
	if cfg.Netns != nil && cfg.Switch != nil {
		args = append(args, cfg.Switch.args()...)
	} else if cfg.Netns != nil && cfg.Tap != "" {
		q := cfg.CPUs
		if cfg.Queues > 0 {
			q = cfg.Queues
		}
		args = append(args, cfg.nicBridge()...)
		args = append(args,
			"-netdev", fmt.Sprintf("tap,id=net0,ifname=%s,script=no,downscript=no,queues=%d,vhost=off", cfg.Tap, q),
			// vectors: one per rx and tx queue, one for config, one for
			// the control queue. romfile= keeps OVMF from loading iPXE:
			// the guest never boots from the network.
			"-device", fmt.Sprintf("virtio-net-pci,netdev=net0,mq=on,vectors=%d,mac=%s,romfile=", 2*q+2, GuestMAC)+cfg.nicBus(),
		)
	}
	return args
}

// Start boots a guest. The caller must Close the VM.
func Start(ctx context.Context, cfg Config) (*VM, error) {
	if cfg.CPUs == 0 {
		cfg.CPUs = 2
	}
	if cfg.MemoryMB == 0 {
		cfg.MemoryMB = 1024
	}
	m, err := machine.For(cfg.Arch)
	if err != nil {
		return nil, fmt.Errorf("vm: %w", err)
	}
	if cfg.Accel == "" {
		cfg.Accel = "tcg"
		if m.KVM {
			cfg.Accel = Accel()
		}
	}
	if err := m.CheckAccel(cfg.Accel); err != nil {
		return nil, fmt.Errorf("vm: %w", err)
	}
	if cfg.SecureBoot && cfg.Arch == "arm64" {
		return nil, errors.New("vm: SecureBoot: the snakeoil firmware is OVMF's (amd64)")
	}
	if cfg.SecureBoot && cfg.OVMFCode == "" {
		cfg.OVMFCode, cfg.OVMFVars = SnakeoilCode, SnakeoilVars
	}
	if cfg.OVMFCode == "" {
		cfg.OVMFCode = m.Code
	}
	if cfg.OVMFVars == "" {
		cfg.OVMFVars = m.Vars
	}
	if cfg.Disk == "" && cfg.Kernel == "" && !cfg.netBoot() {
		return nil, errors.New("vm: neither Disk nor Kernel given")
	}
	if err := cfg.checkBootMode(); err != nil {
		return nil, err
	}
	if cfg.Netns != nil && cfg.Tap == "" && cfg.UserNet == nil {
		return nil, errors.New("vm: Netns without Tap")
	}
	if err := cfg.Nitro.check(&cfg); err != nil {
		return nil, err
	}
	v := &VM{Accel: cfg.Accel, done: make(chan struct{})}
	if cfg.Dir == "" {
		// Short path: a unix socket path must fit in 108 bytes.
		d, err := os.MkdirTemp("", "hpvm")
		if err != nil {
			return nil, err
		}
		cfg.Dir, v.rmDir = d, true
	}
	v.Dir = cfg.Dir
	fail := func(err error) (*VM, error) {
		v.Close()
		return nil, err
	}
	varsPath := filepath.Join(cfg.Dir, "OVMF_VARS.fd")
	if cfg.usesPflash() {
		// Each guest gets its own writable copy of the variable store.
		if err := copyFile(varsPath, cfg.OVMFVars); err != nil {
			return fail(fmt.Errorf("vm: copy OVMF vars: %w", err))
		}
	}
	lf, err := os.Create(filepath.Join(cfg.Dir, "console.log"))
	if err != nil {
		return fail(err)
	}
	v.logFile = lf
	v.Console = NewConsole(lf)
	v.stderr = NewConsole(cfg.Log)

	qmpPath := filepath.Join(cfg.Dir, "qmp.sock")
	args := cfg.Args(varsPath, qmpPath)
	if cfg.TPM {
		if v.TPM, err = StartSWTPM(cfg.Dir); err != nil {
			return fail(err)
		}
		args = append(args, v.TPM.Args(cfg.Arch)...)
	}
	if cfg.Netns != nil {
		// `ip netns exec` enters the namespace and execs QEMU, so the
		// process we hold is QEMU itself.
		v.cmd = cfg.Netns.Command(context.Background(), m.QEMU, args...)
	} else {
		v.cmd = exec.Command(m.QEMU, args...)
	}
	v.cmd.Stdout = v.Console
	v.cmd.Stderr = v.stderr
	if cfg.PCISerial {
		v.Serial0 = NewConsole(nil)
		v.cmd.Stdout = v.Serial0
	}
	// QEMU dies with the test process, even one killed by a timeout.
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	v.Started = time.Now()
	if err := v.cmd.Start(); err != nil {
		return fail(fmt.Errorf("vm: start qemu: %w", err))
	}
	exited := make(chan struct{})
	var followed <-chan struct{}
	if cfg.PCISerial {
		followed = follow(filepath.Join(cfg.Dir, PCISerialLog), v.Console, exited)
	}
	go func() {
		v.waitErr = v.cmd.Wait()
		close(exited)
		if followed != nil {
			<-followed
			v.Serial0.Close()
		}
		v.Console.Close()
		v.stderr.Close()
		close(v.done)
	}()

	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	go func() {
		select {
		case <-v.done:
			cancel() // QEMU failed to start: stop dialing
		case <-qctx.Done():
		}
	}()
	q, err := DialQMP(qctx, qmpPath)
	if err != nil {
		return fail(fmt.Errorf("vm: %w; qemu stderr: %s", err, v.Stderr()))
	}
	v.QMP = q
	return v, nil
}

// Stderr returns what QEMU printed on its standard error.
func (v *VM) Stderr() string { return strings.TrimSpace(v.stderr.String()) }

// Done is closed when QEMU has exited.
func (v *VM) Done() <-chan struct{} { return v.done }

// Wait waits for QEMU to exit on its own and returns its exit error.
func (v *VM) Wait(ctx context.Context) error {
	select {
	case <-v.done:
		return v.waitErr
	case <-ctx.Done():
		return fmt.Errorf("vm: qemu still running: %w", ctx.Err())
	}
}

// Close stops QEMU if it still runs (QMP quit, then SIGKILL) and removes
// what Start created.
func (v *VM) Close() error {
	if v.cmd != nil && v.cmd.Process != nil {
		select {
		case <-v.done:
		default:
			if v.QMP != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				v.QMP.Quit(ctx)
				cancel()
			}
			select {
			case <-v.done:
			case <-time.After(10 * time.Second):
				v.cmd.Process.Kill()
				<-v.done
			}
		}
	}
	if v.QMP != nil {
		v.QMP.Close()
	}
	if v.logFile != nil {
		v.logFile.Close()
	}
	if v.TPM != nil {
		v.TPM.Close()
	}
	if v.rmDir {
		return os.RemoveAll(v.Dir)
	}
	return nil
}

func copyFile(dst, src string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// Guest is everything one boot needs: a namespace, a tap with the host
// side's address, a DHCP server for the guest, and the VM.
type Guest struct {
	*VM
	Netns *Netns
	DHCP  *DHCPServer
	// Switch is the userspace switch of a Config.Switch guest, else nil.
	Switch *Switch
	// Addr is the guest's address (what DHCP hands out).
	Addr string
}

// Guest network inside each namespace. Every guest has its own namespace,
// so all of them can use the same addresses.
const (
	TapName   = "tap0"
	HostAddr  = "10.77.0.1"
	GuestAddr = "10.77.0.2"
	GuestMTU  = 1500
)

// StartGuest creates a namespace with a tap and a DHCP server, and boots
// cfg in it. The caller must Close the guest.
func StartGuest(ctx context.Context, cfg Config) (*Guest, error) {
	ns, err := CreateNetns()
	if err != nil {
		return nil, err
	}
	g := &Guest{Netns: ns, Addr: GuestAddr}
	if cfg.Switch != nil {
		err = ns.AddTapSingle(TapName, HostAddr+"/24")
		if err == nil {
			g.Switch, err = ns.StartSwitch(*cfg.Switch, TapName)
		}
	} else if cfg.Queues == 1 {
		// QEMU opens a one-queue tap without IFF_MULTI_QUEUE, which a
		// multi-queue tap refuses (EINVAL from TUNSETIFF).
		err = ns.AddTapSingle(TapName, HostAddr+"/24")
	} else {
		err = ns.AddTap(TapName, HostAddr+"/24")
	}
	if err != nil {
		g.Close()
		return nil, err
	}
	if !cfg.NoDHCPv4 {
		g.DHCP, err = ns.StartDHCP(DHCPConfig{
			Iface:    TapName,
			ServerIP: netIP(HostAddr),
			ClientIP: netIP(GuestAddr),
			Mask:     netMask24,
			Router:   netIP(HostAddr),
			Lease:    cfg.DHCPLease,
			MTU:      GuestMTU,
		})
		if err != nil {
			g.Close()
			return nil, err
		}
	}
	if cfg.Prepare != nil {
		if err := cfg.Prepare(ns); err != nil {
			g.Close()
			return nil, fmt.Errorf("vm: prepare the namespace: %w", err)
		}
	}
	cfg.Netns, cfg.Tap = ns, TapName
	g.VM, err = Start(ctx, cfg)
	if err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// Close stops the VM, the DHCP server, and removes the namespace.
func (g *Guest) Close() error {
	var errs []error
	if g.VM != nil {
		errs = append(errs, g.VM.Close())
	}
	if g.DHCP != nil {
		errs = append(errs, g.DHCP.Close())
	}
	if g.Switch != nil {
		errs = append(errs, g.Switch.Close())
	}
	if g.Netns != nil {
		errs = append(errs, g.Netns.Close())
	}
	return errors.Join(errs...)
}

// Boot is StartGuest for tests: it fails the test on error and releases
// everything when the test ends. On failure the console log is kept (its
// path and tail are logged).
func Boot(ctx context.Context, t testing.TB, cfg Config) *Guest {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = shortTempDir(t)
	}
	g, err := StartGuest(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			if oops := g.Console.Oops(120); oops != "" {
				t.Logf("the kernel reported a fault:\n--- console from the first fault line ---\n%s", oops)
			}
			t.Logf("console log: %s\n--- console tail ---\n%s\n--- qemu stderr ---\n%s",
				filepath.Join(g.Dir, "console.log"), g.Console.Tail(60), g.Stderr())
		}
	})
	t.Logf("booting %d vCPUs under %s (console: %s)", cfg.CPUs, g.Accel, filepath.Join(g.Dir, "console.log"))
	return g
}

// shortTempDir is a temporary directory with a path short enough for a
// unix socket, removed when the test ends unless it failed (the console
// log is then kept to read).
func shortTempDir(t testing.TB) string {
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
