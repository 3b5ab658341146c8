package kernelconfig

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// DefaultSource is Debian's linux-source-6.12 package tarball (the newer
// LTS, from Debian 12's security archive), which the project's dependency
// script (image/deps.sh build) installs. 6.12 is the default because its
// epoll takes per-instance busy-poll parameters (EPIOCSPARAMS, Linux 6.9:
// prefer_busy_poll, which 6.1's ep_busy_loop hard-codes to false) and its
// ENA driver and TCP fast path are newer.
const DefaultSource = "/usr/src/linux-source-6.12.tar.xz"

// Linux61Source is Debian's linux-source-6.1 tarball: the previous default,
// still buildable with -source and still held to the same policy (its
// configuration tests run in `make test`; image/deps.sh test installs it).
const Linux61Source = "/usr/src/linux-source-6.1.tar.xz"

// Source is a resolved Linux source tree.
type Source struct {
	Tree    string // directory used as the kbuild source tree (never written to)
	ID      string // identity for the cache key: "tarball sha256:..." or "tree sha256:..."
	Version string // e.g. "6.12.117", from the top-level Makefile
}

// ResolveSource finds the Linux source named by spec (a tarball or a source
// tree; "" means DefaultSource). A tarball is extracted once into
// cacheDir/kernel/src/<sha256 prefix> and reused; a tree is used in place
// and only read (builds go to a separate O= directory).
func ResolveSource(ctx context.Context, spec, cacheDir string, log io.Writer) (*Source, error) {
	if spec == "" {
		spec = DefaultSource
	}
	if log == nil {
		log = io.Discard
	}
	st, err := os.Stat(spec)
	if errors.Is(err, fs.ErrNotExist) && spec == DefaultSource {
		return nil, fmt.Errorf("kernel source %s not found: install it with `apt-get install linux-source-6.12` "+
			"(or `image/deps.sh build`), or name a tree or tarball with -source", spec)
	}
	if err != nil {
		return nil, fmt.Errorf("kernel source: %w", err)
	}
	var src *Source
	if st.IsDir() {
		src, err = treeSource(spec, cacheDir)
	} else {
		src, err = tarballSource(ctx, spec, cacheDir, log)
	}
	if err != nil {
		return nil, err
	}
	v, err := kernelVersion(filepath.Join(src.Tree, "Makefile"))
	if err != nil {
		return nil, fmt.Errorf("kernel source %s: not a Linux tree: %w", spec, err)
	}
	src.Version = v
	return src, nil
}

func tarballSource(ctx context.Context, tarball, cacheDir string, log io.Writer) (*Source, error) {
	sum, err := fileSHA256(tarball)
	if err != nil {
		return nil, fmt.Errorf("kernel source: %w", err)
	}
	dir := filepath.Join(cacheDir, "kernel", "src", sum[:16])
	marker := filepath.Join(dir, ".hotpath-extracted")
	if _, err := os.Stat(marker); err == nil {
		return &Source{Tree: dir, ID: "tarball sha256:" + sum}, nil
	}
	unlock, err := lockFile(ctx, dir+".lock", "source extraction", log)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if _, err := os.Stat(marker); err == nil { // extracted while we waited
		return &Source{Tree: dir, ID: "tarball sha256:" + sum}, nil
	}
	fmt.Fprintf(log, "kernel: extracting %s into %s (once per tarball)\n", tarball, dir)
	if _, err := exec.LookPath("tar"); err != nil {
		return nil, fmt.Errorf("extracting %s: tar not found: install tar and xz-utils", tarball)
	}
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	os.RemoveAll(dir) // a partial extraction without the marker
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	// tar, not archive/tar: it streams xz at full speed and keeps modes.
	// GNU tar picks the decompressor from the file's contents.
	cmd := exec.CommandContext(ctx, "tar", "-xf", tarball, "--strip-components=1", "--no-same-owner", "-C", tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("extracting %s: %w\n%s(for .xz tarballs install xz-utils)", tarball, err, out)
	}
	if _, err := os.Stat(filepath.Join(tmp, "Makefile")); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("%s: expected one top-level directory holding a Linux tree (Makefile missing)", tarball)
	}
	if err := os.WriteFile(filepath.Join(tmp, ".hotpath-extracted"), []byte(tarball+"\n"+sum+"\n"), 0o644); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	return &Source{Tree: dir, ID: "tarball sha256:" + sum}, nil
}

// treeSource identifies a user's tree by the content of its files (see
// hashTree): the same sources give the same kernel cache key wherever and
// whenever they were copied, and any edit changes it, even one whose
// modification time was set back. Per-file hashes are cached under
// cacheDir, so only changed files are read again. The tree must be clean,
// because kbuild refuses O= builds next to an in-tree configuration.
func treeSource(tree, cacheDir string) (*Source, error) {
	tree, err := filepath.Abs(tree)
	if err != nil {
		return nil, err
	}
	for _, f := range []string{".config", "include/config"} {
		if _, err := os.Stat(filepath.Join(tree, f)); err == nil {
			return nil, fmt.Errorf("kernel source %s is not clean (it has %s): run `make mrproper` in it, "+
				"or pass a clean tree or a tarball; hotpath builds in its own directory and never writes into your tree", tree, f)
		}
	}
	cacheFile := ""
	if cacheDir != "" {
		cacheFile = filepath.Join(cacheDir, "kernel", "tree-hash", shortHash(tree)+".json")
	}
	sum, err := hashTree(tree, cacheFile)
	if err != nil {
		return nil, fmt.Errorf("kernel source %s: %w", tree, err)
	}
	return &Source{Tree: tree, ID: "tree sha256:" + sum}, nil
}

func kernelVersion(makefile string) (string, error) {
	f, err := os.Open(makefile)
	if err != nil {
		return "", err
	}
	defer f.Close()
	v := map[string]string{}
	sc := bufio.NewScanner(f)
	for i := 0; sc.Scan() && i < 20; i++ {
		k, val, ok := strings.Cut(sc.Text(), "=")
		if ok {
			v[strings.TrimSpace(k)] = strings.TrimSpace(val)
		}
	}
	if v["VERSION"] == "" || v["PATCHLEVEL"] == "" {
		return "", fmt.Errorf("%s has no VERSION/PATCHLEVEL", makefile)
	}
	s := v["VERSION"] + "." + v["PATCHLEVEL"]
	if v["SUBLEVEL"] != "" {
		s += "." + v["SUBLEVEL"]
	}
	return s + v["EXTRAVERSION"], nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
