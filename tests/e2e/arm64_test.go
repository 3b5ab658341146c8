package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/image"
	"github.com/hotpath-dev/hotpath/image/machine"
	kernelconfig "github.com/hotpath-dev/hotpath/kernel-config"
	"github.com/hotpath-dev/hotpath/tests/vm"
)

// The arm64 boot runs apart from the x86 ones, with its own flag: it needs
// a second kernel (cross-built, cold on a fresh machine) and the arm64
// packages. `make test-arm64`, the last step of `make test`, sets it.
var arm64Boot = flag.Bool("e2e.arm64", false, "build and boot the arm64 (Graviton) image under QEMU virt (make test-arm64)")

// arm64BootTimeout bounds one arm64 boot under TCG: AAVMF alone takes
// about a minute to its boot manager on a loaded 2-core machine.
const arm64BootTimeout = 15 * time.Minute

func requireArm64(t *testing.T) {
	t.Helper()
	if !*arm64Boot {
		t.Skip("the arm64 image boots with -e2e.arm64 (make test-arm64)")
	}
	requireE2E(t)
	m := machine.ARM64
	for _, f := range []string{m.Code, m.Vars} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%v: install the arm64 dependencies (image/deps.sh %s)", err, m.DepsGroup)
		}
	}
	for _, cmd := range []string{m.QEMU, kernelconfig.ARM64.CrossCompile + "gcc"} {
		if _, err := exec.LookPath(cmd); err != nil {
			t.Fatalf("%v: install the arm64 dependencies (image/deps.sh build %s)", err, m.DepsGroup)
		}
	}
}

// TestArm64Appliance builds the default image for arm64 (cross-built
// kernel, GOARCH=arm64 programs, BOOTAA64.EFI), checks that a second build
// of the same inputs, with the kernel's make run again, is byte-identical,
// then boots it with each -e2e.cpus count through AAVMF on QEMU virt
// (GICv3, Neoverse-N1, a multi-queue virtio-net on a tap) and runs the x86
// image's checks: the
// boot report, HTTP byte-exactness, the kernel policy, the NIC tuning, and
// the power button (ACPI GED on virt, as on Graviton).
func TestArm64Appliance(t *testing.T) {
	requireArm64(t)
	epoch := int64(0)
	a := buildWith(t, image.Options{Arch: "arm64", SourceDateEpoch: &epoch})
	b := buildWith(t, image.Options{Arch: "arm64", SourceDateEpoch: &epoch,
		Kernel: func(ctx context.Context, o kernelconfig.Options) (*kernelconfig.Result, error) {
			o.Rebuild = true
			return kernelconfig.Build(ctx, o)
		}})
	t.Run("reproducible", func(t *testing.T) {
		if a.M.Architecture != "arm64" || a.M.Disk.ESP.BootPath != "/EFI/BOOT/BOOTAA64.EFI" {
			t.Errorf("manifest: architecture %q, boot path %q", a.M.Architecture, a.M.Disk.ESP.BootPath)
		}
		if a.DiskSHA256 != b.DiskSHA256 || a.EFISHA256 != b.EFISHA256 {
			t.Errorf("same inputs, different images: disk %s vs %s, EFI %s vs %s", a.DiskSHA256, b.DiskSHA256, a.EFISHA256, b.EFISHA256)
		}
		am, err := os.ReadFile(a.Manifest)
		if err != nil {
			t.Fatal(err)
		}
		bm, err := os.ReadFile(b.Manifest)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(am, bm) {
			t.Errorf("same inputs, different manifests:\n%s\n%s", am, bm)
		}
	})
	for _, cpus := range cpuCountList(t) {
		t.Run(fmt.Sprintf("%dvcpu", cpus), func(t *testing.T) {
			checkAppliance(t, bootConfig(t, vm.Config{Disk: a.Disk, CPUs: cpus, Arch: "arm64", Accel: "tcg"}, arm64BootTimeout))
		})
	}
}
