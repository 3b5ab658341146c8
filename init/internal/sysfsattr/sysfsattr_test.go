package sysfsattr

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteExistingAndReadInt(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "limit_min")
	if err := os.WriteFile(p, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteExisting(p, "1879048192"); err != nil {
		t.Fatal(err)
	}
	if v, err := ReadInt(p); err != nil || v != 1879048192 {
		t.Errorf("read back %d, %v", v, err)
	}
	// A missing attribute is not created.
	missing := filepath.Join(dir, "absent")
	if err := WriteExisting(missing, "1"); err == nil {
		t.Error("a missing attribute was written")
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("a missing attribute was created")
	}
	if err := os.WriteFile(p, []byte("max\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadInt(p); err == nil {
		t.Error("a non-number read as an integer")
	}
}
