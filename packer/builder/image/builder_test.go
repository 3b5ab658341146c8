package image

import (
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

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hotpath-dev/hotpath/image/authenticode/authenticodetest"
	"github.com/hotpath-dev/hotpath/image/manifest"
	kernelconfig "github.com/hotpath-dev/hotpath/kernel-config"
	"github.com/hotpath-dev/hotpath/packer/internal/uitest"
)

// fixture writes a small module standing in for the hotpath tree: an init
// and a workload that the image package builds statically. The builder's
// job does not depend on what they do.
func fixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":                          "module example.com/appliance\n\ngo 1.22\n",
		"init/main.go":                    "package main\n\nfunc main() { println(\"init\") }\n",
		"server/cmd/hotpath-json/main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"ready\") }\n",
		"other/main.go":                   "package main\n\nfunc main() {}\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// standInKernel writes a minimal PE32+ image for the build's
// architecture (x86-64 or arm64) whose one section is the initramfs and
// command line, so Run can be tested without a 30-minute kernel build; the real
// kernel runs in the plugin test.
func standInKernel(t *testing.T) func(context.Context, kernelconfig.Options) (*kernelconfig.Result, error) {
	dir := t.TempDir()
	return func(_ context.Context, o kernelconfig.Options) (*kernelconfig.Result, error) {
		initrd, err := os.ReadFile(o.Initramfs)
		if err != nil {
			return nil, err
		}
		// A whole PE32+ image (the image's secure stage measures its
		// sections), its one section the initramfs and the command line.
		cmdline := strings.TrimSpace("console=ttyS0 mitigations=off " + o.Cmdline)
		b := authenticodetest.PE(append(initrd, cmdline...), nil)
		machine := uint16(0x8664)
		if o.Arch == "arm64" {
			machine = 0xaa64
		}
		binary.LittleEndian.PutUint16(b[binary.LittleEndian.Uint32(b[0x3c:])+4:], machine)
		p := filepath.Join(dir, "bzImage")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return nil, err
		}
		return &kernelconfig.Result{BzImage: p, Key: "stand-in", SourceID: "stand-in", Version: "0.0",
			ConfigSHA256: "stand-in", Compiler: "none", Cmdline: cmdline, Size: int64(len(b))}, nil
	}
}

func TestPrepareDefaults(t *testing.T) {
	root := fixture(t)
	t.Chdir(t.TempDir())
	var b Builder
	vars, _, err := b.Prepare(map[string]interface{}{"hotpath_root": root}, map[string]string{"packer_build_name": "app"})
	if err != nil {
		t.Fatal(err)
	}
	if b.config.OutputDir != "output-app" {
		t.Errorf("output_directory %q, want output-app", b.config.OutputDir)
	}
	if strings.Join(vars, ",") != "DiskImage,Manifest,DiskSHA256,Architecture" {
		t.Errorf("generated vars %v", vars)
	}
	if b.config.Architecture != "amd64" {
		t.Errorf("architecture %q, want amd64", b.config.Architecture)
	}
	if text, _ := b.config.initConf(); text != "" {
		t.Errorf("init.conf %q, want none (the image package's default)", text)
	}
}

func TestPrepareInitConfig(t *testing.T) {
	root := fixture(t)
	conf := filepath.Join(t.TempDir(), "init.conf")
	os.WriteFile(conf, []byte("# tuned\nnic.rx_usecs=20"), 0o644)
	var c Config
	_, err := c.Prepare(map[string]interface{}{
		"hotpath_root": root, "output_directory": filepath.Join(t.TempDir(), "out"),
		"init_config_file": conf, "init_config": map[string]string{"nic.rx_usecs": "40"},
	})
	if err != nil {
		t.Fatal(err)
	}
	text, _ := c.initConf()
	if text != "# tuned\nnic.rx_usecs=20\nnic.rx_usecs=40\n" {
		t.Errorf("init.conf %q", text)
	}
}

func TestPrepareErrors(t *testing.T) {
	root := fixture(t)
	existing := t.TempDir()
	file := filepath.Join(existing, "f")
	os.WriteFile(file, nil, 0o644)
	badConf := filepath.Join(existing, "bad.conf")
	os.WriteFile(badConf, []byte("no.such.key=1\n"), 0o644)
	base := func(kv ...interface{}) map[string]interface{} {
		m := map[string]interface{}{"hotpath_root": root, "output_directory": filepath.Join(t.TempDir(), "out")}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name string
		raw  map[string]interface{}
		want string
	}{
		{"output exists", base("output_directory", existing), "exists; delete it or run packer build -force"},
		{"root not a module", base("hotpath_root", existing), "is not a Go module"},
		{"both workloads", base("workload", "./x", "workload_binary", file), "workload and workload_binary are exclusive"},
		{"workload_dir alone", base("workload_dir", existing), "workload_dir needs workload"},
		{"workload_dir missing", base("workload", "./x", "workload_dir", "/nonexistent"), "workload_dir /nonexistent is not a directory"},
		{"binary missing", base("workload_binary", "/nonexistent/bin"), "workload_binary"},
		{"binary is a dir", base("workload_binary", existing), "is not a file"},
		{"kernel source missing", base("kernel_source", "/nonexistent/linux"), "kernel_source"},
		{"negative jobs", base("jobs", -1), "jobs must not be negative"},
		{"bad epoch", base("source_date_epoch", -5), "source_date_epoch -5"},
		{"multi-line cmdline", base("kernel_cmdline", "a\nb"), "kernel_cmdline must be one line"},
		{"missing init.conf", base("init_config_file", "/nonexistent.conf"), "init_config_file"},
		{"unknown init key", base("init_config_file", badConf), "no.such.key"},
		{"unknown init_config key", base("init_config", map[string]string{"bogus": "1"}), "bogus"},
		{"bad init_config key", base("init_config", map[string]string{"a=b": "1"}), "must be one key=value line"},
		{"unknown cmdline key", base("kernel_cmdline", "quiet hotpath.bogus=1"), "bogus"},
		{"bad cmdline value", base("kernel_cmdline", "hotpath.workload.port=http"), "workload.port"},
		{"init_binary missing", base("init_binary", "/nonexistent/init"), "init_binary"},
		{"EC2's name", base("architecture", "x86_64"), `architecture "x86_64" is not supported: hotpath builds amd64 or arm64 images`},
		{"kbuild's name", base("architecture", "aarch64"), `architecture "aarch64" is not supported`},
		{"no such architecture", base("architecture", "riscv64"), `architecture "riscv64" is not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			_, err := c.Prepare(tc.raw)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}

	// All problems at once.
	var c Config
	_, err := c.Prepare(base("jobs", -1, "kernel_source", "/nonexistent", "workload_dir", existing))
	if me, ok := err.(*packersdk.MultiError); !ok || len(me.Errors) != 3 {
		t.Errorf("want 3 errors in a packer.MultiError, got %T %v", err, err)
	}
}

// Run builds a real image (real static builds, initramfs, GPT/FAT disk,
// manifest) with a stand-in kernel, for each architecture; the artifact
// carries the manifest's architecture to hotpath-ami.
func TestRun(t *testing.T) {
	root := fixture(t)
	for _, tc := range []struct{ arch, want, bootPath string }{
		{"", "amd64", "/EFI/BOOT/BOOTX64.EFI"},
		{"arm64", "arm64", "/EFI/BOOT/BOOTAA64.EFI"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			b := Builder{kernel: standInKernel(t)}
			raw := map[string]interface{}{
				"hotpath_root": root, "output_directory": out, "source_date_epoch": 1700000000,
				"kernel_cmdline": "hotpath.workload.port=8080",
			}
			if tc.arch != "" {
				raw["architecture"] = tc.arch
			}
			if _, _, err := b.Prepare(raw); err != nil {
				t.Fatal(err)
			}
			ui := new(uitest.UI)
			a, err := b.Run(context.Background(), ui, &packersdk.MockHook{})
			if err != nil {
				t.Fatalf("%v\n%s", err, ui.Text())
			}
			t.Logf("UI:\n%s", ui.Text())
			files := a.Files()
			if len(files) != 2 || files[0] != filepath.Join(out, "hotpath.img") || files[1] != filepath.Join(out, "manifest.json") {
				t.Fatalf("files %v", files)
			}
			f, err := os.Open(files[0])
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.New()
			io.Copy(h, f)
			f.Close()
			sum := hex.EncodeToString(h.Sum(nil))
			if a.Id() != sum || a.State("disk_sha256") != sum || a.State("disk_image") != files[0] {
				t.Errorf("artifact id %s, disk sha256 %s", a.Id(), sum)
			}
			m, err := manifest.ReadFile(files[1])
			if err != nil {
				t.Fatal(err)
			}
			if m.Disk.SHA256 != sum {
				t.Errorf("manifest disk sha256 %q, want %s", m.Disk.SHA256, sum)
			}
			if m.Architecture != tc.want || m.Disk.ESP.BootPath != tc.bootPath {
				t.Errorf("manifest architecture %q, boot path %q; want %s, %s", m.Architecture, m.Disk.ESP.BootPath, tc.want, tc.bootPath)
			}
			if a.State("architecture") != tc.want || !strings.Contains(a.String(), "hotpath "+tc.want+" disk image") {
				t.Errorf("artifact architecture %v (%s), want %s", a.State("architecture"), a, tc.want)
			}
			if gd, ok := a.State("generated_data").(map[string]interface{}); !ok || gd["DiskSHA256"] != sum || gd["Architecture"] != tc.want {
				t.Errorf("generated_data %v", a.State("generated_data"))
			}
			if !ui.Contains("image: ") || !ui.Contains("hotpath image built") {
				t.Errorf("UI lacks build progress or summary:\n%s", ui.Text())
			}
			if err := a.Destroy(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(files[0]); !os.IsNotExist(err) {
				t.Errorf("disk still there after Destroy")
			}
		})
	}
}

// A failed build removes the output directory it created and says so.
func TestRunFailureRemovesOutput(t *testing.T) {
	root := fixture(t)
	out := filepath.Join(t.TempDir(), "out")
	b := Builder{kernel: standInKernel(t)}
	if _, _, err := b.Prepare(map[string]interface{}{
		"hotpath_root": root, "output_directory": out, "workload": "./does-not-exist",
	}); err != nil {
		t.Fatal(err)
	}
	ui := new(uitest.UI)
	if _, err := b.Run(context.Background(), ui, &packersdk.MockHook{}); err == nil {
		t.Fatal("no error")
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("output directory left behind")
	}
	if !ui.Contains("Removing " + out) {
		t.Errorf("UI does not report the clean-up:\n%s", ui.Text())
	}
}

// staticBinary builds the fixture's package pkg as a static linux/amd64
// binary, as a user would ship a prebuilt init or workload.
func staticBinary(t *testing.T, root, pkg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// Outside the hotpath tree the builder needs the init (and the workload)
// as prebuilt binaries; with them, it builds from anywhere.
func TestOutsideTheTree(t *testing.T) {
	root := fixture(t)
	initBin := staticBinary(t, root, "./init")
	workBin := staticBinary(t, root, "./server/cmd/hotpath-json")
	t.Chdir(t.TempDir())

	var c Config
	_, err := c.Prepare(map[string]interface{}{"output_directory": filepath.Join(t.TempDir(), "out")})
	if err == nil || !strings.Contains(err.Error(), "set hotpath_root, or give init_binary and workload_binary") {
		t.Fatalf("Prepare outside the tree without binaries: %v", err)
	}

	out := filepath.Join(t.TempDir(), "out")
	b := Builder{kernel: standInKernel(t)}
	if _, _, err := b.Prepare(map[string]interface{}{
		"output_directory": out, "init_binary": initBin, "workload_binary": workBin,
	}); err != nil {
		t.Fatal(err)
	}
	ui := new(uitest.UI)
	a, err := b.Run(context.Background(), ui, &packersdk.MockHook{})
	if err != nil {
		t.Fatalf("%v\n%s", err, ui.Text())
	}
	if !ui.Contains("init: prebuilt " + initBin) {
		t.Errorf("the init was not taken from init_binary:\n%s", ui.Text())
	}
	if _, err := os.Stat(a.Files()[0]); err != nil {
		t.Error(err)
	}
}
