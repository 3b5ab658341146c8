// Command benchvm (`make bench-vm`) measures the same workload in the same
// QEMU setup booted two ways, with the load generator (wrk) inside the
// guest's network namespace:
//
//	(a) the hotpath appliance disk (OVMF, tuned kernel, hotpath init);
//	(b) Debian's stock kernel (linux-image-amd64) with a general-purpose
//	    setup: mitigations at their defaults, netfilter with a conntrack
//	    rule, a DHCP client left running (see gpinit).
//
// and prints the req/s of each and the ratio (a)/(b). Under TCG (the
// default here; HOTPATH_KVM=1 opts into KVM) the guest CPU is emulated and
// wrk shares the host's CPUs with QEMU, so the figure is only indicative;
// the output says so.
//
// Run as root (network namespaces, taps).
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
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hotpath-dev/hotpath/image"
	"github.com/hotpath-dev/hotpath/image/cpio"
	"github.com/hotpath-dev/hotpath/tests/vm"
)

var (
	imagePath = flag.String("image", "", "appliance disk to boot (default: build one with the default workload)")
	stockRoot = flag.String("stock", "", "root of an unpacked linux-image-*-amd64 package (boot/vmlinuz-*, lib/modules/*); default: /boot if installed, else downloaded with apt-get into the cache")
	cpus      = flag.Int("cpus", 2, "vCPUs of each guest")
	duration  = flag.Duration("d", 10*time.Second, "wrk duration per run")
	conns     = flag.Int("c", 64, "wrk connections")
	threads   = flag.Int("t", 2, "wrk threads")
	runs      = flag.Int("runs", 3, "runs per guest; the median is reported")
	path      = flag.String("path", "/json", "request path")
	only      = flag.String("only", "", "measure only one guest: appliance or stock")
	bootWait  = flag.Duration("boot-timeout", 6*time.Minute, "time allowed for a guest to become ready")
	// crc32c_generic: libcrc32c (under nf_tables) needs a crc32c
	// implementation at load time, a soft dependency .modinfo does not list.
	wantModule = []string{"crc32c_generic", "virtio_pci", "virtio_net", "nf_tables", "nft_ct"}
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("bench-vm: ")
	flag.Parse()
	if os.Geteuid() != 0 {
		log.Fatal("run as root: the guests' network lives in namespaces with tap devices")
	}
	if _, err := exec.LookPath("wrk"); err != nil {
		log.Fatal("wrk not found: image/deps.sh bench")
	}
	ctx := context.Background()
	accel := vm.Accel()

	disk := *imagePath
	if disk == "" && *only != "stock" {
		out, err := os.MkdirTemp("", "benchvm-img")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(out)
		res, err := image.Build(ctx, image.Options{Out: out, Log: os.Stderr})
		if err != nil {
			log.Fatal(err)
		}
		disk = res.Disk
	}
	kernel, initrd, cleanup, err := stockGuest(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer cleanup()

	var a, b float64
	if *only != "stock" {
		if a, err = measure(ctx, "hotpath appliance", vm.Config{Disk: disk, CPUs: *cpus, Accel: accel}, "HOTPATH-REPORT"); err != nil {
			log.Fatal(err)
		}
	}
	if *only != "appliance" {
		if b, err = measure(ctx, "stock Debian kernel", vm.Config{Kernel: kernel, Initrd: initrd, Append: "console=ttyS0",
			CPUs: *cpus, Accel: accel}, "GPINIT-READY"); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("\nbench-vm: GET %s, %d vCPUs under %s, wrk -t%d -c%d -d%v, median of %d runs\n",
		*path, *cpus, accel, *threads, *conns, *duration, *runs)
	if a > 0 {
		fmt.Printf("  (a) hotpath appliance     %12.0f req/s\n", a)
	}
	if b > 0 {
		fmt.Printf("  (b) stock Debian kernel   %12.0f req/s\n", b)
	}
	if a > 0 && b > 0 {
		fmt.Printf("  ratio (a)/(b)             %12.2f\n", a/b)
	}
	if accel == "tcg" {
		fmt.Println("  NOTE: under TCG the guest CPU is emulated and wrk competes with QEMU for the host's CPUs:")
		fmt.Println("        this ratio is only indicative. Run with HOTPATH_KVM=1 where KVM works for a real figure.")
	}
}

// measure boots cfg, waits for readyMark on the console, runs wrk from the
// guest's namespace and returns the median req/s.
func measure(ctx context.Context, name string, cfg vm.Config, readyMark string) (float64, error) {
	log.Printf("%s: booting %d vCPUs under %s", name, cfg.CPUs, cfg.Accel)
	g, err := vm.StartGuest(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer g.Close()
	bctx, cancel := context.WithTimeout(ctx, *bootWait)
	defer cancel()
	if _, err := g.Console.WaitString(bctx, 0, readyMark); err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	log.Printf("%s: ready after %v", name, time.Since(g.Started).Round(time.Millisecond))
	url := "http://" + g.Addr + ":8080" + *path
	var results []float64
	for i := 0; i < *runs; i++ {
		cmd := g.Netns.Command(ctx, "wrk", "-t", strconv.Itoa(*threads), "-c", strconv.Itoa(*conns),
			"-d", duration.String(), url)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("%s: wrk: %v\n%s", name, err, out)
		}
		rps, err := parseWrk(out)
		if err != nil {
			return 0, fmt.Errorf("%s: %w\n%s", name, err, out)
		}
		log.Printf("%s: run %d: %.0f req/s", name, i+1, rps)
		results = append(results, rps)
	}
	sort.Float64s(results)
	return results[len(results)/2], nil
}

var reqsPerSec = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
var non2xx = regexp.MustCompile(`Non-2xx or 3xx responses:\s+(\d+)`)

func parseWrk(out []byte) (float64, error) {
	if m := non2xx.FindSubmatch(out); m != nil {
		return 0, fmt.Errorf("wrk: %s non-2xx responses", m[1])
	}
	m := reqsPerSec.FindSubmatch(out)
	if m == nil {
		return 0, errors.New("wrk: no Requests/sec in its output")
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// stockGuest returns Debian's stock kernel and an initramfs with gpinit,
// the default workload and the modules they need.
func stockGuest(ctx context.Context) (kernel, initrd string, cleanup func(), err error) {
	root := *stockRoot
	if root == "" {
		if root, err = findOrFetchStock(ctx); err != nil {
			return "", "", nil, err
		}
	}
	vmlinuz, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*-amd64"))
	if len(vmlinuz) == 0 {
		return "", "", nil, fmt.Errorf("no boot/vmlinuz-*-amd64 under %s", root)
	}
	slices.Sort(vmlinuz)
	kernel = vmlinuz[len(vmlinuz)-1]
	release := strings.TrimPrefix(filepath.Base(kernel), "vmlinuz-")
	mods, err := moduleOrder(filepath.Join(root, "lib", "modules", release), wantModule)
	if err != nil {
		return "", "", nil, err
	}
	work, err := os.MkdirTemp("", "benchvm-stock")
	if err != nil {
		return "", "", nil, err
	}
	cleanup = func() { os.RemoveAll(work) }
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
			cleanup()
			return "", "", nil, fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
		}
		if data[name], err = os.ReadFile(out); err != nil {
			cleanup()
			return "", "", nil, err
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
			cleanup()
			return "", "", nil, err
		}
		p := "/modules/" + filepath.Base(m)
		entries = append(entries, cpio.Entry{Path: p, Kind: cpio.File, Perm: 0o644, Data: b})
		list.WriteString(p + "\n")
	}
	entries = append(entries, cpio.Entry{Path: "/etc/gpinit/modules", Kind: cpio.File, Perm: 0o644, Data: list.Bytes()})
	initrd = filepath.Join(work, "initramfs.cpio")
	if err := cpio.WriteFile(initrd, entries, cpio.Options{}); err != nil {
		cleanup()
		return "", "", nil, err
	}
	log.Printf("stock guest: %s, %d modules (%s)", kernel, len(mods), strings.Join(baseNames(mods), " "))
	return kernel, initrd, cleanup, nil
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
