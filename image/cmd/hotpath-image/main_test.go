package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/image/machine"
	"github.com/hotpath-dev/hotpath/image/manifest"
)

func TestQemuArgs(t *testing.T) {
	args := strings.Join(qemuArgs(vm{
		Machine: machine.AMD64,
		Disk:    "/d.img", OVMFCode: "/code.fd", OVMFVars: "/tmp/vars.fd", QMP: "/tmp/q.sock",
		Accel: "tcg", CPUs: 2, MemoryMiB: 1024, HostAddr: "127.0.0.1", HostPort: 8080, GuestPort: 8081,
	}), " ")
	for _, want := range []string{
		"-accel tcg",
		"-drive if=pflash,format=raw,unit=0,readonly=on,file=/code.fd",
		"-drive if=pflash,format=raw,unit=1,file=/tmp/vars.fd",
		"format=raw,readonly=on,file=/d.img",
		"hostfwd=tcp:127.0.0.1:8080-:8081",
		"-device virtio-net-pci,netdev=net0",
		"-serial mon:stdio",
		"-qmp unix:/tmp/q.sock,server=on,wait=off",
		"-smp 2 -m 1024",
		"-machine q35",
		"-cpu max",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("qemu args lack %q:\n%s", want, args)
		}
	}
	arm := strings.Join(qemuArgs(vm{Machine: machine.ARM64, Disk: "/d.img", Accel: "tcg", CPUs: 2, MemoryMiB: 1024}), " ")
	for _, want := range []string{"-machine virt,gic-version=3", "-cpu neoverse-n1", "-accel tcg", "-serial mon:stdio", "-device virtio-rng-pci"} {
		if !strings.Contains(arm, want) {
			t.Errorf("arm64 qemu args lack %q:\n%s", want, arm)
		}
	}
}

// run boots a disk the way its manifest says; -arch overrides, and an
// arm64 guest is never started under KVM.
func TestRunArch(t *testing.T) {
	dir := t.TempDir()
	disk := filepath.Join(dir, "hotpath.img")
	os.WriteFile(disk, nil, 0o644)
	if got := diskArch(disk); got != "amd64" {
		t.Errorf("no manifest: %q, want amd64", got)
	}
	m := &manifest.Manifest{Format: manifest.Format, Architecture: "arm64"}
	if err := m.WriteFile(filepath.Join(dir, "manifest.json")); err != nil {
		t.Fatal(err)
	}
	if got := diskArch(disk); got != "arm64" {
		t.Errorf("arm64 manifest: %q", got)
	}
	var stderr bytes.Buffer
	err := run([]string{"-disk", disk, "-accel", "kvm"}, io.Discard, &stderr)
	if err == nil || !strings.Contains(err.Error(), "an arm64 guest cannot run under KVM") {
		t.Errorf("arm64 disk under KVM: %v", err)
	}
	err = run([]string{"-disk", disk, "-arch", "sparc"}, io.Discard, &stderr)
	if err == nil || !strings.Contains(err.Error(), `architecture "sparc"`) {
		t.Errorf("-arch sparc: %v", err)
	}
}

// TestPowerdown drives a real QEMU (no guest needed) through the QMP
// client: greeting, capability negotiation and system_powerdown must all be
// answered without error.
func TestPowerdown(t *testing.T) {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		if testing.Short() {
			t.Skip("qemu-system-x86_64 not installed; skipped in -short mode")
		}
		t.Fatal("qemu-system-x86_64 not installed (image/deps.sh test)")
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "qmp.sock")
	var out bytes.Buffer
	cmd := exec.Command(qemu, "-machine", "q35", "-accel", "tcg", "-nodefaults", "-display", "none",
		"-S", "-qmp", "unix:"+sock+",server=on,wait=off", "-D", filepath.Join(dir, "qemu.log"), "-d", "guest_errors")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no QMP socket:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := powerdown(sock); err != nil {
		t.Fatal(err)
	}
	// stop with a socket that is not there: a clear error.
	if err := stopCmd([]string{"-qmp", filepath.Join(dir, "nope")}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "qmp") {
		t.Errorf("stop on a missing socket: %v", err)
	}
}

func TestProgramFlag(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "server")
	os.WriteFile(bin, []byte("x"), 0o755)
	p, err := program(bin, "")
	if err != nil || p.Binary != bin || p.Package != "" {
		t.Errorf("file: %+v %v", p, err)
	}
	p, err = program("./cmd/server", dir)
	if err != nil || p.Package != "./cmd/server" || p.Dir != dir {
		t.Errorf("package: %+v %v", p, err)
	}
	p, _ = program("", "")
	if p.Package != "" || p.Binary != "" {
		t.Errorf("default: %+v", p)
	}
}

func TestHelp(t *testing.T) {
	var stderr bytes.Buffer
	err := build(t.Context(), []string{"-h"}, &bytes.Buffer{}, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("build -h: %v", err)
	}
	for _, want := range []string{"-workload", "-config", "-cmdline", "-out", "SOURCE_DATE_EPOCH"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("build -h does not document %s", want)
		}
	}
	stderr.Reset()
	if err := run([]string{"-h"}, &bytes.Buffer{}, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("run -h: %v", err)
	}
	for _, want := range []string{"Ctrl-A X", "system_powerdown", "-disk", "-port"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("run -h does not document %s", want)
		}
	}
	if err := run([]string{"-disk", filepath.Join(t.TempDir(), "none.img")}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "make image") {
		t.Errorf("run without a disk: %v", err)
	}
}
