package crng

import (
	"testing"
	"time"
)

// On a test machine the CRNG is ready long before the test runs: Ready and
// Wait must agree, and Wait must return at once.
func TestReadyAndWait(t *testing.T) {
	start := time.Now()
	if err := Wait(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Wait took %v on a seeded kernel", d)
	}
	if !Ready() {
		t.Error("Ready() = false after Wait returned")
	}
}

func TestNonblockingRead(t *testing.T) {
	seen := map[[4]byte]bool{}
	for range 64 {
		var b [4]byte
		n, err := NonblockingRead(b[:])
		if err != nil || n != 4 {
			t.Fatalf("NonblockingRead: %d, %v", n, err)
		}
		seen[b] = true
	}
	if len(seen) < 60 {
		t.Errorf("%d distinct values of 64 four-byte reads", len(seen))
	}
}
