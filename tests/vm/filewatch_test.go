package vm

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// watchFile sees this process open a file twice, read into it, and close
// it, and times the span from the first open to the last close relative
// to the test's own clock.
func TestWatchFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BOOTX64.EFI")
	if err := os.WriteFile(path, make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan FileReads)
	go func() { got <- watchFile(ctx, os.Getpid(), path, nil, 2*time.Millisecond) }()
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	for _, off := range []int64{4096, 40000} {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Seek(off, 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		f.Close()
		time.Sleep(30 * time.Millisecond)
	}
	end := time.Now()
	time.Sleep(20 * time.Millisecond)
	cancel()
	r := <-got
	if r.Opens != 2 || r.MaxPos != 40000 {
		t.Errorf("saw %d opens, max offset %d; want 2 and 40000", r.Opens, r.MaxPos)
	}
	if r.First.Before(start) || r.Last.After(end) || r.Last.Sub(r.First) < 100*time.Millisecond {
		t.Errorf("open from %v to %v after the start, the reads spanned %v", r.First.Sub(start), r.Last.Sub(start), end.Sub(start))
	}
	if r := watchFile(ctx, os.Getpid(), path+".none", nil, time.Millisecond); r.Opens != 0 || !r.First.IsZero() {
		t.Errorf("a file never opened: %+v", r)
	}
}
