package kernelconfig

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const fakeMakefile = "# SPDX\nVERSION = 6\nPATCHLEVEL = 1\nSUBLEVEL = 99\nEXTRAVERSION = -test\n"

func writeTarball(t *testing.T, path string, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: "linux-x/", Typeflag: tar.TypeDir, Mode: 0o755})
	for name, body := range files {
		tw.WriteHeader(&tar.Header{Name: "linux-x/" + name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestResolveSourceTarball(t *testing.T) {
	dir, cache := t.TempDir(), t.TempDir()
	tarball := filepath.Join(dir, "linux.tar.gz")
	writeTarball(t, tarball, map[string]string{"Makefile": fakeMakefile, "Kconfig": "config X\n\tbool\n"})
	var log strings.Builder
	src, err := ResolveSource(context.Background(), tarball, cache, &log)
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := fileSHA256(tarball)
	if src.ID != "tarball sha256:"+sum || src.Version != "6.1.99-test" {
		t.Errorf("got %+v", src)
	}
	if src.Tree != filepath.Join(cache, "kernel", "src", sum[:16]) {
		t.Errorf("tree %s not in the cache", src.Tree)
	}
	if _, err := os.Stat(filepath.Join(src.Tree, "Kconfig")); err != nil {
		t.Errorf("not extracted: %v", err)
	}
	if !strings.Contains(log.String(), "extracting") {
		t.Errorf("no progress line: %q", log.String())
	}
	// Extracted once: a second resolve reuses the tree.
	log.Reset()
	if _, err := ResolveSource(context.Background(), tarball, cache, &log); err != nil || log.Len() != 0 {
		t.Errorf("second resolve extracted again (%q, %v)", log.String(), err)
	}
	// Not a Linux tarball.
	bad := filepath.Join(dir, "bad.tar.gz")
	writeTarball(t, bad, map[string]string{"README": "hi"})
	if _, err := ResolveSource(context.Background(), bad, cache, &log); err == nil {
		t.Error("a tarball without a Makefile was accepted")
	}
}

func TestResolveSourceTree(t *testing.T) {
	tree := t.TempDir()
	os.WriteFile(filepath.Join(tree, "Makefile"), []byte(fakeMakefile), 0o644)
	src, err := ResolveSource(context.Background(), tree, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if src.Tree != tree || !strings.HasPrefix(src.ID, "tree sha256:") {
		t.Errorf("got %+v", src)
	}
	// Any edit changes the identity.
	os.WriteFile(filepath.Join(tree, "new.c"), []byte("int x;\n"), 0o644)
	src2, err := ResolveSource(context.Background(), tree, t.TempDir(), nil)
	if err != nil || src2.ID == src.ID {
		t.Errorf("identity did not change after adding a file (%v)", err)
	}
	// A configured tree is refused: kbuild could not build out of tree
	// from it, and hotpath never writes into a user's tree.
	os.WriteFile(filepath.Join(tree, ".config"), []byte("CONFIG_X=y\n"), 0o644)
	if _, err := ResolveSource(context.Background(), tree, t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "mrproper") {
		t.Errorf("unclean tree: %v", err)
	}
}

// TestTreeIdentityByContent: a copy of a tree with other modification
// times is the same tree; an edit that keeps the size and sets the
// modification time back is another one (the stat cache must not hide it);
// an executable bit and a symlink target count.
func TestTreeIdentityByContent(t *testing.T) {
	mk := func() string {
		tree := t.TempDir()
		os.MkdirAll(filepath.Join(tree, "kernel"), 0o755)
		os.WriteFile(filepath.Join(tree, "Makefile"), []byte(fakeMakefile), 0o644)
		os.WriteFile(filepath.Join(tree, "kernel", "a.c"), []byte("int a = 1;\n"), 0o644)
		os.WriteFile(filepath.Join(tree, "scripts.sh"), []byte("#!/bin/sh\n"), 0o755)
		os.Symlink("kernel/a.c", filepath.Join(tree, "link"))
		return tree
	}
	cache := t.TempDir()
	id := func(tree string) string {
		t.Helper()
		src, err := ResolveSource(context.Background(), tree, cache, nil)
		if err != nil {
			t.Fatal(err)
		}
		return src.ID
	}
	a, b := mk(), mk()
	old := time.Unix(1_000_000, 0)
	os.Chtimes(filepath.Join(b, "kernel", "a.c"), old, old)
	idA := id(a)
	if idB := id(b); idB != idA {
		t.Errorf("same content, other mtimes: %s != %s", idB, idA)
	}
	if id(a) != idA {
		t.Error("identity changed on a second (cached) read")
	}

	// Same size, mtime restored: only the content (and the ctime the
	// cache keys on) changed.
	p := filepath.Join(a, "kernel", "a.c")
	st, _ := os.Stat(p)
	os.WriteFile(p, []byte("int a = 2;\n"), 0o644)
	os.Chtimes(p, st.ModTime(), st.ModTime())
	if id(a) == idA {
		t.Error("an edit with the modification time set back kept the identity")
	}
	os.WriteFile(p, []byte("int a = 1;\n"), 0o644)
	if id(a) != idA {
		t.Error("reverting the edit did not restore the identity")
	}

	os.Chmod(filepath.Join(a, "scripts.sh"), 0o644)
	if id(a) == idA {
		t.Error("losing an executable bit kept the identity")
	}
	os.Chmod(filepath.Join(a, "scripts.sh"), 0o755)
	os.Remove(filepath.Join(a, "link"))
	os.Symlink("Makefile", filepath.Join(a, "link"))
	if id(a) == idA {
		t.Error("a new symlink target kept the identity")
	}
}

// TestResolveSourceMissing: a source the user named that is not there
// is reported as such (the apt-get hint is for the default tarball only).
func TestResolveSourceMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.tar.xz")
	_, err := ResolveSource(context.Background(), path, t.TempDir(), nil)
	if err == nil || err.Error() != "kernel source: stat "+path+": no such file or directory" {
		t.Fatalf("error %v", err)
	}
}

// TestKernelVersion: VERSION.PATCHLEVEL[.SUBLEVEL]EXTRAVERSION from the
// Makefile's first 20 lines, where kbuild keeps them; both of the first
// two are required.
func TestKernelVersion(t *testing.T) {
	late := fakeMakefile + strings.Repeat("NAME = Baby Opossum Posse\n", 15) + "EXTRAVERSION = -late\n"
	for _, tc := range []struct {
		name, makefile, want string // want "": an error
	}{
		{"full", fakeMakefile, "6.1.99-test"},
		{"no sublevel, no extraversion", "VERSION = 6\nPATCHLEVEL = 12\n", "6.12"},
		{"only the head counts", late, "6.1.99-test"},
		{"no patchlevel", "VERSION = 6\nSUBLEVEL = 1\n", ""},
		{"no version", "PATCHLEVEL = 1\nSUBLEVEL = 1\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "Makefile")
			if err := os.WriteFile(p, []byte(tc.makefile), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := kernelVersion(p)
			if tc.want == "" && (err == nil || !strings.Contains(err.Error(), "has no VERSION/PATCHLEVEL")) || tc.want != "" && got != tc.want {
				t.Errorf("version %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// Two builds of one tree serialise on its lock; a waiter reports that it
// waits and gives up when its context ends.
func TestLockFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kernel", "build", "k.lock")
	unlock, err := lockFile(context.Background(), path, "kernel build", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	var log strings.Builder
	if _, err := lockFile(ctx, path, "kernel build", &log); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second lock: %v", err)
	}
	if !strings.Contains(log.String(), "waiting for another process's kernel build") {
		t.Errorf("waiter did not say so: %q", log.String())
	}
	unlock()
	unlock2, err := lockFile(context.Background(), path, "kernel build", nil)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock2()
}

func TestHint(t *testing.T) {
	for tail, want := range map[string]string{
		"/bin/sh: 1: flex: not found":                            "install flex",
		"fatal error: gelf.h: No such file":                      "libelf-dev",
		"error: source tree is not clean":                        "mrproper",
		"gcc: fatal error: Killed signal terminated program cc1": "lower -jobs",
		"something else":                                         "",
	} {
		if got := hint(tail); !strings.Contains(got, want) || (want == "" && got != "") {
			t.Errorf("hint(%q) = %q, want %q", tail, got, want)
		}
	}
}

func TestBuildRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	if _, err := Build(ctx, Options{CacheDir: filepath.Join(t.TempDir(), "with space")}); err == nil || !strings.Contains(err.Error(), "HOTPATH_CACHE") {
		t.Errorf("cache dir with a space: %v", err)
	}
	if _, err := Build(ctx, Options{CacheDir: t.TempDir(), Cmdline: "a\nb"}); err == nil || !strings.Contains(err.Error(), "one line") {
		t.Errorf("two-line cmdline: %v", err)
	}
	if _, err := Build(ctx, Options{CacheDir: t.TempDir(), Initramfs: "/nonexistent/initramfs.cpio"}); err == nil || !strings.Contains(err.Error(), "initramfs") {
		t.Errorf("missing initramfs: %v", err)
	}
}

// syncBuf is a strings.Builder safe for the progress goroutine.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestProgress(t *testing.T) {
	cache, dir := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(dir, "kernel", "sched"), 0o755)
	for _, f := range []string{"kernel/fork.o", "kernel/sched/core.o", "kernel/fork.c", "built-in.a"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	var log syncBuf
	o := Options{CacheDir: cache, Log: &log, ProgressEvery: 20 * time.Millisecond}
	stop := startProgress(context.Background(), o, dir, expectedObjects(o, dir, ""), time.Now())
	time.Sleep(100 * time.Millisecond)
	if n := stop(); n != 2 {
		t.Errorf("final count %d, want 2", n)
	}
	if !strings.Contains(log.String(), fmt.Sprintf("kernel: 2/~%d objects (0%%),", defaultObjectEstimate)) {
		t.Errorf("progress without an earlier build: %q", log.String())
	}
	// With the count of an earlier build of this tree, the estimate is exact.
	os.WriteFile(filepath.Join(dir, ".hotpath-objects"), []byte("4\n"), 0o644)
	log = syncBuf{}
	stop = startProgress(context.Background(), o, dir, expectedObjects(o, dir, ""), time.Now())
	time.Sleep(100 * time.Millisecond)
	stop()
	if !strings.Contains(log.String(), "kernel: 2/4 objects (50%),") {
		t.Errorf("progress with an earlier count: %q", log.String())
	}
}
