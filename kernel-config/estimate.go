package kernelconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// defaultCPUPerObject is the compile cost of one object of hotpath's
// configuration on Linux 6.12 with Debian 12's gcc, used until a cold
// build on this machine has measured its own (cpuPerObjectFile). Measured
// on the 2-core machines CI runs on (December 2026): 0.42 CPU-seconds for
// each of 1,841 objects in a quiet cold CI run (777 s, 7m8s), 0.50 beside
// other work at nice 19 (924 s, 21m54s), 0.45 for the configuration
// before issue 38 (793 s for 1,771), arm64's cross build 0.40-0.48. 0.55
// puts all of these within 2x at the load each started with (the quiet
// one 8.4-12.7 min for 7m8s at load 0-1). Issue 39's first measurement,
// 1.22 s on another machine (2,173 s for 1,780), would be logged 2.2x
// short there until its first build had measured its own cost; the
// progress lines' time left, from the rate measured, is within 1.4-1.7x
// from a twentieth of the objects on.
const defaultCPUPerObject = 0.55

// estimateWall is how long compiling objects should take: their CPU time
// (cpuPerObject seconds each) spread over the cores this build gets. With
// load other runnable tasks on cpus cores, jobs compilers get a fair share
// of cpus*jobs/(jobs+load) cores, never more than jobs or cpus: a quiet
// 2-core machine gives -j2 both cores, the same machine with 4 other tasks
// two thirds of one (the cold build of issue 39: 18 min quiet, 47 min
// loaded).
func estimateWall(objects int, cpuPerObject float64, jobs, cpus int, load float64) time.Duration {
	jobs, cpus = max(jobs, 1), max(cpus, 1)
	cores := min(float64(jobs), float64(cpus))
	if load > 0 {
		cores = min(cores, float64(cpus)*float64(jobs)/(float64(jobs)+load))
	}
	return time.Duration(float64(objects) * cpuPerObject / cores * float64(time.Second))
}

// timeLeft is how long the remaining objects of a build of total should
// take at the rate this build has kept so far (done objects in elapsed):
// the rate is measured, where the estimate before the build had to guess
// the load. Nothing (false) before a twentieth of the objects (at least
// 20) is done: the first objects are no rate.
func timeLeft(elapsed time.Duration, done, remaining, total int) (time.Duration, bool) {
	if done < max(total/20, 20) || remaining < 0 {
		return 0, false
	}
	return time.Duration(float64(elapsed) * float64(remaining) / float64(done)), true
}

// loadAverage is the load the build will share the CPUs with, 0 when
// unreadable (loadFrom).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	return loadFrom(string(b))
}

// loadFrom reads /proc/loadavg ("2.20 1.90 2.40 1/311 4242"): the smaller
// of the 1-minute average and the tasks runnable now other than the
// reader. The average alone remembers the minute before, which in make
// test is the step that just ended (go vet compiling every package: a
// cold CI run's x86 build logged 24 min at load 2.2 and took 7m8s on a
// quiet machine); the runnable count alone is one instant. Both high is
// a loaded machine.
func loadFrom(loadavg string) float64 {
	f := strings.Fields(loadavg)
	if len(f) < 4 {
		return 0
	}
	avg, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	running, _, ok := strings.Cut(f[3], "/")
	n, err := strconv.Atoi(running)
	if !ok || err != nil {
		return avg
	}
	return min(avg, float64(max(n-1, 0)))
}

// cpuPerObjectFile keeps the CPU-seconds per object the last build of the
// target measured on this machine.
func cpuPerObjectFile(o Options) string {
	return objectsEstimate(o) + ".cpu"
}

// cpuPerObject is the last build's measured cost per object, else the
// default, and where it came from.
func cpuPerObject(o Options) (float64, string) {
	b, err := os.ReadFile(cpuPerObjectFile(o))
	if err == nil {
		if v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64); err == nil && v > 0 {
			return v, "measured by the last build here"
		}
	}
	return defaultCPUPerObject, "the default, from cold builds on 2-core machines"
}

// logEstimate says what the build is expected to take before it starts:
// the object count (exact when this configuration was built before) and
// the time. have is how many objects the build tree holds already.
func logEstimate(o Options, est objectEstimate, have int) {
	per, from := cpuPerObject(o)
	fmt.Fprintln(o.Log, estimateLine(est, have, per, from, o.Jobs, runtime.NumCPU(), loadAverage()))
}

// estimateLine is logEstimate's line. The time is the objects still to
// compile's (est.n less have): a tree built before relinks, which takes
// well under a minute, where its whole count would have said 20.
func estimateLine(est objectEstimate, have int, per float64, from string, jobs, cpus int, load float64) string {
	todo := max(est.n-have, 0)
	wall := estimateWall(todo, per, jobs, cpus, load)
	about := "under a minute"
	if wall >= time.Minute {
		about = "about " + wall.Round(time.Minute).String()
	}
	return fmt.Sprintf("kernel: expecting %s%d objects (%s), %s%d to compile: %s at -j%d on %d CPUs with load %.1f (%.2f CPU-s per object, %s)",
		est.mark(), est.n, est.from, est.mark(), todo, about, jobs, cpus, load, per, from)
}

// objectEstimate is the object count progress is measured against.
type objectEstimate struct {
	n     int
	exact bool   // this configuration's own count
	from  string // where n comes from, for the log
}

// mark is "~" before an estimate, nothing before an exact count.
func (e objectEstimate) mark() string {
	if e.exact {
		return ""
	}
	return "~"
}

// expectedObjects is the object count of building the configured tree in
// dir from the source tree: this tree's count from its last build (the
// build tree is keyed by source, configuration and toolchain, so that is
// the same configuration's count: exact); else the count of the last
// build of another configuration of the same kernel and architecture,
// corrected by what the Kbuild files of tree say differs between the two
// configurations (configuredEstimate); else the last count of any build
// of the target; else the default.
func expectedObjects(o Options, dir, tree string) objectEstimate {
	if n := readInt(filepath.Join(dir, ".hotpath-objects")); n > 0 {
		return objectEstimate{n, true, "this configuration's last build"}
	}
	if e, ok := configuredEstimate(filepath.Join(o.CacheDir, "kernel", "build"), dir, tree); ok {
		return e
	}
	if n := readInt(objectsEstimate(o)); n > 0 {
		return objectEstimate{n, false, "the target's last build"}
	}
	return objectEstimate{defaultObjects(o.target), false, "the count of a cold build of this configuration"}
}

// configuredEstimate estimates the object count of the configured (not
// yet built) tree dir from the last build of another configuration of the
// same kernel and architecture under builds (a build tree whose .config
// has the same header line, "# Linux/x86_64 6.12.118 Kernel
// Configuration", and which counted its objects): that build's count plus
// the difference countConfigured finds between the two configurations in
// the source tree. Measured (6.12.118 x86_64): countConfigured reads
// 1,710 objects for main's configuration, which built 1,780, and 1,786
// for the configuration of issue 38; arm64's read 1,323 for 1,396 built.
// What it does not see (the boot stub, vmlinux's own objects, the host
// tools) is about the same in both, so the difference carries over.
func configuredEstimate(builds, dir, tree string) (objectEstimate, bool) {
	if tree == "" {
		return objectEstimate{}, false
	}
	header, cfg, err := readConfigHeader(filepath.Join(dir, ".config"))
	if err != nil {
		return objectEstimate{}, false
	}
	ref, refCount := "", 0
	var refTime time.Time
	entries, _ := os.ReadDir(builds)
	for _, e := range entries {
		d := filepath.Join(builds, e.Name())
		if !e.IsDir() || sameDir(d, dir) {
			continue
		}
		st, err := os.Stat(filepath.Join(d, ".hotpath-objects"))
		n := readInt(filepath.Join(d, ".hotpath-objects"))
		if err != nil || n <= 0 || !st.ModTime().After(refTime) {
			continue
		}
		if h, _, err := readConfigHeader(filepath.Join(d, ".config")); err != nil || h != header {
			continue
		}
		ref, refCount, refTime = d, n, st.ModTime()
	}
	if ref == "" {
		return objectEstimate{}, false
	}
	_, refCfg, err := readConfigHeader(filepath.Join(ref, ".config"))
	if err != nil {
		return objectEstimate{}, false
	}
	arch := srcArch(header)
	have, want := countConfigured(tree, arch, refCfg), countConfigured(tree, arch, cfg)
	if have == 0 || want == 0 {
		return objectEstimate{}, false
	}
	n := max(refCount+want-have, 1)
	return objectEstimate{n, false, fmt.Sprintf("the configured tree: %d built by the last %s build (%s), %+d by the Kbuild files",
		refCount, strings.TrimSuffix(strings.TrimPrefix(header, "# Linux/"), " Kernel Configuration"), filepath.Base(ref), want-have)}, true
}

// readConfigHeader reads a .config: its first line (make's header, which
// names the architecture and kernel version) and its values.
func readConfigHeader(path string) (string, *Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	header := ""
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "# Linux/") {
			header = strings.TrimSpace(l)
			break
		}
	}
	if header == "" {
		return "", nil, fmt.Errorf("%s: no Linux header line", path)
	}
	c, err := ParseConfig(strings.NewReader(string(b)))
	return header, c, err
}

// srcArch is Kbuild's SRCARCH for the architecture of a .config header.
func srcArch(header string) string {
	arch, _, _ := strings.Cut(strings.TrimPrefix(header, "# Linux/"), " ")
	switch arch {
	case "x86_64", "i386", "x86":
		return "x86"
	}
	return arch
}

func sameDir(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}
