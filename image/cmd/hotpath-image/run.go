package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/hotpath-dev/hotpath/image/machine"
	"github.com/hotpath-dev/hotpath/image/manifest"
	"github.com/hotpath-dev/hotpath/init/config"
	"golang.org/x/sys/unix"
)

// vm is what `run` boots.
type vm struct {
	Machine machine.Machine
	// Firmware is "uefi" (OVMF or AAVMF, the default) or "bios" (QEMU's
	// own SeaBIOS, amd64 only: the disk's GRUB boot code, as on an EC2
	// .metal instance or an older dedicated server).
	Firmware  string
	Disk      string
	OVMFCode  string
	OVMFVars  string // a private, writable copy
	QMP       string // unix socket path
	Accel     string
	CPUs      int
	MemoryMiB int
	HostAddr  string // loopback address the forwarded ports listen on
	HostPort  int    // forwarded to GuestPort, the workload's
	GuestPort int
	// The management endpoint (/metrics /healthz /report): MgmtHostPort
	// forwarded to MgmtGuestPort, the init's mgmt.port; 0 forwards nothing.
	MgmtHostPort  int
	MgmtGuestPort int
}

// hostfwd is the user-network forward list for v: the workload's port,
// then the management port's unless it is off.
func (v vm) hostfwd() string {
	s := fmt.Sprintf("hostfwd=tcp:%s:%d-:%d", v.HostAddr, v.HostPort, v.GuestPort)
	if v.mgmtForwarded() {
		s += fmt.Sprintf(",hostfwd=tcp:%s:%d-:%d", v.HostAddr, v.MgmtHostPort, v.MgmtGuestPort)
	}
	return s
}

func (v vm) mgmtForwarded() bool { return v.MgmtHostPort != 0 && v.MgmtGuestPort != 0 }

// checkPorts refuses forwards QEMU would refuse only after it started, or
// that would shadow each other.
func (v vm) checkPorts() error {
	for _, p := range []int{v.HostPort, v.GuestPort, v.MgmtHostPort, v.MgmtGuestPort} {
		if p < 0 || p > 65535 {
			return fmt.Errorf("port %d is outside 0..65535", p)
		}
	}
	switch {
	case v.HostPort == 0 || v.GuestPort == 0:
		return errors.New("-port and -guest-port must be set")
	case v.mgmtForwarded() && v.MgmtHostPort == v.HostPort:
		return fmt.Errorf("-mgmt-port %d is -port's too", v.MgmtHostPort)
	case v.mgmtForwarded() && v.MgmtGuestPort == v.GuestPort:
		return fmt.Errorf("-guest-mgmt-port %d is the workload's port too", v.MgmtGuestPort)
	}
	return nil
}

// qemuArgs returns QEMU's arguments for v. The disk is attached read-only:
// `run` never changes the image that becomes the AMI.
func qemuArgs(v vm) []string {
	args := []string{
		"-name", "hotpath",
		"-machine", v.Machine.Machine,
		"-accel", v.Accel,
		"-cpu", v.Machine.CPUFor(v.Accel),
		"-smp", strconv.Itoa(v.CPUs),
		"-m", strconv.Itoa(v.MemoryMiB),
		"-nodefaults",
		"-display", "none",
	}
	if v.Firmware != "bios" {
		// The UEFI firmware: code read-only, variables in a private copy.
		// Without pflash drives QEMU boots its built-in SeaBIOS.
		args = append(args,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+v.OVMFCode,
			"-drive", "if=pflash,format=raw,unit=1,file="+v.OVMFVars)
	}
	return append(append(args,
		"-drive", "if=none,id=disk0,format=raw,readonly=on,file="+v.Disk,
		"-device", "virtio-blk-pci,drive=disk0,bootindex=1",
		// User networking: no privileges, no host interfaces; the forwards
		// listen on loopback only; an IPv6 prefix the init takes (see
		// machine.UserNetIPv6). romfile= skips the PXE option ROM.
		"-netdev", "user,id=net0,ipv6-net="+machine.UserNetIPv6+","+v.hostfwd(),
		"-device", "virtio-net-pci,netdev=net0,romfile=",
		// Serial console and QEMU monitor multiplexed on stdio (Ctrl-A C
		// switches, Ctrl-A X quits).
		"-serial", "mon:stdio",
		"-qmp", "unix:"+v.QMP+",server=on,wait=off",
		// A guest reboot (e.g. after a panic) ends the run instead of looping.
		"-no-reboot",
	), v.Machine.Devices...)
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	v := vm{HostAddr: "127.0.0.1"}
	defaults := config.Default() // what the image's init uses unless configured
	fs.StringVar(&v.Disk, "disk", "out/hotpath.img", "raw disk `image` to boot (attached read-only)")
	arch := fs.String("arch", "", "the disk's `architecture`, amd64 or arm64 (QEMU virt, AAVMF, always TCG);\ndefault: the manifest.json beside the disk says, else amd64")
	fs.StringVar(&v.Firmware, "firmware", "uefi", "`firmware`: uefi (OVMF, AAVMF) or bios (SeaBIOS, amd64 disks with the BIOS boot code:\nthe way EC2 .metal instances and older servers boot)")
	fs.StringVar(&v.Accel, "accel", "tcg", "QEMU accelerator (`tcg` or kvm); KVM guests hang on some hosts, so TCG is the default")
	fs.IntVar(&v.CPUs, "cpus", 2, "virtual CPUs")
	fs.IntVar(&v.MemoryMiB, "mem", 1024, "guest memory in `MiB`")
	fs.IntVar(&v.HostPort, "port", 8080, "host `port` on 127.0.0.1 forwarded to the workload")
	fs.IntVar(&v.GuestPort, "guest-port", defaults.WorkloadPort, "guest TCP `port` (the workload's, workload.port)")
	fs.IntVar(&v.MgmtHostPort, "mgmt-port", defaults.MgmtPort, "host `port` on 127.0.0.1 forwarded to the guest's management endpoint; 0: none")
	fs.IntVar(&v.MgmtGuestPort, "guest-mgmt-port", defaults.MgmtPort, "the guest's management `port` (mgmt.port)")
	code := fs.String("ovmf-code", "", "UEFI firmware code `file`; default: Debian's OVMF (amd64) or AAVMF (arm64)")
	vars := fs.String("ovmf-vars", "", "UEFI variable store template `file` (copied, never written); default: OVMF's or AAVMF's")
	qemu := fs.String("qemu", "", "QEMU `binary`; default: qemu-system-x86_64 or qemu-system-aarch64")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: hotpath-image run [flags]\n\nBoots a hotpath disk in QEMU through OVMF UEFI firmware with virtio-net (user networking),\nthe serial console on this terminal, 127.0.0.1:<port> forwarded to the workload and\n127.0.0.1:<mgmt-port> to the management endpoint.\nCtrl-A X quits at once; for an orderly shutdown (ACPI power button, as EC2 stop does) press\nCtrl-A C and type system_powerdown, or run 'hotpath-image stop -qmp <socket>' elsewhere,\nor send this process SIGINT/SIGTERM when it has no terminal.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := v.checkPorts(); err != nil {
		return err
	}
	if _, err := os.Stat(v.Disk); err != nil {
		return fmt.Errorf("%w (build it first: hotpath-image build, or make image)", err)
	}
	qemuPath, varsTemplate, err := v.resolve(*arch, *code, *vars, *qemu)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "hotpath-run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	v.OVMFVars = filepath.Join(tmp, "OVMF_VARS.fd")
	v.QMP = filepath.Join(tmp, "qmp.sock")
	if err := copyFile(varsTemplate, v.OVMFVars); err != nil {
		return err
	}

	printBanner(stderr, v)

	return boot(exec.Command(qemuPath, qemuArgs(v)...), v.QMP, stdout, stderr)
}

// resolve sets v's machine and firmware code for arch (empty: the disk's)
// and returns the QEMU binary to run and the variable store template,
// each checked to exist, with the package to install when one does not.
func (v *vm) resolve(arch, code, vars, qemu string) (qemuPath, varsPath string, err error) {
	if arch == "" {
		arch = diskArch(v.Disk)
	}
	m, err := machine.For(arch)
	if err != nil {
		return "", "", err
	}
	if err := m.CheckAccel(v.Accel); err != nil {
		return "", "", err
	}
	v.Machine = m
	if err := v.checkFirmware(); err != nil {
		return "", "", err
	}
	if code == "" {
		code = m.Code
	}
	if vars == "" {
		vars = m.Vars
	}
	if qemu == "" {
		qemu = m.QEMU
	}
	for _, f := range []string{code, vars} {
		if _, err := os.Stat(f); err != nil {
			return "", "", fmt.Errorf("%w (install Debian's %s package: image/deps.sh %s)", err, m.FirmwarePkg, m.DepsGroup)
		}
	}
	qemuPath, err = exec.LookPath(qemu)
	if err != nil {
		return "", "", fmt.Errorf("%w (install Debian's %s package: image/deps.sh %s)", err, m.QEMUPkg, m.DepsGroup)
	}
	v.OVMFCode = code
	return qemuPath, vars, nil
}

// checkFirmware refuses a firmware the machine or the disk cannot boot
// with: BIOS is x86 only, and needs the BIOS boot code the manifest beside
// the disk records (a disk without a manifest is tried as it is).
func (v *vm) checkFirmware() error {
	switch v.Firmware {
	case "uefi":
		return nil
	case "bios":
	default:
		return fmt.Errorf("-firmware %q: want uefi or bios", v.Firmware)
	}
	if v.Machine.Arch != "amd64" {
		return fmt.Errorf("-firmware bios: %s boots UEFI only", v.Machine.Arch)
	}
	if m, err := manifest.ReadFile(filepath.Join(filepath.Dir(v.Disk), "manifest.json")); err == nil && !m.BootsBIOS() {
		return fmt.Errorf("-firmware bios: %s has no BIOS boot code (its manifest has no bios_boot; built UEFI-only?)", v.Disk)
	}
	return nil
}

// boot runs QEMU (cmd) to its end, turning SIGINT and SIGTERM into an
// orderly power-off over the QMP socket qmp (a second one kills QEMU).
func boot(cmd *exec.Cmd, qmp string, stdout, stderr io.Writer) error {
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	// QEMU must not outlive us, whatever ends us.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if !isTerminal(os.Stdin) {
		// Without a terminal, Ctrl-C (SIGINT to the process group) would
		// kill QEMU outright; in its own group it only reaches us, and we
		// turn it into an orderly power-off. (With a terminal QEMU must stay
		// in the foreground group to read it; the terminal is raw then, so
		// Ctrl-C goes to the guest anyway.)
		cmd.SysProcAttr.Setpgid = true
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("qemu: %w", err)
			}
			return nil
		case s := <-sigs:
			fmt.Fprintf(stderr, "\nhotpath-image run: %v: powering the guest off (system_powerdown); again to kill QEMU\n", s)
			if err := powerdown(qmp); err != nil {
				fmt.Fprintf(stderr, "hotpath-image run: %v; killing QEMU\n", err)
				cmd.Process.Kill()
				continue
			}
			go func() {
				select {
				case <-sigs:
				case <-time.After(60 * time.Second):
					fmt.Fprintf(stderr, "hotpath-image run: the guest did not power off within 60s; killing QEMU\n")
				}
				cmd.Process.Kill()
			}()
		}
	}
}

// printBanner says what boots and the URLs that reach it.
func printBanner(w io.Writer, v vm) {
	fw := "UEFI"
	if v.Firmware == "bios" {
		fw = "SeaBIOS"
	}
	fmt.Fprintf(w, "hotpath-image run: booting %s (%s, QEMU %s %s, %d vCPUs, %d MiB, %s, virtio-net)\n",
		v.Disk, v.Machine.Arch, v.Machine.Machine, v.Accel, v.CPUs, v.MemoryMiB, fw)
	fmt.Fprintf(w, "  the workload:   curl http://%s:%d/json   (forwarded to guest port %d once the guest has booted)\n",
		v.HostAddr, v.HostPort, v.GuestPort)
	if v.mgmtForwarded() {
		fmt.Fprintf(w, "  management:     curl http://%s:%d/metrics   (also /healthz, /report; guest port %d)\n",
			v.HostAddr, v.MgmtHostPort, v.MgmtGuestPort)
	}
	fmt.Fprintf(w, `  stop at once:   Ctrl-A X
  power off:      Ctrl-A C, then 'system_powerdown' (ACPI power button; the init drains the workload)
                  or from another terminal: hotpath-image stop -qmp %s
`, v.QMP)
}

// diskArch is the architecture the manifest beside disk records, or amd64
// when there is none (a disk copied without its manifest, an older one).
func diskArch(disk string) string {
	m, err := manifest.ReadFile(filepath.Join(filepath.Dir(disk), "manifest.json"))
	if err != nil || m.Architecture == "" {
		return "amd64"
	}
	return m.Architecture
}

func stopCmd(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("stop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("qmp", "", "QMP unix `socket` printed by 'hotpath-image run'")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: hotpath-image stop -qmp SOCKET\n\nPresses the ACPI power button of a guest started by 'hotpath-image run' (QMP system_powerdown):\nthe init stops the workload with SIGTERM and powers off.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *sock == "" {
		fs.Usage()
		return errors.New("-qmp is required")
	}
	return powerdown(*sock)
}

// powerdown sends system_powerdown over QMP: greeting, capabilities
// negotiation, command, each answered before the next.
func powerdown(sock string) error {
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return fmt.Errorf("qmp: %w", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	read := func(what string) error {
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return fmt.Errorf("qmp %s: %w", what, err)
			}
			var msg struct {
				QMP    json.RawMessage `json:"QMP"`
				Return json.RawMessage `json:"return"`
				Error  *struct{ Desc string }
				Event  string `json:"event"`
			}
			if err := json.Unmarshal(line, &msg); err != nil {
				return fmt.Errorf("qmp %s: %w", what, err)
			}
			switch {
			case msg.Error != nil:
				return fmt.Errorf("qmp %s: %s", what, msg.Error.Desc)
			case msg.QMP != nil || msg.Return != nil:
				return nil
			}
			// An asynchronous event: keep reading.
		}
	}
	if err := read("greeting"); err != nil {
		return err
	}
	for _, cmd := range []string{"qmp_capabilities", "system_powerdown"} {
		if _, err := fmt.Fprintf(c, "{\"execute\":%q}\n", cmd); err != nil {
			return fmt.Errorf("qmp %s: %w", cmd, err)
		}
		if err := read(cmd); err != nil {
			return err
		}
	}
	return nil
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o600)
}
