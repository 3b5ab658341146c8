package image

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"
)

// TestRealKernelReproducible builds the real appliance (hotpath's init, the
// default workload, the kernel from kernel-config through its cache) twice
// from the same inputs and once with one byte of configuration changed.
// The first build compiles the kernel when the cache is cold (~30 min on 2
// cores; `make test` builds the kernel before the tests); later ones only
// relink it with the new initramfs. -short skips it.
func TestRealKernelReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the builds with the real kernel")
	}
	ctx := context.Background()
	epoch := int64(0)
	build := func(conf string) (*Result, []byte) {
		t.Helper()
		var log bytes.Buffer
		start := time.Now()
		r, err := Build(ctx, Options{
			Out:             t.TempDir(),
			InitConfig:      []byte(conf),
			SourceDateEpoch: &epoch,
			Log:             &log,
		})
		if err != nil {
			t.Fatalf("%v\n%s", err, log.String())
		}
		m, err := os.ReadFile(r.Manifest)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("build in %s (kernel cached: %v): EFI %d bytes, disk %d virtual / %d allocated, sha256 %s",
			time.Since(start).Round(100*time.Millisecond), r.KernelCached, r.EFISize, r.DiskSize, r.DiskAlloc, r.DiskSHA256)
		return r, m
	}
	conf := DefaultInitConfig + "nic.rx_usecs=20\n"
	a, am := build(conf)
	b, bm := build(conf)
	if a.DiskSHA256 != b.DiskSHA256 || a.EFISHA256 != b.EFISHA256 {
		t.Errorf("same inputs, different images: disk %s vs %s, EFI %s vs %s", a.DiskSHA256, b.DiskSHA256, a.EFISHA256, b.EFISHA256)
	}
	if !bytes.Equal(am, bm) {
		t.Errorf("same inputs, different manifests:\n%s\n%s", am, bm)
	}
	c, _ := build(DefaultInitConfig + "nic.rx_usecs=21\n")
	if c.DiskSHA256 == a.DiskSHA256 {
		t.Error("one byte of configuration changed, the disk did not")
	}
	if a.EFISize > 16<<20 {
		t.Errorf("EFI binary is %d bytes, above the 16 MiB target", a.EFISize)
	}
	if a.M.Kernel.SourceID == "" || a.M.Kernel.ConfigSHA256 == "" || a.M.Kernel.Compiler == "" {
		t.Errorf("kernel identity missing from the manifest: %+v", a.M.Kernel)
	}
}
