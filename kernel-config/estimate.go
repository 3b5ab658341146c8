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

// defaultCPUPerObject is the compile cost of one object of hotpath's x86
// configuration on Linux 6.12 with Debian 12's gcc, measured on a cold
// build (issue 39): 2,173 CPU-seconds for 1,780 objects. It is used until a
// build on this machine has measured its own (cpuPerObjectFile).
const defaultCPUPerObject = 2173.0 / 1780

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

// loadAverage is the 1-minute load average, 0 when unreadable.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
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
	return defaultCPUPerObject, "a cold x86 build's"
}

// logEstimate says what the build is expected to take before it starts:
// the object count (exact when this configuration was built before) and
// the time.
func logEstimate(o Options, dir string) {
	expected, exact := expectedObjects(o, dir)
	per, from := cpuPerObject(o)
	load := loadAverage()
	wall := estimateWall(expected, per, o.Jobs, runtime.NumCPU(), load)
	mark := "~"
	if exact {
		mark = ""
	}
	fmt.Fprintf(o.Log, "kernel: expecting %s%d objects, about %s at -j%d on %d CPUs with load %.1f (%.2f CPU-s per object, %s)\n",
		mark, expected, wall.Round(time.Minute), o.Jobs, runtime.NumCPU(), load, per, from)
}

// expectedObjects is the object count progress is measured against: this
// tree's count from its last build (the build tree is keyed by source,
// configuration and toolchain, so that is the same configuration's
// count: exact), else the last count of any build of the target, else the
// default estimate.
func expectedObjects(o Options, dir string) (int, bool) {
	if n := readInt(filepath.Join(dir, ".hotpath-objects")); n > 0 {
		return n, true
	}
	if n := readInt(objectsEstimate(o)); n > 0 {
		return n, false
	}
	return defaultObjectEstimate, false
}
