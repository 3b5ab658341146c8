// Command benchvm (`make bench-vm`) measures the same workload in the same
// QEMU setup booted several ways, with the load generator (wrk) inside each
// guest's network namespace, side by side in one run:
//
//	the hotpath appliance disk (OVMF, tuned kernel, hotpath init) on
//	Debian's 6.1 kernel, on 6.12, and on 6.12 with the case study's step 10
//	(the NIC's napi_defer_hard_irqs and gro_flush_timeout, the workload's
//	epoll preferring busy polling: issue 26);
//	Debian's stock kernel (linux-image-amd64) with a general-purpose setup:
//	mitigations at their defaults, netfilter with a conntrack rule, a DHCP
//	client left running (see gpinit).
//
// Every guest is booted first and stays up; the runs are then interleaved
// (round r runs every guest once, in an order rotated by r), so a change in
// the host's load shows in every guest alike. Around each run the program
// reads the guest's own counters through its management port (GET
// /metrics: the NIC's queue interrupt lines of /proc/interrupts and the
// CPU time of /proc/stat; gpinit serves the same collectors) and prints per
// guest the median requests/s, queue interrupts per request and guest CPU
// per request. Under TCG (the default here; HOTPATH_KVM=1 opts into KVM)
// the guest CPU is emulated and wrk shares the host's CPUs with QEMU, so
// requests/s is only indicative; interrupts per request count what the
// guest kernel did per request and are the telling figure. The output
// says so.
//
// Run as root (network namespaces, taps). -lock names a file to flock
// around the boots (the team's QEMU lock), taken after the images are
// built.
package main

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hotpath-dev/hotpath/image"
	"github.com/hotpath-dev/hotpath/image/cpio"
	"github.com/hotpath-dev/hotpath/tests/vm"
)

var (
	stockRoot  = flag.String("stock", "", "root of an unpacked linux-image-*-amd64 package (boot/vmlinuz-*, lib/modules/*); default: /boot if installed, else downloaded with apt-get into the cache")
	cpus       = flag.Int("cpus", 2, "vCPUs of each guest")
	duration   = flag.Duration("d", 10*time.Second, "wrk duration per run")
	warmup     = flag.Duration("warmup", 3*time.Second, "an uncounted wrk run per guest before the first round (TCG translates the hot code on first use)")
	conns      = flag.Int("c", 64, "wrk connections")
	threads    = flag.Int("t", 2, "wrk threads")
	runs       = flag.Int("runs", 3, "rounds; each runs every guest once, the median is reported")
	path       = flag.String("path", "/json", "request path")
	queues     = flag.Int("queues", 0, "virtio-net queue pairs of each guest; 0 is one per vCPU")
	wrkTimeout = flag.Duration("wrk-timeout", 30*time.Second, "wrk --timeout: a request slower than this counts as a timeout and is left out of the latency percentiles")
	pipeline   = flag.Int("pipeline", 1, "requests sent back to back on a connection before reading their answers; above 1 the load is tests/txload's, not wrk's (whose percentiles are wrong with pipelining)")
	bodyLen    = flag.Int("body-len", 0, "with -pipeline: each answer's body length, checked (0: not checked)")
	guestList  = flag.String("guests", DefaultGuests, "guests to compare, comma-separated: 6.1, 6.1-step10 (what 6.1 makes of step 10: no EPIOCSPARAMS), 6.12, 6.12-defer (deferral without prefer-busy-poll), 6.12-prefer (prefer-busy-poll without deferral), 6.12-step10, stock; "+
		"step 8: 6.12-noqueue (BQL on), 6.12-bql-inert (noqueue, BQL inert), 6.12-pfifo (pfifo_fast, BQL on)")
	source61  = flag.String("source-6.1", "/usr/src/linux-source-6.1.tar.xz", "kernel source of the 6.1 guest (image.Options.KernelSource)")
	deferIRQs = flag.Int("defer-hard-irqs", 100, "nic.defer_hard_irqs of the step-10 guests")
	groFlush  = flag.Duration("gro-flush-timeout", 50*time.Microsecond, "nic.gro_flush_timeout of the step-10 guests")
	lockPath  = flag.String("lock", os.Getenv("HOTPATH_QEMU_LOCK"), "file to flock while guests run (default $HOTPATH_QEMU_LOCK; empty: none)")
	allowCold = flag.Bool("allow-cold-kernel", false, "build a guest's kernel from scratch when the cache has none of its series (otherwise that is an error)")
	bootWait  = flag.Duration("boot-timeout", 6*time.Minute, "time allowed for a guest to become ready")
	// crc32c_generic: libcrc32c (under nf_tables) needs a crc32c
	// implementation at load time, a soft dependency .modinfo does not list.
	wantModule = []string{"crc32c_generic", "virtio_pci", "virtio_net", "nf_tables", "nft_ct"}
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("bench-vm: ")
	flag.Parse()
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// run builds, boots, measures and prints; its deferred cleanups (guests,
// the lock, the work directory) run whatever fails.
func run(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errors.New("run as root: the guests' network lives in namespaces with tap devices")
	}
	if _, err := exec.LookPath("wrk"); err != nil {
		return errors.New("wrk not found: image/deps.sh bench")
	}
	sel, err := selectGuests(specs(Step10{*deferIRQs, *groFlush}, *source61), *guestList)
	if err != nil {
		return err
	}
	accel := vm.Accel()
	work, err := os.MkdirTemp("", "benchvm")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	guests, err := prepare(ctx, sel, work, accel)
	if err != nil {
		return err
	}
	if *lockPath != "" {
		unlock, err := flock(*lockPath)
		if err != nil {
			return err
		}
		defer unlock()
	}
	for _, g := range guests {
		err := g.boot(ctx)
		if g.Guest != nil {
			defer g.Close()
		}
		if err != nil {
			return err
		}
	}
	if err := rounds(ctx, guests); err != nil {
		return err
	}
	printTable(os.Stdout, guests, accel)
	return nil
}

// prepare builds what each guest boots: an appliance disk per appliance
// guest (a relink of the cached kernel with that guest's command line),
// the stock kernel's initramfs once.
func prepare(ctx context.Context, sel []spec, work, accel string) ([]*guest, error) {
	var out []*guest
	for i, s := range sel {
		g := &guest{spec: s, cfg: vm.Config{CPUs: *cpus, Accel: accel, Queues: *queues}}
		if s.Stock {
			kernel, initrd, err := stockGuest(ctx, work)
			if err != nil {
				return nil, err
			}
			g.cfg.Kernel, g.cfg.Initrd, g.cfg.Append = kernel, initrd, "console=ttyS0"
		} else {
			if s.Version != "" && !*allowCold {
				ok, err := kernelCached(cacheDir(), s.Version)
				if err != nil {
					return nil, err
				}
				if !ok {
					return nil, fmt.Errorf("%s: no %s kernel in the cache %s: build it first (hotpath-kernel build -source %s), "+
						"pass -allow-cold-kernel, or leave the guest out (-guests)", s.Name, s.Version, cacheDir(), s.Source)
				}
			}
			log.Printf("%s: building the image (kernel source %q, cmdline %q)", s.Name, s.Source, s.Cmdline)
			res, err := image.Build(ctx, image.Options{Out: filepath.Join(work, fmt.Sprint("img", i)),
				KernelSource: s.Source, Cmdline: s.Cmdline, Log: os.Stderr})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.Name, err)
			}
			g.cfg.Disk, g.kernel = res.Disk, res.M.Kernel.Version
		}
		out = append(out, g)
	}
	return out, nil
}

// flock takes an exclusive lock on path, waiting for it.
func flock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	log.Printf("waiting for the QEMU lock %s", path)
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

var (
	reqsPerSec = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	reqsTotal  = regexp.MustCompile(`(\d+) requests in `)
	non2xx     = regexp.MustCompile(`Non-2xx or 3xx responses:\s+(\d+)`)
)

var p99 = regexp.MustCompile(`(?m)^\s*99%\s+([\d.]+)(us|ms|s)\s*$`)

// parseP99 returns wrk --latency's 99th percentile (with -pipeline, of a
// whole batch of requests).
func parseP99(out []byte) (time.Duration, error) {
	m := p99.FindSubmatch(out)
	if m == nil {
		return 0, errors.New("wrk: no 99% line (run with --latency)")
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return 0, err
	}
	if v == 0 {
		// wrk records no latency above its --timeout: all of them were.
		return 0, errors.New("wrk: 99% is 0: no batch completed within --timeout")
	}
	unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[string(m[2])]
	return time.Duration(v * float64(unit)), nil
}

// parseWrk returns wrk's requests/s and the requests it completed.
func parseWrk(out []byte) (rps float64, requests int64, err error) {
	if m := non2xx.FindSubmatch(out); m != nil {
		return 0, 0, fmt.Errorf("wrk: %s non-2xx responses", m[1])
	}
	m := reqsPerSec.FindSubmatch(out)
	n := reqsTotal.FindSubmatch(out)
	if m == nil || n == nil {
		return 0, 0, errors.New("wrk: no Requests/sec or request count in its output")
	}
	if rps, err = strconv.ParseFloat(string(m[1]), 64); err != nil {
		return 0, 0, err
	}
	requests, err = strconv.ParseInt(string(n[1]), 10, 64)
	return rps, requests, err
}

// stockGuest returns Debian's stock kernel and an initramfs with gpinit,
// the default workload and the modules they need.
func stockGuest(ctx context.Context, work string) (kernel, initrd string, err error) {
	root := *stockRoot
	if root == "" {
		if root, err = findOrFetchStock(ctx); err != nil {
			return "", "", err
		}
	}
	vmlinuz, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*-amd64"))
	if len(vmlinuz) == 0 {
		return "", "", fmt.Errorf("no boot/vmlinuz-*-amd64 under %s", root)
	}
	slices.Sort(vmlinuz)
	kernel = vmlinuz[len(vmlinuz)-1]
	release := strings.TrimPrefix(filepath.Base(kernel), "vmlinuz-")
	mods, err := moduleOrder(filepath.Join(root, "lib", "modules", release), wantModule)
	if err != nil {
		return "", "", err
	}
	work = filepath.Join(work, "stock")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return "", "", err
	}
	bins := map[string]string{
		"init":     "./tests/benchvm/gpinit",
		"workload": "./server/cmd/hotpath-json",
	}
	data := map[string][]byte{}
	for name, pkg := range bins {
		out := filepath.Join(work, name)
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
		}
		if data[name], err = os.ReadFile(out); err != nil {
			return "", "", err
		}
	}
	dir := func(p string) cpio.Entry { return cpio.Entry{Path: p, Kind: cpio.Dir, Perm: 0o755} }
	entries := []cpio.Entry{
		dir("/dev"),
		{Path: "/dev/console", Kind: cpio.CharDev, Perm: 0o600, Major: 5, Minor: 1},
		{Path: "/dev/null", Kind: cpio.CharDev, Perm: 0o666, Major: 1, Minor: 3},
		dir("/etc"), dir("/etc/gpinit"), dir("/modules"), dir("/proc"), dir("/run"), dir("/sys"),
		{Path: "/init", Kind: cpio.File, Perm: 0o755, Data: data["init"]},
		{Path: "/workload", Kind: cpio.File, Perm: 0o755, Data: data["workload"]},
	}
	var list bytes.Buffer
	for _, m := range mods {
		b, err := os.ReadFile(m)
		if err != nil {
			return "", "", err
		}
		p := "/modules/" + filepath.Base(m)
		entries = append(entries, cpio.Entry{Path: p, Kind: cpio.File, Perm: 0o644, Data: b})
		list.WriteString(p + "\n")
	}
	entries = append(entries, cpio.Entry{Path: "/etc/gpinit/modules", Kind: cpio.File, Perm: 0o644, Data: list.Bytes()})
	initrd = filepath.Join(work, "initramfs.cpio")
	if err := cpio.WriteFile(initrd, entries, cpio.Options{}); err != nil {
		return "", "", err
	}
	log.Printf("stock guest: %s, %d modules (%s)", kernel, len(mods), strings.Join(baseNames(mods), " "))
	return kernel, initrd, nil
}

func baseNames(paths []string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, strings.TrimSuffix(filepath.Base(p), ".ko"))
	}
	return out
}

// findOrFetchStock returns a root holding Debian's stock kernel: the host's
// own /boot and /lib/modules when linux-image-amd64 is installed, else the
// package downloaded with apt-get and unpacked into the cache (unpacking,
// not installing, leaves the host's boot loader alone).
func findOrFetchStock(ctx context.Context) (string, error) {
	if m, _ := filepath.Glob("/boot/vmlinuz-*-amd64"); len(m) > 0 {
		return "/", nil
	}
	out, err := exec.CommandContext(ctx, "apt-cache", "depends", "linux-image-amd64").Output()
	if err != nil {
		return "", fmt.Errorf("apt-cache depends linux-image-amd64: %w", err)
	}
	pkg := regexp.MustCompile(`Depends: (linux-image-[0-9][^\s]*-amd64)`).FindSubmatch(out)
	if pkg == nil {
		return "", fmt.Errorf("linux-image-amd64 names no kernel package:\n%s", out)
	}
	cache := filepath.Join(cacheDir(), "bench", string(pkg[1]))
	if _, err := os.Stat(filepath.Join(cache, "root", "boot")); err == nil {
		return filepath.Join(cache, "root"), nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	log.Printf("downloading %s (Debian's stock kernel) into %s", pkg[1], cache)
	dl := exec.CommandContext(ctx, "apt-get", "download", string(pkg[1]))
	dl.Dir, dl.Stdout, dl.Stderr = cache, os.Stderr, os.Stderr
	if err := dl.Run(); err != nil {
		return "", fmt.Errorf("apt-get download %s: %w", pkg[1], err)
	}
	debs, _ := filepath.Glob(filepath.Join(cache, string(pkg[1])+"_*.deb"))
	if len(debs) == 0 {
		return "", fmt.Errorf("apt-get download left no .deb in %s", cache)
	}
	tmp := filepath.Join(cache, "root.tmp")
	os.RemoveAll(tmp)
	if b, err := exec.CommandContext(ctx, "dpkg-deb", "-x", debs[0], tmp).CombinedOutput(); err != nil {
		return "", fmt.Errorf("dpkg-deb -x: %v\n%s", err, b)
	}
	if err := os.Rename(tmp, filepath.Join(cache, "root")); err != nil {
		return "", err
	}
	return filepath.Join(cache, "root"), nil
}

func cacheDir() string {
	if d := os.Getenv("HOTPATH_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "hotpath")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "hotpath")
}

// moduleOrder finds the named modules under dir and returns them with their
// dependencies (from each module's .modinfo "depends=" field, so no
// modules.dep/depmod is needed), dependencies first.
func moduleOrder(dir string, names []string) ([]string, error) {
	byName := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".ko") {
			byName[modName(strings.TrimSuffix(d.Name(), ".ko"))] = p
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(n string) error
	visit = func(n string) error {
		n = modName(n)
		switch state[n] {
		case 1:
			return fmt.Errorf("module dependency cycle at %s", n)
		case 2:
			return nil
		}
		p, ok := byName[n]
		if !ok {
			return fmt.Errorf("module %s not found under %s (built in?)", n, dir)
		}
		state[n] = 1
		deps, err := modDepends(p)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d); err != nil {
				return err
			}
		}
		state[n] = 2
		order = append(order, p)
		return nil
	}
	for _, n := range names {
		if err := visit(n); err != nil {
			return nil, err
		}
	}
	return order, nil
}

func modName(s string) string { return strings.ReplaceAll(s, "-", "_") }

func modDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	defer f.Close()
	s := f.Section(".modinfo")
	if s == nil {
		return nil, fmt.Errorf("module %s: no .modinfo", path)
	}
	b, err := s.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}
