package kernelconfig

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEstimateWall: the estimate before any build here (the default cost
// per object) against the cold x86 builds measured, within 2x both ways:
// issue 39's (1,780 objects, 2,173 CPU-seconds: 18 min of 2 quiet cores,
// 47 min on a machine loaded with about 4 other tasks) and issue 38's
// (1,850 objects, 924 CPU-seconds, 21m54s at -j2 on 2 cores, load 4.8
// when it started); and once the build has measured its cost, the next
// estimate from it.
func TestEstimateWall(t *testing.T) {
	for _, tc := range []struct {
		name     string
		objects  int
		perObj   float64
		jobs     int
		cpus     int
		load     float64
		measured time.Duration
	}{
		// Issue 39's machine, from its own measured cost (1.22 s an object).
		{"issue 39, quiet 2 cores", 1780, 2173.0 / 1780, 2, 2, 0, 18 * time.Minute},
		{"issue 39, loaded 2 cores", 1780, 2173.0 / 1780, 2, 2, 4, 47 * time.Minute},
		{"issue 39, -j8 on 2 cores", 1780, 2173.0 / 1780, 8, 2, 0, 18 * time.Minute},
		{"cold CI, load 1 at the start", 1841, defaultCPUPerObject, 2, 2, 1, 7*time.Minute + 8*time.Second},
		{"issue 38, load 4.8 at the start", 1850, defaultCPUPerObject, 2, 2, 4.8, 21*time.Minute + 54*time.Second},
		{"issue 38, from its own measured cost", 1850, 924.0 / 1841, 2, 2, 4.8, 21*time.Minute + 54*time.Second},
		// Session 11's cold CI run: /proc/loadavg read "2.20 ... 1/..." as
		// the build started, right after go vet (logged 24 min with the
		// average alone); quiet 2 cores, 7m8s, 777 CPU-seconds.
		{"cold CI after go vet", 1771, defaultCPUPerObject, 2, 2, loadFrom("2.20 1.90 1.40 1/312 4242"), 7*time.Minute + 8*time.Second},
	} {
		got := estimateWall(tc.objects, tc.perObj, tc.jobs, tc.cpus, tc.load)
		if got < tc.measured/2 || got > tc.measured*2 {
			t.Errorf("%s: estimate %v, measured %v: not within 2x", tc.name, got.Round(time.Second), tc.measured)
		}
	}
	if a, b := estimateWall(100, 1, 1, 4, 0), estimateWall(100, 1, 4, 4, 0); a != 100*time.Second || b != 25*time.Second {
		t.Errorf("-j1 %v, -j4 %v on 4 idle cores; want 100s, 25s", a, b)
	}
}

// The load the build will share the CPUs with: the smaller of the
// 1-minute average and the tasks runnable now besides the reader.
func TestLoadFrom(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
	}{
		{"2.20 1.90 1.40 1/312 4242", 0},   // the step before just ended
		{"5.80 6.10 6.40 7/512 4242", 5.8}, // loaded: the average
		{"0.50 1.90 1.40 4/312 4242", 0.5}, // a burst now: the average
		{"3.00 1.00 1.00 3/312 4242", 2},   // both: the smaller
		{"3.00 1.00 1.00", 0},              // too short
		{"x 1.00 1.00 1/2 3", 0},
		{"1.50 1.00 1.00 x/2 3", 1.5},
	} {
		if got := loadFrom(tc.in); got != tc.want {
			t.Errorf("loadFrom(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestProgressNeverPast100: a build that outgrows its estimate says so
// (the total becomes at least the count) instead of going past 100%.
func TestProgressNeverPast100(t *testing.T) {
	cache, dir := t.TempDir(), t.TempDir()
	for _, f := range []string{"a.o", "b.o", "c.o"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	o := Options{CacheDir: cache, Log: &syncBuf{}, ProgressEvery: 20 * time.Millisecond}
	os.MkdirAll(filepath.Dir(objectsEstimate(o)), 0o755)
	os.WriteFile(objectsEstimate(o), []byte("2\n"), 0o644)
	stop := startProgress(context.Background(), o, dir, expectedObjects(o, dir, ""), time.Now())
	time.Sleep(100 * time.Millisecond)
	stop()
	log := o.Log.(*syncBuf).String()
	if !strings.Contains(log, "kernel: 3/~3 objects (100%),") || strings.Contains(log, "150%") {
		t.Errorf("progress past the estimate: %q", log)
	}
}

// TestTimeLeft: the rest at the rate so far, and nothing before the rate
// is one.
func TestTimeLeft(t *testing.T) {
	for _, tc := range []struct {
		elapsed              time.Duration
		done, remaining, all int
		want                 time.Duration
		ok                   bool
	}{
		{10 * time.Minute, 900, 900, 1800, 10 * time.Minute, true},
		{10 * time.Minute, 600, 1200, 1800, 20 * time.Minute, true},
		{time.Minute, 89, 1711, 1800, 0, false}, // under a twentieth
		{time.Minute, 19, 1, 20, 0, false},      // under 20
		{time.Minute, 20, 0, 20, 0, true},       // done
	} {
		got, ok := timeLeft(tc.elapsed, tc.done, tc.remaining, tc.all)
		if ok != tc.ok || got != tc.want {
			t.Errorf("timeLeft(%v, %d, %d, %d) = %v, %v; want %v, %v", tc.elapsed, tc.done, tc.remaining, tc.all, got, ok, tc.want, tc.ok)
		}
	}
}

// TestEstimateLine: a cold build's line gives the time of all its
// objects; a tree built before (a relink: every object there) says under
// a minute, not the whole count's time.
func TestEstimateLine(t *testing.T) {
	cold := estimateLine(objectEstimate{1856, false, "the configured tree"}, 9, 0.5, "measured", 2, 2, 0)
	if want := "kernel: expecting ~1856 objects (the configured tree), ~1847 to compile: about 8m0s at -j2 on 2 CPUs with load 0.0 (0.50 CPU-s per object, measured)"; cold != want {
		t.Errorf("cold build:\n%s\nwant\n%s", cold, want)
	}
	relink := estimateLine(objectEstimate{1780, true, "this configuration's last build"}, 1780, 0.5, "measured", 2, 2, 3.5)
	if !strings.Contains(relink, "expecting 1780 objects (this configuration's last build), 0 to compile: under a minute") {
		t.Errorf("relink: %s", relink)
	}
}
