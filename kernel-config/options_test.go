package kernelconfig

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// What an Options left at its zero values becomes, and what a caller's
// values stay (the mutation run found none of it checked).
func TestSetDefaults(t *testing.T) {
	for _, tc := range []struct {
		name     string
		o        Options
		jobs     int
		progress time.Duration
	}{
		{"zero", Options{}, runtime.NumCPU(), 10 * time.Second},
		{"negative", Options{Jobs: -1, ProgressEvery: -time.Second}, runtime.NumCPU(), 10 * time.Second},
		{"one job, kept", Options{Jobs: 1, ProgressEvery: time.Nanosecond}, 1, time.Nanosecond},
		{"caller's", Options{Jobs: 3, ProgressEvery: time.Minute}, 3, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.CacheDir = t.TempDir()
			if err := o.setDefaults(); err != nil {
				t.Fatal(err)
			}
			if o.Jobs != tc.jobs || o.ProgressEvery != tc.progress {
				t.Errorf("jobs %d, progress every %v; want %d, %v", o.Jobs, o.ProgressEvery, tc.jobs, tc.progress)
			}
			if o.Log == nil || o.target != AMD64 || len(o.Fragments) == 0 {
				t.Errorf("log %v, target %v, %d fragments", o.Log, o.target, len(o.Fragments))
			}
			if !filepath.IsAbs(o.CacheDir) {
				t.Errorf("cache directory %q is not absolute", o.CacheDir)
			}
		})
	}
	// kbuild splits O= and CONFIG_INITRAMFS_SOURCE on white space.
	for _, dir := range []string{"with space", "with:colon"} {
		o := Options{CacheDir: filepath.Join(t.TempDir(), dir)}
		if err := o.setDefaults(); err == nil || !strings.Contains(err.Error(), "kbuild cannot use") {
			t.Errorf("cache directory %q: %v", dir, err)
		}
	}
	if o := (Options{Arch: "riscv64", CacheDir: t.TempDir()}); o.setDefaults() == nil {
		t.Error("riscv64 accepted")
	}
}

// Only a cross build names a cross compiler: a CROSS_COMPILE= on a
// native build would make kbuild look for "gcc" under a prefix.
func TestMakeVars(t *testing.T) {
	if got := AMD64.makeVars(); !slices.Equal(got, []string{"ARCH=x86_64"}) {
		t.Errorf("amd64: %q", got)
	}
	if got := ARM64.makeVars(); !slices.Equal(got, []string{"ARCH=arm64", "CROSS_COMPILE=aarch64-linux-gnu-"}) {
		t.Errorf("arm64: %q", got)
	}
}

// prepare checks the per-image command line and names the initramfs by
// its content.
func TestPrepare(t *testing.T) {
	dir := t.TempDir()
	initrd := filepath.Join(dir, "initramfs.cpio")
	data := []byte("070701 not really a cpio")
	if err := os.WriteFile(initrd, data, 0o644); err != nil {
		t.Fatal(err)
	}
	o := Options{CacheDir: dir, Initramfs: initrd, Cmdline: "hotpath.workload.port=80"}
	got, err := o.prepare()
	if sum := sha256Hex(data); err != nil || got != sum {
		t.Errorf("prepare = %q, %v; want the initramfs's sha256 %s", got, err, sum)
	}
	if got, err := (&Options{CacheDir: dir}).prepare(); err != nil || got != "" {
		t.Errorf("no initramfs: %q, %v", got, err)
	}
	for _, cmdline := range []string{"a\nb", "a\rb", "a\x00b", "mitigations=auto", "spectre_v2=on"} {
		if _, err := (&Options{CacheDir: dir, Initramfs: initrd, Cmdline: cmdline}).prepare(); err == nil {
			t.Errorf("command line %q accepted", cmdline)
		}
	}
	if _, err := (&Options{CacheDir: dir, Initramfs: filepath.Join(dir, "missing")}).prepare(); err == nil {
		t.Error("a missing initramfs accepted")
	}
}
