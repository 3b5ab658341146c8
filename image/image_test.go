package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/hotpath-dev/hotpath/image/authenticode/authenticodetest"
	"github.com/hotpath-dev/hotpath/image/cpio"
	"github.com/hotpath-dev/hotpath/image/manifest"
	kernelconfig "github.com/hotpath-dev/hotpath/kernel-config"
)

// fixtures writes a module with two tiny programs standing in for the init
// and the workload: the builder's job is the same whatever they do.
func fixtures(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":           "module example.com/appliance\n\ngo 1.22\n",
		"init/main.go":     "package main\n\nfunc main() { println(\"init\") }\n",
		"workload/main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"ready\") }\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// standInInitramfs is where the stand-in kernel's initramfs starts: its
// section's file offset (authenticodetest.PE's headers are 512 bytes).
const standInInitramfs = 0x200

// standInKernel returns a KernelBuilder producing a minimal PE32+ header
// for the architecture asked (x86-64 or arm64) followed by the initramfs and the command line: enough for the
// builder's checks and for the tests to find the initramfs again. It is a
// stand-in for the unit tests only; TestRealKernel uses kernelconfig.Build.
func standInKernel(t *testing.T) KernelBuilder {
	dir := t.TempDir()
	return func(_ context.Context, o kernelconfig.Options) (*kernelconfig.Result, error) {
		initrd, err := os.ReadFile(o.Initramfs)
		if err != nil {
			return nil, err
		}
		// A whole PE32+ image (the secure stage measures its sections),
		// its one section the initramfs and the command line.
		cmdline := strings.TrimSpace("console=ttyS0 mitigations=off " + o.Cmdline)
		b := authenticodetest.PE(append(bytes.Clone(initrd), cmdline...), nil)
		machine := uint16(0x8664)
		if o.Arch == "arm64" {
			machine = 0xaa64
		}
		binary.LittleEndian.PutUint16(b[binary.LittleEndian.Uint32(b[0x3c:])+4:], machine)
		h := sha256.Sum256(b)
		p := filepath.Join(dir, hex.EncodeToString(h[:8])+".bzImage")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return nil, err
		}
		return &kernelconfig.Result{
			BzImage: p, Key: "stand-in-key", SourceID: "stand-in", Version: "0.0",
			ConfigSHA256: "stand-in-config", Compiler: "none", Cmdline: cmdline, Size: int64(len(b)),
		}, nil
	}
}

func options(t *testing.T, mod string, k KernelBuilder) Options {
	epoch := int64(1700000000)
	return Options{
		Out:             t.TempDir(),
		Root:            mod,
		Init:            Program{Package: "./init"},
		Workload:        Program{Package: "./workload"},
		InitConfig:      []byte("nic.rx_usecs=20\n"),
		Cmdline:         "hotpath.workload.port=8080",
		SourceDateEpoch: &epoch,
		Kernel:          k,
	}
}

func TestBuildLayoutAndManifest(t *testing.T) {
	mod := fixtures(t)
	var log bytes.Buffer
	o := options(t, mod, standInKernel(t))
	o.Log = &log
	r, err := Build(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Logf("%s\n%s", log.String(), r.Summary())

	// The disk: GPT, one ESP, BOOTX64.EFI is the kernel byte for byte.
	efi, err := os.ReadFile(r.BzImage)
	if err != nil {
		t.Fatal(err)
	}
	d, err := diskfs.Open(r.Disk, diskfs.WithOpenMode(diskfs.ReadOnly))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pt, err := d.GetPartitionTable()
	if err != nil {
		t.Fatal(err)
	}
	table := pt.(*gpt.Table)
	// amd64: the ESP first, and the BIOS boot partition (biosboot_test.go).
	if len(table.Partitions) != 2 || table.Partitions[0].Type != gpt.EFISystemPartition || table.Partitions[1].Type != gpt.BIOSBoot {
		t.Fatalf("partitions: %+v", table.Partitions)
	}
	fs, err := d.GetFilesystem(1)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fs.OpenFile("/EFI/BOOT/BOOTX64.EFI", os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f)
	if !bytes.Equal(got, efi) {
		t.Fatal("BOOTX64.EFI is not the kernel")
	}

	// The initramfs inside it lists exactly what the image needs.
	recs, err := cpio.Read(bytes.NewReader(efi[standInInitramfs:]))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, rec := range recs {
		names = append(names, rec.Name)
		if rec.UID != 0 || rec.GID != 0 || rec.MTime != 1700000000 {
			t.Errorf("%s: uid %d gid %d mtime %d", rec.Name, rec.UID, rec.GID, rec.MTime)
		}
	}
	want := "dev dev/console dev/null etc etc/hotpath etc/hotpath/init.conf init proc run sys tmp workload"
	if strings.Join(names, " ") != want {
		t.Errorf("initramfs: %s\nwant:      %s", strings.Join(names, " "), want)
	}

	// The manifest on disk is the one returned, and says what went in.
	m, err := manifest.ReadFile(r.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := m.Marshal()
	rb, _ := r.M.Marshal()
	if !bytes.Equal(mb, rb) {
		t.Error("manifest file differs from the result's")
	}
	checks := []struct {
		name string
		ok   bool
	}{
		{"disk sha256", m.Disk.SHA256 == r.DiskSHA256 && len(m.Disk.SHA256) == 64},
		{"disk size", m.Disk.Size == 1<<30},
		{"disk file", m.Disk.File == "hotpath.img"},
		{"disk guid", m.Disk.DiskGUID == table.GUID},
		{"esp guid", m.Disk.ESP.GUID == table.Partitions[0].GUID},
		{"esp type", m.Disk.ESP.TypeGUID == string(gpt.EFISystemPartition)},
		{"esp boot path", m.Disk.ESP.BootPath == "/EFI/BOOT/BOOTX64.EFI"},
		{"efi", m.EFI.SHA256 == sum(efi) && m.EFI.Size == int64(len(efi))},
		{"kernel cmdline", m.Kernel.Cmdline == "console=ttyS0 mitigations=off hotpath.workload.port=8080"},
		{"kernel identity", m.Kernel.SourceID == "stand-in" && m.Kernel.ConfigSHA256 == "stand-in-config" && m.Kernel.Compiler == "none"},
		{"init package", m.Init.Package == "example.com/appliance/init" && len(m.Init.SourceSHA256) == 64 && m.Init.Path == "/init"},
		{"workload package", m.Workload.Package == "example.com/appliance/workload" && m.Workload.SourceFiles == 1 && m.Workload.Path == "/workload"},
		{"binaries", len(m.Init.SHA256) == 64 && m.Init.Size > 0 && len(m.Workload.SHA256) == 64},
		{"go", strings.HasPrefix(m.Go.Version, "go1.") && m.Go.Compiler == "gc" && strings.Contains(m.Go.Flags, "-trimpath")},
		{"config text", m.InitConfig.Text == "nic.rx_usecs=20\n" && m.InitConfig.SHA256 == sum([]byte("nic.rx_usecs=20\n"))},
		{"config effective", m.InitConfig.Effective["nic.rx_usecs"] == "20" && m.InitConfig.Effective["workload.port"] == "8080"},
		{"initramfs", m.Initramfs.SHA256 == sum(efi[standInInitramfs:standInInitramfs+m.Initramfs.Size]) && len(m.Initramfs.Entries) == 12},
		{"epoch", m.SourceDateEpoch == 1700000000},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("manifest: %s wrong", c.name)
		}
	}
	if bytes.Contains(mb, []byte(mod)) || bytes.Contains(mb, []byte(o.Out)) {
		t.Error("manifest contains a build-machine path")
	}
	if r.DiskAlloc > r.EFISize+4<<20 {
		t.Errorf("disk allocates %d bytes for a %d-byte EFI binary", r.DiskAlloc, r.EFISize)
	}
}

func TestBuildReproducible(t *testing.T) {
	mod := fixtures(t)
	k := standInKernel(t)
	build := func(conf string) (*Result, []byte) {
		t.Helper()
		o := options(t, mod, k)
		o.InitConfig = []byte(conf)
		r, err := Build(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		mb, err := os.ReadFile(r.Manifest)
		if err != nil {
			t.Fatal(err)
		}
		return r, mb
	}
	a, am := build("nic.rx_usecs=20\n")
	b, bm := build("nic.rx_usecs=20\n")
	if a.DiskSHA256 != b.DiskSHA256 || !bytes.Equal(am, bm) {
		t.Fatalf("same inputs: disks %s %s, manifests equal: %v", a.DiskSHA256, b.DiskSHA256, bytes.Equal(am, bm))
	}
	c, _ := build("nic.rx_usecs=21\n") // one byte of configuration
	if c.DiskSHA256 == a.DiskSHA256 {
		t.Fatal("a configuration change did not change the disk")
	}
}

func TestBuildRefuses(t *testing.T) {
	mod := fixtures(t)
	arm := filepath.Join(t.TempDir(), "arm64")
	cmd := exec.Command("go", "build", "-o", arm, "./workload")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"dynamic workload", func(o *Options) { o.Workload = Program{Binary: "/bin/true"} }, "workload: /bin/true: not a static linux/amd64 executable: it is dynamically linked"},
		{"arm64 workload", func(o *Options) { o.Workload = Program{Binary: arm} }, "it is for EM_AARCH64"},
		{"unknown config key", func(o *Options) { o.InitConfig = []byte("nic.rx_usec=20\nbogus=1\n") }, "unknown keys: nic.rx_usec, bogus"},
		{"bad config value", func(o *Options) { o.InitConfig = []byte("nic.gro=maybe\n") }, "nic.gro"},
		{"unknown cmdline key", func(o *Options) { o.Cmdline = "hotpath.nope=1" }, "unknown keys: nope"},
		{"moved workload", func(o *Options) { o.InitConfig = []byte("workload.path=/bin/server\n") }, "installs the workload at /workload"},
		{"not a kernel", func(o *Options) {
			o.Kernel = func(context.Context, kernelconfig.Options) (*kernelconfig.Result, error) {
				return &kernelconfig.Result{BzImage: "/bin/true"}, nil
			}
		}, "no MZ header"},
		{"bad epoch", func(o *Options) { e := int64(-1); o.SourceDateEpoch = &e }, "SOURCE_DATE_EPOCH -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options(t, mod, standInKernel(t))
			tc.edit(&o)
			_, err := Build(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(o.Out, DiskFile)); err == nil {
				t.Error("a refused build left a disk behind")
			}
		})
	}
}

// TestBuildRefusesMitigationParams: every listed mitigation parameter in
// -cmdline stops the build before anything is built, with an error that
// names the word and the policy.
func TestBuildRefusesMitigationParams(t *testing.T) {
	mod := fixtures(t)
	for _, name := range kernelconfig.RefusedParams {
		word := name + "=on"
		o := options(t, mod, standInKernel(t))
		o.Cmdline = "hotpath.workload.port=8080 " + word
		_, err := Build(context.Background(), o)
		if err == nil || !strings.Contains(err.Error(), word+" would override the policy's mitigations=off") {
			t.Errorf("-cmdline %q: err = %v", o.Cmdline, err)
		}
		if _, err := os.Stat(filepath.Join(o.Out, DiskFile)); err == nil {
			t.Errorf("-cmdline %q: a refused build left a disk behind", o.Cmdline)
		}
	}
}

func TestPrebuiltWorkload(t *testing.T) {
	mod := fixtures(t)
	bin := filepath.Join(t.TempDir(), "my-server")
	cmd := exec.Command("go", "build", "-o", bin, "./workload")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	o := options(t, mod, standInKernel(t))
	o.Workload = Program{Binary: bin}
	r, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(bin)
	if w := r.M.Workload; w.Binary != "my-server" || w.Package != "" || w.SHA256 != sum(b) {
		t.Errorf("workload in manifest: %+v", w)
	}
}

func TestFindRoot(t *testing.T) {
	wd, _ := os.Getwd()
	root, err := FindRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "image", "image.go")); err != nil {
		t.Errorf("root %s: %v", root, err)
	}
	if _, err := FindRoot(t.TempDir()); err == nil {
		t.Error("found a root in an empty directory")
	}
}
