package kernelconfig

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHashTreeCache: resolving a tree keeps each file's hash and stat in
// the cache (under the cache directory, written whole through a rename);
// a file whose stat matches its entry is not read again, its cached hash
// counts; a cache that cannot be written costs only the cache.
func TestHashTreeCache(t *testing.T) {
	tree, cacheDir := t.TempDir(), t.TempDir()
	for name, body := range map[string]string{"Makefile": fakeMakefile, "a.c": "int a;\n"} {
		if err := os.WriteFile(filepath.Join(tree, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fresh, err := hashTree(tree, "")
	if err != nil {
		t.Fatal(err)
	}
	src, err := ResolveSource(context.Background(), tree, cacheDir, nil)
	if err != nil || src.ID != "tree sha256:"+fresh {
		t.Fatalf("resolved %+v, %v; want the tree's hash %s", src, err, fresh)
	}
	cacheFile := filepath.Join(cacheDir, "kernel", "tree-hash", shortHash(tree)+".json")
	entries := map[string]treeStat{}
	if b, err := os.ReadFile(cacheFile); err != nil || json.Unmarshal(b, &entries) != nil {
		t.Fatalf("cache %s: %v", cacheFile, err)
	}
	if len(entries) != 2 || entries["a.c"].Hash != sha256Hex([]byte("int a;\n")) {
		t.Errorf("cache entries %+v", entries)
	}
	noTemp := func() {
		t.Helper()
		tmps, _ := filepath.Glob(filepath.Join(filepath.Dir(cacheFile), "*.tmp"))
		if len(tmps) != 0 {
			t.Errorf("temporary files left: %v", tmps)
		}
	}
	noTemp()

	// A file whose stat matches: its entry's hash is taken as it is.
	e := entries["a.c"]
	e.Hash = strings.Repeat("0", 64)
	entries["a.c"] = e
	b, _ := json.Marshal(entries)
	if err := os.WriteFile(cacheFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := hashTree(tree, cacheFile); err != nil || got == fresh {
		t.Errorf("hash %s, %v: the cached entry was not used", got, err)
	}

	// A directory where the cache should go: the hash is right, no cache.
	if err := os.Remove(cacheFile); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(cacheFile, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := hashTree(tree, cacheFile); err != nil || got != fresh {
		t.Errorf("hash %s, %v; want %s", got, err, fresh)
	}
	noTemp()
}
