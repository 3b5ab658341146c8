// Package image builds the hotpath appliance: a Go workload and hotpath's
// init, built statically, packed into a deterministic initramfs, built into
// a kernel with its command line so that the whole system is one EFI
// binary, and laid on a sparse UEFI-bootable GPT disk with a manifest of
// every input.
//
// Same inputs give byte-identical disk and manifest: the binaries are built
// with -trimpath and without build ids, the initramfs has fixed owners,
// times and inode numbers, the kernel is built with fixed KBUILD_* values,
// and the disk's GUIDs and FAT volume id are derived from the EFI binary's
// hash. Time enters only as SOURCE_DATE_EPOCH (or 0).
package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hotpath-dev/hotpath/image/bios"
	"github.com/hotpath-dev/hotpath/image/cpio"
	"github.com/hotpath-dev/hotpath/image/disk"
	"github.com/hotpath-dev/hotpath/image/gobuild"
	"github.com/hotpath-dev/hotpath/image/machine"
	"github.com/hotpath-dev/hotpath/image/manifest"
	"github.com/hotpath-dev/hotpath/image/sign"
	"github.com/hotpath-dev/hotpath/init/config"
	kernelconfig "github.com/hotpath-dev/hotpath/kernel-config"
)

// Module is the hotpath module path; Root is found by looking for its go.mod.
const Module = "github.com/hotpath-dev/hotpath"

// Default packages, relative to Root.
const (
	DefaultInit     = "./init"
	DefaultWorkload = "./server/cmd/hotpath-json"
)

// Paths inside the initramfs and outside.
const (
	InitPath     = "/init"
	WorkloadPath = "/workload"
	DiskFile     = "hotpath.img"
	ManifestFile = "manifest.json"
)

// DefaultInitConfig is baked when no configuration is given: every key at
// the default documented in package init/config.
const DefaultInitConfig = "# hotpath init configuration: every key at its default (see init/config).\n"

// Program is a Go package to build, or a prebuilt binary.
type Program struct {
	// Package is an import path or a ./relative package path, built in Dir.
	Package string
	// Dir is the directory the go command runs in (the module providing
	// Package); "" means Options.Root.
	Dir string
	// Binary is a prebuilt static executable for the image's architecture
	// (Options.Arch); set either this or Package.
	Binary string
}

func (p Program) String() string {
	if p.Binary != "" {
		return p.Binary
	}
	return p.Package
}

// KernelBuilder builds the kernel; kernelconfig.Build is the real one.
type KernelBuilder func(context.Context, kernelconfig.Options) (*kernelconfig.Result, error)

// Options says what to build.
type Options struct {
	// Out is the output directory for hotpath.img and manifest.json; ""
	// means "out".
	Out string
	// Arch is the image's architecture, "amd64" (the default, "") or
	// "arm64": the kernel is cross-built, the programs cross-compiled, and
	// the ESP holds \EFI\BOOT\BOOTAA64.EFI.
	Arch string
	// Root is the hotpath module's directory; "" means the nearest parent of
	// the working directory whose go.mod declares Module.
	Root string
	// Init is the PID 1; zero means DefaultInit in Root.
	Init Program
	// Workload is the program started as /workload; zero means
	// DefaultWorkload in Root.
	Workload Program
	// InitConfig is the text of /etc/hotpath/init.conf; nil means
	// DefaultInitConfig. It is validated here: unknown keys and bad values
	// fail the build.
	InitConfig []byte
	// Cmdline is appended to the kernel's built-in command line (after the
	// policy's "console=ttyS0,115200n8 mitigations=off no_timer_check panic=10 panic_on_oops=1" on x86); hotpath.<key>=<value>
	// words are init configuration overrides and are validated too.
	Cmdline string
	// Firmware is a directory whose files go into the initramfs under
	// /lib/firmware (ice's DDP package: intel/ice/ddp/ice.pkg), each
	// recorded in the manifest; "" means none (firmware.go).
	Firmware string
	// KernelSource, CacheDir and Jobs are passed to kernelconfig.
	KernelSource string
	CacheDir     string
	Jobs         int
	// SourceDateEpoch is the time stamped into the initramfs and the FAT;
	// nil means $SOURCE_DATE_EPOCH, or 0 when unset.
	SourceDateEpoch *int64
	// MinDiskSize is the least virtual disk size; 0 means 1 GiB.
	MinDiskSize int64
	// Go is the go command; "" means "go" from PATH.
	Go string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// Kernel builds the kernel; nil means kernelconfig.Build.
	Kernel KernelBuilder
	// Sign, when set, signs the EFI binary for UEFI Secure Boot with this
	// key (see secure.go); nil leaves it unsigned.
	Sign *sign.Key
	// UEFIOnly leaves the legacy BIOS boot code (package bios) out of an
	// amd64 disk; arm64 disks never have it.
	UEFIOnly bool
	// BIOS builds the BIOS boot code; nil means bios.Build.
	BIOS func(context.Context, bios.Options) (*bios.Loader, error)
}

// Result describes what Build produced.
type Result struct {
	Disk         string // path of the raw disk image
	Manifest     string // path of manifest.json
	DiskSize     int64  // virtual
	DiskAlloc    int64  // bytes allocated on the host file system
	DiskSHA256   string
	EFISize      int64
	EFISHA256    string
	BzImage      string // the kernel in the kernel cache
	KernelCached bool
	Duration     time.Duration
	M            *manifest.Manifest
}

// Summary is the human-readable closing report.
func (r *Result) Summary() string {
	return fmt.Sprintf(`hotpath image built in %s
  disk      %s
            %s virtual, %s allocated (sparse), sha256 %s
  EFI       %s (%s: kernel + initramfs + command line), sha256 %s
  manifest  %s
  arch      %s
  cmdline   %s
`, r.Duration.Round(100*time.Millisecond), r.Disk, human(r.DiskSize), human(r.DiskAlloc), r.DiskSHA256,
		human(r.EFISize), path.Base(r.M.Disk.ESP.BootPath), r.EFISHA256, r.Manifest, r.M.Architecture, r.M.Kernel.Cmdline)
}

// Build builds the image in named stages, each of which fills in its part
// of the manifest: prepare (defaults and the configuration, checked before
// anything is built), toolchain, programs, initramfs, kernel, secure
// (signature and reference measurements), biosBoot, disk.
func Build(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	b, err := prepare(o)
	if err != nil {
		return nil, err
	}
	if err := b.toolchain(ctx); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "hotpath-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	initBin, workBin, err := b.programs(ctx, work)
	if err != nil {
		return nil, err
	}
	initrd, err := b.initramfs(work, initBin, workBin)
	if err != nil {
		return nil, err
	}
	efi, kr, err := b.kernel(ctx, initrd)
	if err != nil {
		return nil, err
	}
	if efi, err = b.secure(efi); err != nil {
		return nil, err
	}
	if err := b.biosBoot(ctx); err != nil {
		return nil, err
	}
	r, err := b.disk(efi)
	if err != nil {
		return nil, err
	}
	r.BzImage, r.KernelCached, r.Duration = kr.BzImage, kr.Cached, time.Since(start)
	return r, nil
}

// build is one image build as it goes through its stages.
type build struct {
	o         Options
	epoch     int64
	effective map[string]string // the init configuration the init will read (prepare)
	m         *manifest.Manifest
	a         machine.Machine // the architecture's boot facts (kernel)
	bios      *disk.BIOSBoot  // legacy BIOS boot code, nil for UEFI only (biosBoot)
}

func (b *build) logf(format string, args ...any) {
	fmt.Fprintf(b.o.Log, "image: "+format+"\n", args...)
}

// prepare sets the defaults and validates the configuration before any
// time is spent on builds.
func prepare(o Options) (*build, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	epoch, err := o.epoch()
	if err != nil {
		return nil, err
	}
	effective, err := checkConfig(o.InitConfig, o.Cmdline)
	if err != nil {
		return nil, err
	}
	if err := checkCPUs(effective["workload.cpus"], o.Cmdline, 0); err != nil {
		return nil, fmt.Errorf("init configuration: %w", err)
	}
	m := &manifest.Manifest{Format: manifest.Format, Architecture: o.Arch, SourceDateEpoch: epoch}
	return &build{o: o, epoch: epoch, effective: effective, m: m}, nil
}

// toolchain records the Go toolchain the programs are built with.
func (b *build) toolchain(ctx context.Context) error {
	tc, err := gobuild.ReadToolchain(ctx, b.o.Go, b.o.Root, b.o.Arch)
	if err != nil {
		return err
	}
	b.m.Go = manifest.Toolchain{
		Version: tc.GoVersion, Compiler: tc.Compiler, GOAMD64: tc.GOAMD64, GOARM64: tc.GOARM64, Flags: tc.Flags, Env: tc.Env,
		GOFLAGS: tc.GOFLAGS, GOEXPERIMENT: tc.GOEXPERIMENT,
	}
	return nil
}

// programs builds (or checks) the init and the workload in work.
func (b *build) programs(ctx context.Context, work string) (initBin, workBin []byte, err error) {
	initBin, err = b.o.program(ctx, "init", b.o.Init, InitPath, filepath.Join(work, "init"), &b.m.Init, b.logf)
	if err != nil {
		return nil, nil, err
	}
	workBin, err = b.o.program(ctx, "workload", b.o.Workload, WorkloadPath, filepath.Join(work, "workload"), &b.m.Workload, b.logf)
	if err != nil {
		return nil, nil, err
	}
	return initBin, workBin, nil
}

// initramfs writes the deterministic newc archive into work and returns
// its path.
func (b *build) initramfs(work string, initBin, workBin []byte) (string, error) {
	entries := Entries(initBin, workBin, b.o.InitConfig)
	fw, fwFiles, err := FirmwareEntries(b.o.Firmware)
	if err != nil {
		return "", err
	}
	entries = append(entries, fw...)
	b.m.Firmware = fwFiles
	var arc bytes.Buffer
	if err := cpio.Write(&arc, entries, cpio.Options{MTime: uint32(b.epoch)}); err != nil {
		return "", fmt.Errorf("initramfs: %w", err)
	}
	initrd := filepath.Join(work, "initramfs.cpio")
	if err := os.WriteFile(initrd, arc.Bytes(), 0o644); err != nil {
		return "", err
	}
	b.m.Initramfs = manifest.Initramfs{SHA256: sum(arc.Bytes()), Size: int64(arc.Len()), Format: "newc", Entries: listing(entries)}
	b.m.InitConfig = manifest.Config{Path: config.Path, SHA256: sum(b.o.InitConfig), Text: string(b.o.InitConfig), Effective: b.effective}
	b.logf("initramfs: %d entries, %s, sha256 %.16s", len(entries), human(int64(arc.Len())), b.m.Initramfs.SHA256)
	return initrd, nil
}

// kernel builds the kernel with the initramfs and command line built in,
// checks the result is an EFI binary for the architecture whose NR_CPUS
// covers the configured CPUs, and returns its bytes.
func (b *build) kernel(ctx context.Context, initrd string) ([]byte, *kernelconfig.Result, error) {
	// kernel-config says what a cold build will take here (objects and
	// time, from the last build's measurements) and how far it is.
	b.logf("kernel: building with the initramfs and command line built in (a cached tree relinks)")
	t0 := time.Now()
	o := b.o
	kr, err := o.Kernel(ctx, kernelconfig.Options{
		Arch: o.Arch, Source: o.KernelSource, CacheDir: o.CacheDir, Initramfs: initrd, Cmdline: o.Cmdline, Jobs: o.Jobs, Log: o.Log,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("kernel: %w", err)
	}
	if kr.Config != "" {
		nr, err := kernelNRCPUs(kr.Config)
		if err != nil {
			return nil, nil, fmt.Errorf("kernel config: %w", err)
		}
		if err := checkCPUs(b.effective["workload.cpus"], o.Cmdline, nr); err != nil {
			return nil, nil, fmt.Errorf("init configuration: %w", err)
		}
	}
	efi, err := os.ReadFile(kr.BzImage)
	if err != nil {
		return nil, nil, fmt.Errorf("kernel: %w", err)
	}
	if b.a, err = machine.For(o.Arch); err != nil {
		return nil, nil, err
	}
	if err := checkEFI(efi, b.a); err != nil {
		return nil, nil, fmt.Errorf("kernel %s: %w", kr.BzImage, err)
	}
	b.m.Kernel = manifest.Kernel{
		Version: kr.Version, SourceID: kr.SourceID, ConfigSHA256: kr.ConfigSHA256,
		Compiler: kr.Compiler, Key: kr.Key, Cmdline: kr.Cmdline,
	}
	b.m.EFI = manifest.Blob{SHA256: sum(efi), Size: int64(len(efi))}
	b.logf("kernel: %s EFI binary in %s (cached: %v)", human(b.m.EFI.Size), time.Since(t0).Round(100*time.Millisecond), kr.Cached)
	return efi, kr, nil
}

// disk lays the EFI binary on the GPT disk, hashes it and writes the
// manifest last.
func (b *build) disk(efi []byte) (*Result, error) {
	// The disk's identifiers follow from the EFI binary, which is a function
	// of every input.
	seed := []byte(b.m.EFI.SHA256)
	do := disk.Options{
		MinSize:  b.o.MinDiskSize,
		DiskGUID: disk.DeriveGUID(seed, "hotpath disk"),
		PartGUID: disk.DeriveGUID(seed, "hotpath esp"),
		VolumeID: disk.DeriveVolumeID(seed),
		Time:     time.Unix(b.epoch, 0),
		BootPath: b.a.BootPath,
		BIOS:     b.bios,
	}
	if err := os.MkdirAll(b.o.Out, 0o755); err != nil {
		return nil, err
	}
	diskPath := filepath.Join(b.o.Out, DiskFile)
	manPath := filepath.Join(b.o.Out, ManifestFile)
	// A disk without a manifest is visibly unfinished; a new disk beside an
	// old manifest would look finished and be wrong.
	if err := os.Remove(manPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	t0 := time.Now()
	l, err := disk.Write(diskPath, efi, do)
	if err != nil {
		return nil, err
	}
	d, err := disk.Hash(diskPath)
	if err != nil {
		return nil, err
	}
	b.logf("disk: %s written and hashed in %s", diskPath, time.Since(t0).Round(100*time.Millisecond))
	b.m.Disk = manifest.Disk{
		File: DiskFile, SHA256: d.SHA256, Size: d.Size, PartitionTable: "gpt", DiskGUID: l.DiskGUID,
		ESP: manifest.ESP{
			Index: 1, TypeGUID: "C12A7328-F81F-11D2-BA4B-00A0C93EC93B", GUID: l.PartGUID,
			Start: l.ESPStart, Size: l.ESPSize, FileSystem: "fat32",
			VolumeID: fmt.Sprintf("%08X", do.VolumeID), BootPath: "/" + b.a.BootPath, BootPathOff: l.EFIStart,
		},
		BIOSBoot: b.m.Disk.BIOSBoot, // biosBoot's
	}
	if err := b.m.WriteFile(manPath); err != nil {
		return nil, err
	}
	return &Result{
		Disk: diskPath, Manifest: manPath, DiskSize: d.Size, DiskAlloc: d.Allocated, DiskSHA256: d.SHA256,
		EFISize: b.m.EFI.Size, EFISHA256: b.m.EFI.SHA256, M: b.m,
	}, nil
}

// Entries is the whole initramfs: the two programs, the configuration, the
// mount points the init uses, and the two device nodes the kernel opens
// before the init mounts devtmpfs (/dev/console for the init's stdio;
// /dev/null is what a program expects to exist when stdio is closed).
func Entries(initBin, workload, initConf []byte) []cpio.Entry {
	dir := func(p string, perm uint32) cpio.Entry { return cpio.Entry{Path: p, Kind: cpio.Dir, Perm: perm} }
	return []cpio.Entry{
		dir("/dev", 0o755),
		{Path: "/dev/console", Kind: cpio.CharDev, Perm: 0o600, Major: 5, Minor: 1},
		{Path: "/dev/null", Kind: cpio.CharDev, Perm: 0o666, Major: 1, Minor: 3},
		dir("/etc", 0o755),
		dir("/etc/hotpath", 0o755),
		{Path: config.Path, Kind: cpio.File, Perm: 0o644, Data: initConf},
		{Path: InitPath, Kind: cpio.File, Perm: 0o755, Data: initBin},
		dir("/proc", 0o555),
		dir("/run", 0o755),
		dir("/sys", 0o555),
		dir("/tmp", 0o1777),
		{Path: WorkloadPath, Kind: cpio.File, Perm: 0o755, Data: workload},
	}
}

// checkConfig parses the init configuration the way the init will at boot
// (file, then the command line's hotpath.* words) and refuses anything the
// init would report as an error.
func checkConfig(text []byte, cmdline string) (map[string]string, error) {
	// The command line may add words after the policy's, never mitigation
	// parameters that would override its mitigations=off.
	if err := kernelconfig.CheckExtraCmdline(cmdline); err != nil {
		return nil, err
	}
	c, err := config.Parse(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("init configuration: %w", err)
	}
	if err := c.ApplyCmdline(cmdline); err != nil {
		return nil, fmt.Errorf("kernel command line %q: %w", cmdline, err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("init configuration: %w", err)
	}
	if c.WorkloadPath != WorkloadPath {
		return nil, fmt.Errorf("init configuration: workload.path=%s, but the image installs the workload at %s", c.WorkloadPath, WorkloadPath)
	}
	return c.Map(), nil
}

// program builds (or checks) one program, records it in mp and returns its bytes.
func (o *Options) program(ctx context.Context, what string, p Program, inImage, out string, mp *manifest.Program, logf func(string, ...any)) ([]byte, error) {
	t0 := time.Now()
	mp.Path = inImage
	if p.Binary != "" {
		if err := gobuild.CheckStatic(p.Binary, o.Arch); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		b, err := os.ReadFile(p.Binary)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		mp.Binary, mp.SHA256, mp.Size = filepath.Base(p.Binary), sum(b), int64(len(b))
		logf("%s: prebuilt %s (%s), static linux/%s", what, p.Binary, human(mp.Size), o.Arch)
		return b, nil
	}
	dir := p.Dir
	if dir == "" {
		dir = o.Root
	}
	logf("%s: go build %s", what, p.Package)
	src, err := gobuild.HashSource(ctx, o.Go, dir, p.Package, o.Arch)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := gobuild.Build(ctx, gobuild.Options{Dir: dir, Package: p.Package, Output: out, Go: o.Go, Arch: o.Arch}); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	mp.Package, mp.SourceSHA256, mp.SourceFiles, mp.Modules = src.Package, src.SHA256, src.Files, src.Modules
	mp.SHA256, mp.Size = sum(b), int64(len(b))
	logf("%s: %s, %s static binary in %s", what, src.Package, human(mp.Size), time.Since(t0).Round(100*time.Millisecond))
	return b, nil
}

func (o *Options) defaults() error {
	t, err := kernelconfig.LookupTarget(o.Arch)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	o.Arch = t.Name
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Out == "" {
		o.Out = "out"
	}
	if o.Kernel == nil {
		o.Kernel = kernelconfig.Build
	}
	if o.InitConfig == nil {
		o.InitConfig = []byte(DefaultInitConfig)
	}
	if o.Init == (Program{}) {
		o.Init = Program{Package: DefaultInit}
	}
	if o.Workload == (Program{}) {
		o.Workload = Program{Package: DefaultWorkload}
	}
	for _, p := range []*Program{&o.Init, &o.Workload} {
		if (p.Package == "") == (p.Binary == "") {
			return fmt.Errorf("image: program %+v: set exactly one of Package and Binary", *p)
		}
	}
	if o.Root == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		root, err := FindRoot(wd)
		if err != nil {
			// Only the defaults need the hotpath tree.
			if o.Init.Package == DefaultInit && o.Init.Dir == "" || o.Workload.Package == DefaultWorkload && o.Workload.Dir == "" {
				return err
			}
			root = wd
		}
		o.Root = root
	}
	return nil
}

func (o *Options) epoch() (int64, error) {
	if o.SourceDateEpoch != nil {
		return checkEpoch(*o.SourceDateEpoch)
	}
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", s, err)
	}
	return checkEpoch(v)
}

func checkEpoch(v int64) (int64, error) {
	if v < 0 || v > 1<<32-1 {
		return 0, fmt.Errorf("SOURCE_DATE_EPOCH %d out of range for a cpio archive (0..2^32-1)", v)
	}
	return v, nil
}

// FindRoot returns the nearest directory at or above dir whose go.mod
// declares the hotpath module.
func FindRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == Module {
					return d, nil
				}
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of %s at or above %s: run from the hotpath tree or set the root", Module, dir)
		}
	}
}

// checkEFI makes sure the kernel is a PE32+ image for the architecture (an
// EFI stub kernel) before it is written as its boot path: a kernel built
// without CONFIG_EFI_STUB would be copied happily and fail only in the
// firmware.
func checkEFI(b []byte, a machine.Machine) error {
	if len(b) < 0x40 || b[0] != 'M' || b[1] != 'Z' {
		return errors.New("not an EFI binary (no MZ header): is CONFIG_EFI_STUB set?")
	}
	off := int(binary.LittleEndian.Uint32(b[0x3c:]))
	if off+6 > len(b) || string(b[off:off+4]) != "PE\x00\x00" {
		return errors.New("not an EFI binary (no PE header): is CONFIG_EFI_STUB set?")
	}
	if pe := binary.LittleEndian.Uint16(b[off+4:]); pe != a.PEMachine {
		return fmt.Errorf("EFI binary for machine %#x, want %s (%#x)", pe, a.Arch, a.PEMachine)
	}
	return nil
}

func listing(es []cpio.Entry) []manifest.Entry {
	var out []manifest.Entry
	for _, e := range es {
		me := manifest.Entry{Path: e.Path}
		switch e.Kind {
		case cpio.File:
			me.Mode = fmt.Sprintf("%o", 0o100000|e.Perm)
			me.Size, me.SHA256 = int64(len(e.Data)), sum(e.Data)
		case cpio.Dir:
			me.Mode = fmt.Sprintf("%o", 0o40000|e.Perm)
		case cpio.CharDev:
			me.Mode = fmt.Sprintf("%o", 0o20000|e.Perm)
			me.Device = fmt.Sprintf("%d,%d", e.Major, e.Minor)
		}
		out = append(out, me)
	}
	return out
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func human(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
