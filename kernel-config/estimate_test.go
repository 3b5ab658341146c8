package kernelconfig

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEstimateWall: the estimate against issue 39's cold x86 build
// (1,780 objects, 2,173 CPU-seconds; 18 min of 2 quiet cores, 47 min on a
// machine loaded with about 4 other tasks) is within 2x both ways.
func TestEstimateWall(t *testing.T) {
	for _, tc := range []struct {
		name     string
		jobs     int
		cpus     int
		load     float64
		measured time.Duration
	}{
		{"quiet 2 cores", 2, 2, 0, 18 * time.Minute},
		{"loaded 2 cores", 2, 2, 4, 47 * time.Minute},
		{"-j8 on 2 cores", 8, 2, 0, 18 * time.Minute},
	} {
		got := estimateWall(1780, defaultCPUPerObject, tc.jobs, tc.cpus, tc.load)
		if got < tc.measured/2 || got > tc.measured*2 {
			t.Errorf("%s: estimate %v, measured %v: not within 2x", tc.name, got.Round(time.Second), tc.measured)
		}
	}
	if a, b := estimateWall(100, 1, 1, 4, 0), estimateWall(100, 1, 4, 4, 0); a != 100*time.Second || b != 25*time.Second {
		t.Errorf("-j1 %v, -j4 %v on 4 idle cores; want 100s, 25s", a, b)
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
