// Command hotpath-image builds the hotpath appliance disk image and boots it
// in QEMU.
//
//	hotpath-image build [flags]   build out/hotpath.img and out/manifest.json
//	hotpath-image run [flags]     boot a built disk in QEMU with OVMF and virtio-net
//	hotpath-image stop -qmp SOCK  power a running guest off through QMP (ACPI power button)
//	hotpath-image serve [flags]   serve the EFI binary for UEFI HTTP boot, PXE and iPXE
//	hotpath-image write [flags]   write the disk onto a server's disk (from a rescue system)
//	hotpath-image report LOG      a saved console log as a checklist, first failure on top
//	hotpath-image pcrs DISK       the reference PCR values of a disk's EFI binary
//
// Run `hotpath-image <command> -h` for each command's flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/hotpath-dev/hotpath/image"
	"github.com/hotpath-dev/hotpath/image/sign"
)

const usage = `hotpath-image builds a UEFI-bootable appliance disk around a Go workload.

usage:
  hotpath-image build [flags]   build <out>/hotpath.img (raw GPT disk, sparse, >= 1 GiB) and
                                <out>/manifest.json; the kernel comes from the kernel cache
                                (~/.cache/hotpath) and is built there when missing (~30 min cold)
  hotpath-image run [flags]     boot a disk in QEMU (OVMF UEFI, virtio-net, serial on this
                                terminal) with 127.0.0.1:8080 forwarded to the guest's port 8080
  hotpath-image stop -qmp SOCK  ask a guest started by 'run' to power off (ACPI power button)
  hotpath-image serve [flags]   serve the EFI binary for UEFI HTTP boot and iPXE (-tftp-dir: a TFTP
                                root for UEFI PXE): a dedicated server boots it with no disk
  hotpath-image write [flags]   write the disk onto a block device (a server's disk, from a rescue
                                system), refusing a mounted one, and verify what was written
  hotpath-image report LOG      read a saved console log (QEMU's, or EC2 get-console-output) and
                                print a checklist of steps, facts and events, first failure on top
  hotpath-image pcrs DISK       print the PCR 4 and 12 values (SHA-256, SHA-384) a TPM holds once
                                the firmware has started the disk's EFI binary

examples:
  hotpath-image build -out out
  hotpath-image build -workload ./cmd/myserver -workload-dir ~/src/myserver -config my.conf
  hotpath-image build -workload ./bin/myserver-static -cmdline 'hotpath.workload.port=9000'
  hotpath-image run -disk out/hotpath.img && curl http://127.0.0.1:8080/json
  hotpath-image run -firmware bios -disk out/hotpath.img        (legacy BIOS, as EC2 .metal boots)
  hotpath-image serve -dir out -listen 0.0.0.0:8000             (UEFI HTTP boot, iPXE)
  hotpath-image write -disk out/hotpath.img -device /dev/nvme0n1
  hotpath-image build -arch arm64 -out out-arm64 && hotpath-image run -disk out-arm64/hotpath.img

Reproducible: the same inputs give the same disk and manifest bytes; SOURCE_DATE_EPOCH (default 0)
is the only time that enters the image.
Run 'hotpath-image <command> -h' for the flags of a command.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "build":
		err = build(ctx, args, os.Stdout, os.Stderr)
	case "run":
		stop() // run handles signals itself: they become an orderly power-off
		err = run(args, os.Stdout, os.Stderr)
	case "stop":
		err = stopCmd(args, os.Stderr)
	case "serve":
		err = serve(ctx, args, os.Stdout, os.Stderr)
	case "write":
		err = writeCmd(args, os.Stdout, os.Stderr)
	case "report":
		err = reportCmd(args, os.Stdin, os.Stdout, os.Stderr)
		if errors.Is(err, errFailed) {
			os.Exit(1)
		}
	case "pcrs":
		err = pcrsCmd(args, os.Stdout, os.Stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(os.Stdout, usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "hotpath-image: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "hotpath-image %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func build(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		out       = fs.String("out", "out", "output `dir`ectory for hotpath.img and manifest.json")
		arch      = fs.String("arch", "amd64", "the image's `architecture`: amd64, or arm64 (Graviton: the kernel cross-built with\ngcc-aarch64-linux-gnu, the programs with GOARCH=arm64, \\EFI\\BOOT\\BOOTAA64.EFI)")
		root      = fs.String("root", "", "the hotpath source tree (`dir`); default: found from the working directory")
		workload  = fs.String("workload", "", "the workload: a Go package (import path or ./path, built statically in -workload-dir)\nor a prebuilt static linux binary for -arch (`pkg|file`); default: hotpath's JSON server "+image.DefaultWorkload)
		wdir      = fs.String("workload-dir", "", "`dir`ectory (module) to build a -workload package in; default: the working directory")
		conf      = fs.String("config", "", "init configuration `file` baked at /etc/hotpath/init.conf (key=value lines, see init/config);\ndefault: every key at its default. Unknown keys or bad values fail the build")
		cmdline   = fs.String("cmdline", "", "extra kernel command line (`words`) after 'console=ttyS0 mitigations=off';\nhotpath.<key>=<value> words override the init configuration;\nmitigation parameters (mitigations=, spectre_v2=, mds=, ...) are refused")
		ksrc      = fs.String("kernel-source", "", "Linux source tarball or tree (`path`); default: Debian's linux-source-6.12")
		cache     = fs.String("cache", "", "kernel cache `dir`; default $HOTPATH_CACHE, $XDG_CACHE_HOME/hotpath or ~/.cache/hotpath")
		jobs      = fs.Int("jobs", 0, "parallel kernel build jobs; default: the number of CPUs")
		minGiB    = fs.Int64("size", 1, "least virtual disk size in `GiB` (EC2 root volumes are at least 1)")
		initPkg   = fs.String("init", "", "the init (`pkg|file`); default: hotpath's "+image.DefaultInit+" (for testing other inits)")
		quietFlag = fs.Bool("q", false, "print only the summary")
		signKey   = fs.String("sign-key", "", "sign the EFI binary for UEFI Secure Boot with this RSA private key (PEM `file`,\nunencrypted; never copied into the image or the logs); needs -sign-cert")
		signCert  = fs.String("sign-cert", "", "the signer's X.509 certificate (PEM or DER `file`), the one db trusts")
		firmware  = fs.String("firmware", "", "`dir`ectory of firmware files put into the initramfs under /lib/firmware and recorded\nin the manifest (ice's DDP package: intel/ice/ddp/ice.pkg; without it ice runs in safe mode)")
		uefiOnly  = fs.Bool("uefi-only", false, "leave the legacy BIOS boot code (GRUB i386-pc, partition 2) out of an amd64 disk;\nits AMI is then registered uefi, and .metal instance types cannot boot it")
	)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: hotpath-image build [flags]\n\nBuilds the init and workload statically, packs them into a deterministic initramfs,\nbuilds the kernel with it and the command line built in (one EFI binary), and writes\n<out>/hotpath.img (GPT, one EFI system partition with \\EFI\\BOOT\\BOOTX64.EFI, or BOOTAA64.EFI for -arch arm64;\non amd64 also GRUB's BIOS boot code, which loads the same file) and\n<out>/manifest.json. SOURCE_DATE_EPOCH (default 0) is the only time in the image.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o := image.Options{
		Out: *out, Arch: *arch, Root: *root, Cmdline: *cmdline, KernelSource: *ksrc, CacheDir: *cache, Jobs: *jobs,
		MinDiskSize: *minGiB << 30, Log: stderr, Firmware: *firmware, UEFIOnly: *uefiOnly,
	}
	if *quietFlag {
		o.Log = io.Discard
	}
	var err error
	if o.Workload, err = program(*workload, *wdir); err != nil {
		return err
	}
	if o.Init, err = program(*initPkg, ""); err != nil {
		return err
	}
	if *conf != "" {
		if o.InitConfig, err = os.ReadFile(*conf); err != nil {
			return err
		}
	}
	if (*signKey == "") != (*signCert == "") {
		return errors.New("-sign-key and -sign-cert go together")
	}
	if *signKey != "" {
		if o.Sign, err = sign.LoadFiles(*signKey, *signCert); err != nil {
			return err
		}
	}
	r, err := image.Build(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, r.Summary())
	return nil
}

// program turns a -workload or -init value into an image.Program: an
// existing regular file is a prebuilt binary, anything else a package.
func program(v, dir string) (image.Program, error) {
	if v == "" {
		return image.Program{}, nil
	}
	if st, err := os.Stat(v); err == nil && st.Mode().IsRegular() {
		abs, err := filepath.Abs(v)
		if err != nil {
			return image.Program{}, err
		}
		return image.Program{Binary: abs}, nil
	}
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return image.Program{}, err
		}
		dir = wd
	}
	return image.Program{Package: v, Dir: dir}, nil
}
