package kernelconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
)

// treeStat is what says a file is unchanged since it was last hashed:
// ctime and the inode cannot be set back by a user (touch -r can restore
// an mtime after an edit, not a ctime), so a file whose stat matches keeps
// its cached hash; anything else is read again.
type treeStat struct {
	Size  int64  `json:"s"`
	MTime int64  `json:"m"`
	CTime int64  `json:"c"`
	Ino   uint64 `json:"i"`
	Dev   uint64 `json:"d"`
	Mode  uint32 `json:"o"`
	Hash  string `json:"h"`
}

// hashTree identifies a source tree by content: sha256 over the sorted
// (path, type and permission bits, sha256 of the content or the symlink
// target) of every file outside .git. Modification times do not enter it:
// a copy, a checkout or a `touch` of the same content is the same tree. The
// per-file hashes are kept in cacheFile (if not empty) with each file's
// stat, so a rebuild reads only what changed.
func hashTree(tree, cacheFile string) (string, error) {
	old := map[string]treeStat{}
	if cacheFile != "" {
		if b, err := os.ReadFile(cacheFile); err == nil {
			json.Unmarshal(b, &old) // a damaged cache only costs a re-read
		}
	}
	now := map[string]treeStat{}
	var lines []string
	err := filepath.WalkDir(tree, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(tree, path)
		st := treeStat{Size: info.Size(), MTime: info.ModTime().UnixNano(), Mode: uint32(info.Mode())}
		if sys, ok := info.Sys().(*syscall.Stat_t); ok {
			st.CTime = sys.Ctim.Nano()
			st.Ino, st.Dev = sys.Ino, uint64(sys.Dev)
		}
		if c, ok := old[rel]; ok && c.Hash != "" {
			h := c.Hash
			c.Hash = ""
			if c == st {
				st.Hash = h
			}
		}
		if st.Hash == "" {
			if st.Hash, err = hashEntry(path, info.Mode()); err != nil {
				return err
			}
		}
		now[rel] = st
		// Only the type and the permission bits: the owner's umask at
		// extraction time is not the source.
		lines = append(lines, fmt.Sprintf("%s\x00%o\x00%s", rel, uint32(info.Mode().Type())|uint32(info.Mode().Perm()&0o111), st.Hash))
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(lines)
	h := sha256.New()
	for _, l := range lines {
		io.WriteString(h, l+"\n")
	}
	if cacheFile != "" {
		if b, err := json.Marshal(now); err == nil {
			// Through a rename: a concurrent build reads the old cache or
			// the new one, never half of one.
			tmp := fmt.Sprintf("%s.%d.tmp", cacheFile, os.Getpid())
			if err := os.MkdirAll(filepath.Dir(cacheFile), 0o755); err == nil && os.WriteFile(tmp, b, 0o644) == nil {
				if os.Rename(tmp, cacheFile) != nil {
					os.Remove(tmp)
				}
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashEntry(path string, mode fs.FileMode) (string, error) {
	h := sha256.New()
	if mode&fs.ModeSymlink != 0 {
		target, err := os.Readlink(path)
		if err != nil {
			return "", err
		}
		io.WriteString(h, target)
	} else {
		f, err := os.Open(path)
		if err != nil {
			return "", err
		}
		defer f.Close()
		if _, err := io.Copy(h, f); err != nil {
			return "", fmt.Errorf("hash %s: %w", path, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
