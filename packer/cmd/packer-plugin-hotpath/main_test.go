package main

// These tests drive the built plugin binary the way Packer core does: start
// it with the magic cookie, read the handshake line, dial the socket it
// names, and talk to the component through the SDK's RPC client
// (ConfigSpec, Prepare/Configure with values decoded from an HCL template
// with that spec, Run/PostProcess with a recording UI). AWS is the fake on
// 127.0.0.1, reached by the plugin process through the template's
// custom endpoints.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/hcl/v2/hclparse"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hashicorp/packer-plugin-sdk/plugin"
	packrpc "github.com/hashicorp/packer-plugin-sdk/rpc"
	"github.com/hotpath-dev/hotpath/image/manifest"
	"github.com/hotpath-dev/hotpath/packer/internal/fakeaws"
	"github.com/hotpath-dev/hotpath/packer/internal/uitest"
	"github.com/zclconf/go-cty/cty"
)

var binDir string // holds the built plugin and packer-sdc

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "packer-plugin-hotpath-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := 1
	if err := build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func build(dir string) error {
	for _, c := range [][]string{
		{"go", "build", "-o", filepath.Join(dir, "packer-plugin-hotpath"), "."},
		{"go", "build", "-o", filepath.Join(dir, "packer-sdc"), "github.com/hashicorp/packer-plugin-sdk/cmd/packer-sdc"},
	} {
		out, err := exec.Command(c[0], c[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	return nil
}

func TestDescribe(t *testing.T) {
	out, err := exec.Command(filepath.Join(binDir, "packer-plugin-hotpath"), "describe").Output()
	if err != nil {
		t.Fatal(err)
	}
	var d plugin.SetDescription
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatal(err)
	}
	if strings.Join(d.Builders, ",") != "image" || strings.Join(d.PostProcessors, ",") != "ami,rollout" ||
		d.Version == "" || d.SDKVersion != "0.6.6" || d.ProtocolVersion != plugin.ProtocolVersion2 {
		t.Errorf("describe: %s", out)
	}
}

func TestPluginCheck(t *testing.T) {
	cmd := exec.Command(filepath.Join(binDir, "packer-sdc"), "plugin-check", "packer-plugin-hotpath")
	cmd.Dir = binDir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("packer-sdc plugin-check: %v\n%s", err, out)
	}
}

// Without the magic cookie the plugin refuses to serve.
func TestNoCookie(t *testing.T) {
	cmd := exec.Command(filepath.Join(binDir, "packer-plugin-hotpath"), "start", "builder", "image")
	cmd.Env = withoutCookie(os.Environ())
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Please do not execute plugins directly") {
		t.Errorf("err %v, output %s", err, out)
	}
}

func withoutCookie(env []string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, plugin.MagicCookieKey+"=") {
			out = append(out, e)
		}
	}
	return out
}

// start launches one component of the plugin as Packer core does and
// returns the RPC client after the handshake.
func start(t *testing.T, kind, name string, proto bool, env ...string) *packrpc.Client {
	t.Helper()
	args := []string{"start", kind, name}
	if proto {
		args = append(args, "--protobuf")
	}
	cmd := exec.Command(filepath.Join(binDir, "packer-plugin-hotpath"), args...)
	cmd.Env = append(withoutCookie(os.Environ()), plugin.MagicCookieKey+"="+plugin.MagicCookieValue)
	cmd.Env = append(cmd.Env, env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Errorf("plugin did not exit after the client closed; killing it")
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("plugin stderr:\n%s", stderr.String())
		}
	})

	// Handshake: "<api major>|<api minor>|<network>|<address>".
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		io.Copy(io.Discard, stdout)
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("no handshake line; stderr:\n%s", stderr.String())
	}
	parts := strings.Split(strings.TrimSpace(line), "|")
	if len(parts) != 4 || parts[0] != plugin.APIVersionMajor || parts[1] != plugin.APIVersionMinor {
		cmd.Process.Kill()
		t.Fatalf("handshake %q, want API %s.%s", line, plugin.APIVersionMajor, plugin.APIVersionMinor)
	}
	conn, err := net.Dial(parts[2], parts[3])
	if err != nil {
		cmd.Process.Kill()
		t.Fatal(err)
	}
	client, err := packrpc.NewClient(conn)
	if err != nil {
		cmd.Process.Kill()
		t.Fatal(err)
	}
	client.UseProto = proto
	t.Cleanup(func() { client.Close() })
	return client
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// template is a Packer HCL2 template; blocks decodes its source block and
// its post-processor block with the components' specs, as Packer core
// does, with var.* available.
const template = `
source "hotpath-image" "app" {
  output_directory  = var.out
  source_date_epoch = 1700000000
  init_config = {
    "nic.rx_usecs" = "20"
  }
}

build {
  sources = ["source.hotpath-image.app"]

  post-processor "hotpath-ami" {
    region              = "eu-west-1"
    ami_name            = "hotpath ${var.version}"
    ami_description     = "hotpath appliance ${var.version}"
    ami_regions         = ["us-east-1"]
    ami_users           = ["111122223333"]
    tags                = { Name = "hotpath", Version = var.version }
    snapshot_tags       = { Name = "hotpath-root" }
    access_key          = var.key
    secret_key          = "secret"
    custom_endpoint_ec2 = var.endpoint
    custom_endpoint_ebs = var.endpoint
    poll_interval       = "20ms"
    upload_workers      = 8
  }
}
`

func decode(t *testing.T, vars map[string]string, builderSpec, ppSpec hcldec.ObjectSpec) (cty.Value, cty.Value) {
	t.Helper()
	f, diags := hclparse.NewParser().ParseHCL([]byte(template), "hotpath.pkr.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	vals := map[string]cty.Value{}
	for k, v := range vars {
		vals[k] = cty.StringVal(v)
	}
	ectx := &hcl.EvalContext{Variables: map[string]cty.Value{"var": cty.ObjectVal(vals)}}
	content, diags := f.Body.Content(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
		{Type: "source", LabelNames: []string{"type", "name"}}, {Type: "build"},
	}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var bv, pv cty.Value
	for _, b := range content.Blocks {
		switch b.Type {
		case "source":
			if builderSpec == nil {
				continue
			}
			if b.Labels[0] != "hotpath-image" {
				t.Fatalf("source type %s", b.Labels[0])
			}
			bv, diags = hcldec.Decode(b.Body, builderSpec, ectx)
		case "build":
			bc, d := b.Body.Content(&hcl.BodySchema{
				Attributes: []hcl.AttributeSchema{{Name: "sources"}},
				Blocks:     []hcl.BlockHeaderSchema{{Type: "post-processor", LabelNames: []string{"type"}}},
			})
			if d.HasErrors() {
				t.Fatal(d)
			}
			if ppSpec == nil {
				continue
			}
			pp := bc.Blocks[0]
			if pp.Labels[0] != "hotpath-ami" {
				t.Fatalf("post-processor type %s", pp.Labels[0])
			}
			pv, diags = hcldec.Decode(pp.Body, ppSpec, ectx)
		}
		if diags.HasErrors() {
			t.Fatalf("decode %s block with the plugin's spec: %v", b.Type, diags)
		}
	}
	return bv, pv
}

// coreVars are the variables Packer core passes next to the decoded body.
func coreVars(builderType string) map[string]string {
	return map[string]string{
		"packer_build_name":   "app",
		"packer_builder_type": builderType,
		"packer_core_version": "1.11.2",
		"packer_debug":        "false",
		"packer_force":        "false",
		"packer_on_error":     "cleanup",
	}
}

// sparseDisk writes a 1 GiB sparse disk with data in a few blocks, like the
// image builder's output, and returns its path and sha256.
func sparseDisk(t *testing.T) (string, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hotpath.img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 3*fakeaws.BlockSize+4096)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	h := sha256.New()
	for _, off := range []int64{0, 1 << 20, 700 << 20, 1<<30 - int64(len(buf))} {
		if _, err := f.WriteAt(buf, off); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return p, hex.EncodeToString(h.Sum(nil))
}

// awsEnv keeps the plugin's AWS SDK away from the machine's AWS
// configuration and from instance metadata.
func awsEnv(t *testing.T) []string {
	d := t.TempDir()
	return []string{
		"AWS_CONFIG_FILE=" + filepath.Join(d, "config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(d, "credentials"),
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_PROFILE=", "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_REGION=",
	}
}

// The post-processor, alone: ConfigSpec, Configure from HCL, PostProcess
// on a disk image, through the plugin binary (protobuf/msgpack encoding,
// as current Packer uses).
func TestPostProcessorRPC(t *testing.T) {
	f := fakeaws.New("AKIDRPC", "secret")
	defer f.Close()
	f.Inject("PutSnapshotBlock", fakeaws.Fault{Status: 503})
	disk, sum := sparseDisk(t)

	client := start(t, "post-processor", "ami", true, awsEnv(t)...)
	pp := client.PostProcessor()
	spec := pp.ConfigSpec()
	for _, k := range []string{"region", "ami_name", "ami_regions", "encrypt_boot", "kms_key_id", "tags", "snapshot_tags", "skip_region_validation", "upload_workers",
		// The amazon plugin's keys (issue #14, item 7).
		"force_deregister", "force_delete_snapshot", "assume_role", "region_kms_key_ids", "snapshot_users", "snapshot_groups",
		"ami_org_arns", "ami_ou_arns", "deprecate_at", "deregistration_protection", "tag", "snapshot_tag",
		"boot_mode", "imds_support", "ena_support", "sriov_support", "tpm_support", "architecture"} {
		if _, ok := spec[k]; !ok {
			t.Errorf("ConfigSpec lacks %s", k)
		}
	}
	_, cfg := decode(t, map[string]string{"version": "1.0", "key": "AKIDRPC", "endpoint": f.URL, "out": "x"}, nil, spec)

	// A bad configuration is refused with every problem listed.
	bad := coreVars("hotpath-image")
	if err := pp.Configure(bad, map[string]interface{}{"upload_workers": -1}); err == nil ||
		!strings.Contains(err.Error(), "region is required") || !strings.Contains(err.Error(), "ami_name is required") ||
		!strings.Contains(err.Error(), "upload_workers -1") {
		t.Errorf("Configure of a bad config: %v", err)
	}

	if err := pp.Configure(coreVars("hotpath-image"), cfg); err != nil {
		t.Fatal(err)
	}
	ui := new(uitest.UI)
	in := &packersdk.MockArtifact{BuilderIdValue: "hotpath.builder.image", FilesValue: []string{disk, writeManifest(t, filepath.Dir(disk), "amd64")}}
	a, keep, _, err := pp.PostProcess(context.Background(), ui, in)
	if err != nil {
		t.Fatalf("%v\n%s", err, ui.Text())
	}
	t.Logf("UI:\n%s", ui.Text())
	if !keep {
		t.Errorf("input artifact not kept")
	}
	checkAMIs(t, f, a, ui, sum, 1<<30, "x86_64")
}

// writeManifest writes a hotpath manifest.json for the architecture (Go's
// name) into dir, as the image builder does next to the disk: an amd64
// disk has BIOS boot code.
func writeManifest(t *testing.T, dir, goarch string) string {
	t.Helper()
	p := filepath.Join(dir, "manifest.json")
	m := &manifest.Manifest{Format: manifest.Format, Architecture: goarch}
	if goarch == "amd64" {
		m.Disk.BIOSBoot = &manifest.BIOSBoot{Index: 2, Loader: "grub i386-pc", Package: "grub-pc-bin"}
	}
	if err := m.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// Issue #15: an arm64 image through the post-processor plugin (protobuf
// encoding) becomes arm64 AMIs with UEFI boot in the fake AWS, the
// architecture read from the input artifact as the hotpath-image
// builder's artifact carries it (architecture state) and as another
// builder's would (manifest.json among its files); a template that says
// x86_64 for an arm64 image is refused before any AWS call.
func TestPostProcessorRPCArm64(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   func(disk string) packersdk.Artifact
	}{
		{"builder state", func(disk string) packersdk.Artifact {
			m := writeManifest(t, filepath.Dir(disk), "arm64")
			return &packersdk.MockArtifact{BuilderIdValue: "hotpath.builder.image", FilesValue: []string{disk, m},
				StateValues: map[string]interface{}{"architecture": "arm64", "manifest": m, "disk_image": disk}}
		}},
		{"manifest file", func(disk string) packersdk.Artifact {
			return &packersdk.MockArtifact{FilesValue: []string{disk, writeManifest(t, filepath.Dir(disk), "arm64")}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fakeaws.New("AKIDRPC", "secret")
			defer f.Close()
			disk, sum := sparseDisk(t)
			in := tc.in(disk)
			client := start(t, "post-processor", "ami", true, awsEnv(t)...)
			pp := client.PostProcessor()
			_, cfg := decode(t, map[string]string{"version": "1.0", "key": "AKIDRPC", "endpoint": f.URL, "out": "x"}, nil, pp.ConfigSpec())

			if err := pp.Configure(coreVars("hotpath-image"), cfg, map[string]interface{}{"architecture": "x86_64"}); err != nil {
				t.Fatal(err)
			}
			_, _, _, err := pp.PostProcess(context.Background(), new(uitest.UI), in)
			if err == nil || !strings.Contains(err.Error(), `architecture = "x86_64", but the image is built for arm64`) {
				t.Errorf("x86_64 configured for an arm64 image: %v", err)
			}
			if n := len(f.Calls()); n != 0 {
				t.Errorf("%d AWS calls before the refusal", n)
			}

			if err := pp.Configure(coreVars("hotpath-image"), cfg); err != nil {
				t.Fatal(err)
			}
			ui := new(uitest.UI)
			a, _, _, err := pp.PostProcess(context.Background(), ui, in)
			t.Logf("UI:\n%s", ui.Text())
			if err != nil {
				t.Fatal(err)
			}
			checkAMIs(t, f, a, ui, sum, 1<<30, "arm64")
			for _, im := range f.Images() {
				if im.Region == "eu-west-1" && (im.Params["Architecture"] != "arm64" || im.Params["BootMode"] != "uefi") {
					t.Errorf("RegisterImage Architecture %q BootMode %q", im.Params["Architecture"], im.Params["BootMode"])
				}
			}
		})
	}
}

// checkAMIs checks the AMIs the template's post-processor block makes
// from a disk with the given sha256 and size: registered in eu-west-1 as
// arch (EC2's name) and copied to us-east-1.
func checkAMIs(t *testing.T, f *fakeaws.Server, a packersdk.Artifact, ui *uitest.UI, sum string, size int64, arch string) {
	t.Helper()
	if a.BuilderId() != "hotpath.post-processor.ami" {
		t.Errorf("artifact builder id %s", a.BuilderId())
	}
	imgs := f.Images()
	if len(imgs) != 2 {
		t.Fatalf("%d images, want eu-west-1 and its us-east-1 copy", len(imgs))
	}
	want := "eu-west-1:" + imgs[0].ID + ",us-east-1:" + imgs[1].ID
	if imgs[0].Region != "eu-west-1" {
		want = "eu-west-1:" + imgs[1].ID + ",us-east-1:" + imgs[0].ID
	}
	if a.Id() != want {
		t.Errorf("artifact id %q, want %q", a.Id(), want)
	}
	// An x86 disk boots both ways (BIOS boot code): uefi-preferred; arm64
	// boots UEFI only.
	mode, label := "uefi-preferred", "UEFI preferred, legacy BIOS where an instance type has no UEFI"
	if arch == "arm64" {
		mode, label = "uefi", "UEFI"
	}
	for _, im := range imgs {
		if im.Name != "hotpath 1.0" || im.Tags["Version"] != "1.0" || im.State != "available" ||
			im.BootMode != mode || im.Imds != "v2.0" || !im.EnaSupport || im.SriovNetSupport != "simple" ||
			im.Architecture != arch || im.VolumeType != "gp3" || !im.DeleteOnTermination ||
			strings.Join(im.LaunchUsers, ",") != "111122223333" {
			t.Errorf("image %+v", im)
		}
	}
	var snap string
	for _, s := range f.Snapshots() {
		if s.Region == "eu-west-1" {
			snap = s.ID
		}
	}
	got, err := f.SnapshotSHA256(snap, size)
	if err != nil {
		t.Fatal(err)
	}
	if got != sum {
		t.Errorf("snapshot reassembled from the uploaded blocks: sha256 %s, disk %s", got, sum)
	}
	for _, s := range []string{"Started snapshot", "written", "MiB/s", "ETA", "is available in us-east-1", "(" + arch + ", " + label + ", ENA, IMDSv2 only)"} {
		if !ui.Contains(s) {
			t.Errorf("UI does not say %q", s)
		}
	}
}

// fixtureRoot is a module standing in for the hotpath tree, for builder
// runs that must not depend on the real init compiling.
func fixtureRoot(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":       "module example.com/appliance\n\ngo 1.22\n",
		"init/main.go": "package main\n\nfunc main() { println(\"init\") }\n",
	} {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The builder through RPC (gob encoding, as older Packer uses): spec,
// Prepare from HCL plus core variables, and a Run that the image package
// refuses (a dynamically linked workload): the error and the clean-up
// reach the caller.
func TestBuilderRPCRefusesDynamicWorkload(t *testing.T) {
	client := start(t, "builder", "image", false)
	b := client.Builder()
	spec := b.ConfigSpec()
	for _, k := range []string{"output_directory", "workload", "workload_binary", "init_config", "kernel_source", "hotpath_root", "architecture"} {
		if _, ok := spec[k]; !ok {
			t.Errorf("ConfigSpec lacks %s", k)
		}
	}
	out := filepath.Join(t.TempDir(), "out")
	cfg, _ := decode(t, map[string]string{"out": out, "version": "1", "key": "k", "endpoint": "http://x"}, spec, nil)

	// Bad values are refused at Prepare, all of them.
	if _, _, err := b.Prepare(coreVars("hotpath-image"), cfg, map[string]interface{}{"jobs": -1, "kernel_source": "/nonexistent", "architecture": "x86_64"}); err == nil ||
		!strings.Contains(err.Error(), "jobs must not be negative") || !strings.Contains(err.Error(), "kernel_source") ||
		!strings.Contains(err.Error(), `architecture "x86_64" is not supported: hotpath builds amd64 or arm64 images`) {
		t.Errorf("Prepare of a bad config: %v", err)
	}

	dynamic, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no dynamically linked binary to refuse")
	}
	vars, _, err := b.Prepare(coreVars("hotpath-image"), cfg, map[string]interface{}{
		"hotpath_root": fixtureRoot(t), "workload_binary": dynamic,
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(vars, ",") != "DiskImage,Manifest,DiskSHA256,Architecture" {
		t.Errorf("generated vars %v", vars)
	}
	ui := new(uitest.UI)
	a, err := b.Run(context.Background(), ui, &packersdk.MockHook{})
	t.Logf("UI:\n%s", ui.Text())
	if err == nil || !strings.Contains(err.Error(), "static") {
		t.Fatalf("Run: artifact %v, err %v; want a refusal of the non-static workload", a, err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("output directory left behind")
	}
	if !ui.Contains("Removing " + out) {
		t.Errorf("UI does not report the clean-up")
	}
}

// The whole pipeline the way `packer build` runs the example: the builder
// plugin builds the real appliance (hotpath's init and JSON server, the
// real kernel from the cache or built now), and its artifact is handed to
// the post-processor plugin, which uploads it to the fake AWS and
// registers the AMIs, and on to hotpath-rollout. A cold kernel build takes
// ~30 minutes on 2 cores; -short skips this test.
func TestBuildAndPostProcessRPC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 70*time.Minute)
	defer cancel()
	f, vars, a := buildAndPostProcess(t, ctx, "", "x86_64")

	// ... and on to the fleet.
	vars["lt_us"] = fleet(t, f)
	if _, _, err := runRollout(t, ctx, vars, a); err != nil {
		t.Fatal(err)
	}
	for _, g := range []struct{ region, name string }{{"eu-west-1", "web"}, {"us-east-1", "web-us"}} {
		if gs := f.GroupState(g.region, g.name); gs.Refreshes[0].Status != "Successful" || !strings.HasPrefix(a.Id(), "eu-west-1:"+gs.Running) && !strings.HasSuffix(a.Id(), "us-east-1:"+gs.Running) {
			t.Errorf("group %s: %+v (AMIs %s)", g.name, gs, a.Id())
		}
	}
}

// Issue #15: the same pipeline for Graviton. The builder plugin, with
// architecture = "arm64", cross-builds the init, the workload and the
// kernel (a relink when the arm64 kernel is cached, ~40 minutes cold),
// and the post-processor plugin registers arm64 AMIs with UEFI boot
// without being told the architecture: it reads it from the builder's
// artifact. -short skips this test.
func TestBuildAndPostProcessRPCArm64(t *testing.T) {
	if _, err := exec.LookPath("aarch64-linux-gnu-gcc"); err != nil {
		t.Skip("no arm64 cross compiler (image/deps.sh build arm64 installs gcc-aarch64-linux-gnu)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 70*time.Minute)
	defer cancel()
	buildAndPostProcess(t, ctx, "arm64", "arm64")
}

// buildAndPostProcess builds the appliance for goarch ("" for the
// default) with the builder plugin and hands its artifact to the
// post-processor plugin, which must register AMIs of amiArch. It returns
// the fake AWS, the template's variables and the post-processor's
// artifact.
func buildAndPostProcess(t *testing.T, ctx context.Context, goarch, amiArch string) (*fakeaws.Server, map[string]string, packersdk.Artifact) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping the real image build")
	}
	if _, err := os.Stat("/usr/src/linux-source-6.12.tar.xz"); err != nil && os.Getenv("HOTPATH_KERNEL_SOURCE") == "" {
		t.Skip("no kernel source (image/deps.sh installs linux-source-6.12)")
	}
	f := fakeaws.New("AKIDRPC", "secret")
	t.Cleanup(f.Close)
	out := filepath.Join(t.TempDir(), "out")
	vars := map[string]string{"out": out, "version": "1.0", "key": "AKIDRPC", "endpoint": f.URL}

	bc := start(t, "builder", "image", true)
	b := bc.Builder()
	bcfg, _ := decode(t, vars, b.ConfigSpec(), nil)
	extra := map[string]interface{}{}
	if src := os.Getenv("HOTPATH_KERNEL_SOURCE"); src != "" {
		extra["kernel_source"] = src
	}
	if goarch != "" {
		extra["architecture"] = goarch
	}
	if _, _, err := b.Prepare(coreVars("hotpath-image"), bcfg, extra); err != nil {
		t.Fatal(err)
	}
	bui := new(uitest.UI)
	art, err := b.Run(ctx, bui, &packersdk.MockHook{})
	t.Logf("builder UI:\n%s", bui.Text())
	if err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(out, "hotpath.img")
	if files := art.Files(); len(files) != 2 || files[0] != disk {
		t.Fatalf("artifact files %v", files)
	}
	fi, err := os.Stat(disk)
	if err != nil {
		t.Fatal(err)
	}
	df, _ := os.Open(disk)
	h := sha256.New()
	io.Copy(h, df)
	df.Close()
	sum := hex.EncodeToString(h.Sum(nil))
	if art.Id() != sum {
		t.Errorf("artifact id %s, disk sha256 %s", art.Id(), sum)
	}
	m, err := manifest.ReadFile(filepath.Join(out, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	wantArch := goarch
	if wantArch == "" {
		wantArch = "amd64"
	}
	if m.Architecture != wantArch || art.State("architecture") != wantArch {
		t.Errorf("manifest architecture %q, artifact's %v; want %s", m.Architecture, art.State("architecture"), wantArch)
	}

	pc := start(t, "post-processor", "ami", true, awsEnv(t)...)
	pp := pc.PostProcessor()
	_, pcfg := decode(t, vars, nil, pp.ConfigSpec())
	if err := pp.Configure(coreVars("hotpath-image"), pcfg); err != nil {
		t.Fatal(err)
	}
	pui := new(uitest.UI)
	a, _, _, err := pp.PostProcess(ctx, pui, art)
	t.Logf("post-processor UI:\n%s", pui.Text())
	if err != nil {
		t.Fatal(err)
	}
	checkAMIs(t, f, a, pui, sum, fi.Size(), amiArch)
	return f, vars, a
}

// Cancelling the build (Packer core cancels the context, the RPC client
// calls Cancel on the plugin) stops the upload and deletes the snapshot.
func TestPostProcessorRPCCancel(t *testing.T) {
	f := fakeaws.New("AKIDRPC", "secret")
	defer f.Close()
	disk, _ := sparseDisk(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	f.OnPut = func(string, int32) { once.Do(cancel) }

	client := start(t, "post-processor", "ami", true, awsEnv(t)...)
	pp := client.PostProcessor()
	_, cfg := decode(t, map[string]string{"version": "1.0", "key": "AKIDRPC", "endpoint": f.URL, "out": "x"}, nil, pp.ConfigSpec())
	if err := pp.Configure(coreVars("hotpath-image"), cfg, map[string]interface{}{"upload_workers": 1}); err != nil {
		t.Fatal(err)
	}
	ui := new(uitest.UI)
	a, _, _, err := pp.PostProcess(ctx, ui, &packersdk.MockArtifact{FilesValue: []string{disk}})
	t.Logf("UI:\n%s", ui.Text())
	if err == nil {
		t.Fatalf("no error after cancel; artifact %v", a)
	}
	if n, m := len(f.Snapshots()), len(f.Images()); n != 0 || m != 0 {
		t.Errorf("left behind after cancel: %d snapshots, %d images", n, m)
	}
	if !ui.Contains("Deleted snapshot") {
		t.Errorf("UI does not report the clean-up")
	}
}

// Every check of issue #14's items 2-4 refuses the template through the
// plugin, as `packer validate` would show it.
func TestValidationRPC(t *testing.T) {
	client := start(t, "post-processor", "ami", true, awsEnv(t)...)
	pp := client.PostProcessor()
	_, cfg := decode(t, map[string]string{"version": "1.0", "key": "AKIDRPC", "endpoint": "http://127.0.0.1:1", "out": "x"}, nil, pp.ConfigSpec())
	key := func(region string) string {
		return "arn:aws:kms:" + region + ":123456789012:key/0f0f0f0f-1234-5678-9abc-0123456789ab"
	}
	for _, tc := range []struct {
		name  string
		extra map[string]interface{}
		want  string
	}{
		{"shared, encrypted with the managed key", map[string]interface{}{"encrypt_boot": true},
			"encrypt_boot without kms_key_id cannot be shared"},
		{"shared copy without its region's key", map[string]interface{}{"encrypt_boot": true, "kms_key_id": key("eu-west-1")},
			"region_kms_key_ids needs a customer managed key for us-east-1"},
		{"key of the wrong region", map[string]interface{}{"encrypt_boot": true, "kms_key_id": key("eu-west-1"),
			"region_kms_key_ids": map[string]string{"us-east-1": key("eu-west-1")}}, "is a key of eu-west-1, not of us-east-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := pp.Configure(coreVars("hotpath-image"), cfg, tc.extra)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Configure: %v, want %q", err, tc.want)
			}
		})
	}
	if err := pp.Configure(coreVars("hotpath-image"), cfg, map[string]interface{}{"encrypt_boot": true,
		"region_kms_key_ids": map[string]string{"eu-west-1": key("eu-west-1"), "us-east-1": key("us-east-1")}}); err != nil {
		t.Errorf("per-region keys refused: %v", err)
	}

	bc := start(t, "builder", "image", false)
	b := bc.Builder()
	bcfg, _ := decode(t, map[string]string{"out": filepath.Join(t.TempDir(), "out"), "version": "1", "key": "k", "endpoint": "http://x"}, b.ConfigSpec(), nil)
	for _, tc := range []struct{ cmdline, want string }{
		{"hotpath.bogus=1", "bogus"},
		{"quiet hotpath.workload.port=http", "workload.port"},
	} {
		if _, _, err := b.Prepare(coreVars("hotpath-image"), bcfg, map[string]interface{}{"hotpath_root": fixtureRoot(t), "kernel_cmdline": tc.cmdline}); err == nil ||
			!strings.Contains(err.Error(), tc.want) {
			t.Errorf("kernel_cmdline %q: %v, want %q", tc.cmdline, err, tc.want)
		}
	}
}

// A duplicate ami_name stops the run before the upload (item 3), in the
// build region or any copy region.
func TestDuplicateNameRPC(t *testing.T) {
	f := fakeaws.New("AKIDRPC", "secret")
	defer f.Close()
	disk, _ := sparseDisk(t)
	client := start(t, "post-processor", "ami", true, awsEnv(t)...)
	pp := client.PostProcessor()
	_, cfg := decode(t, map[string]string{"version": "1.0", "key": "AKIDRPC", "endpoint": f.URL, "out": "x"}, nil, pp.ConfigSpec())
	if err := pp.Configure(coreVars("hotpath-image"), cfg); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := pp.PostProcess(context.Background(), new(uitest.UI), &packersdk.MockArtifact{FilesValue: []string{disk}}); err != nil {
		t.Fatal(err)
	}
	starts := f.CountCalls("StartSnapshot", 0)
	ui := new(uitest.UI)
	_, _, _, err := pp.PostProcess(context.Background(), ui, &packersdk.MockArtifact{FilesValue: []string{disk}})
	if err == nil || !strings.Contains(err.Error(), `ami_name "hotpath 1.0" is already used by ami-`) {
		t.Errorf("second run: %v", err)
	}
	if n := f.CountCalls("StartSnapshot", 0) - starts; n != 0 {
		t.Errorf("%d uploads started for a taken name", n)
	}
}

// Ctrl-C while the copies are pending (item 1): EC2 does not name a
// pending copy's snapshot, and the clean-up still deletes the copy and
// its snapshot; the message says "cancelled" (item 6).
func TestPendingCopyCancelRPC(t *testing.T) {
	f := fakeaws.New("AKIDRPC", "secret")
	defer f.Close()
	f.CopyPendingPolls = 1 << 20
	disk, _ := sparseDisk(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var copied sync.Once
	f.OnCall = func(op string, status int) {
		if op == "CopyImage" && status == 200 {
			copied.Do(func() { time.AfterFunc(100*time.Millisecond, cancel) })
		}
	}
	client := start(t, "post-processor", "ami", true, awsEnv(t)...)
	pp := client.PostProcessor()
	_, cfg := decode(t, map[string]string{"version": "1.0", "key": "AKIDRPC", "endpoint": f.URL, "out": "x"}, nil, pp.ConfigSpec())
	if err := pp.Configure(coreVars("hotpath-image"), cfg); err != nil {
		t.Fatal(err)
	}
	ui := new(uitest.UI)
	_, _, _, err := pp.PostProcess(ctx, ui, &packersdk.MockArtifact{FilesValue: []string{disk}})
	t.Logf("UI:\n%s", ui.Text())
	if err == nil || !strings.Contains(err.Error(), "cancelled; everything created was deleted") {
		t.Errorf("err %v", err)
	}
	if ui.Contains("context canceled") {
		t.Errorf("the UI shows the context error instead of the cancel")
	}
	if f.CountCalls("CopyImage", 200) != 1 {
		t.Fatalf("no copy was started")
	}
	if n, m := len(f.Images()), len(f.Snapshots()); n != 0 || m != 0 {
		t.Errorf("left behind: %+v images, %+v snapshots", f.Images(), f.Snapshots())
	}
}

// rolloutTemplate is the hotpath-rollout block of a build, after
// hotpath-ami in a post-processors chain.
const rolloutTemplate = `
post-processor "hotpath-rollout" {
  region                      = "eu-west-1"
  access_key                  = var.key
  secret_key                  = "secret"
  custom_endpoint_ec2         = var.endpoint
  custom_endpoint_ssm         = var.endpoint
  custom_endpoint_autoscaling = var.endpoint
  ssm_parameter               = "/hotpath/prod/x86_64/latest/image_id"
  target {
    launch_template_name = "hotpath"
    set_default_version  = true
    auto_scaling_groups  = ["web"]
  }
  target {
    region              = "us-east-1"
    launch_template_id  = var.lt_us
    auto_scaling_groups = ["web-us"]
  }
  min_healthy_percentage = 100
  max_healthy_percentage = 150
  instance_warmup        = "60s"
  checkpoint_percentages = [50, 100]
  checkpoint_delay       = "5m"
  poll_interval          = "20ms"
}
`

func decodeRollout(t *testing.T, vars map[string]string, spec hcldec.ObjectSpec) cty.Value {
	t.Helper()
	f, diags := hclparse.NewParser().ParseHCL([]byte(rolloutTemplate), "rollout.pkr.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	vals := map[string]cty.Value{}
	for k, v := range vars {
		vals[k] = cty.StringVal(v)
	}
	content, diags := f.Body.Content(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "post-processor", LabelNames: []string{"type"}}}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	v, diags := hcldec.Decode(content.Blocks[0].Body, spec, &hcl.EvalContext{Variables: map[string]cty.Value{"var": cty.ObjectVal(vals)}})
	if diags.HasErrors() {
		t.Fatalf("decode the hotpath-rollout block with the plugin's spec: %v", diags)
	}
	return v
}

// rolloutRun builds AMIs with the hotpath-ami plugin (eu-west-1, copied
// to us-east-1) from a disk, then hands its artifact — over RPC, as
// Packer chains post-processors — to the hotpath-rollout plugin, against
// a fleet of two groups on the old AMI.
// arm, if not nil, runs once the fleet exists.
func rolloutRun(t *testing.T, f *fakeaws.Server, ctx context.Context, arm func()) (*uitest.UI, packersdk.Artifact, error) {
	t.Helper()
	ltUS := fleet(t, f)
	if arm != nil {
		arm()
	}
	disk, _ := sparseDisk(t)
	vars := map[string]string{"version": "1.0", "key": "AKIDRPC", "endpoint": f.URL, "out": "x", "lt_us": ltUS}

	ac := start(t, "post-processor", "ami", true, awsEnv(t)...)
	app := ac.PostProcessor()
	_, acfg := decode(t, vars, nil, app.ConfigSpec())
	if err := app.Configure(coreVars("hotpath-image"), acfg); err != nil {
		t.Fatal(err)
	}
	aui := new(uitest.UI)
	amis, _, _, err := app.PostProcess(context.Background(), aui, &packersdk.MockArtifact{FilesValue: []string{disk}})
	if err != nil {
		t.Fatalf("%v\n%s", err, aui.Text())
	}
	return runRollout(t, ctx, vars, amis)
}

// fleet creates, in the fake, two Auto Scaling groups running an old AMI
// from launch templates in eu-west-1 and us-east-1, and the SSM parameter
// naming the old AMI; it returns the us-east-1 launch template's id.
func fleet(t *testing.T, f *fakeaws.Server) string {
	old := f.AddImage("eu-west-1", "hotpath 0.9")
	oldUS := f.AddImage("us-east-1", "hotpath 0.9")
	lt := f.AddLaunchTemplate("eu-west-1", "hotpath", old)
	ltUS := f.AddLaunchTemplate("us-east-1", "hotpath", oldUS)
	f.AddGroup("eu-west-1", "web", lt, "1", 6)
	f.AddGroup("us-east-1", "web-us", ltUS, "1", 3)
	f.PutParameterValue("eu-west-1", "/hotpath/prod/x86_64/latest/image_id", old)
	return ltUS
}

// runRollout runs the hotpath-rollout plugin on the AMIs of another plugin's
// artifact.
func runRollout(t *testing.T, ctx context.Context, vars map[string]string, amis packersdk.Artifact) (*uitest.UI, packersdk.Artifact, error) {
	rc := start(t, "post-processor", "rollout", true, awsEnv(t)...)
	rpp := rc.PostProcessor()
	if err := rpp.Configure(coreVars("hotpath-image"), decodeRollout(t, vars, rpp.ConfigSpec())); err != nil {
		t.Fatal(err)
	}
	ui := new(uitest.UI)
	a, _, _, err := rpp.PostProcess(ctx, ui, amis)
	t.Logf("hotpath-rollout UI:\n%s", ui.Text())
	return ui, a, err
}

// The whole hand-over: AMI -> SSM parameter -> launch template version
// -> Instance Refresh, to Successful in both regions.
func TestRolloutRPC(t *testing.T) {
	f := fakeaws.New("AKIDRPC", "secret")
	defer f.Close()
	ui, a, err := rolloutRun(t, f, context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var eu, us string
	for _, im := range f.Images() {
		if im.Name == "hotpath 1.0" && im.Region == "eu-west-1" {
			eu = im.ID
		}
		if im.Name == "hotpath 1.0" && im.Region == "us-east-1" {
			us = im.ID
		}
	}
	if a.Id() != "eu-west-1:"+eu+",us-east-1:"+us {
		t.Errorf("artifact %s", a.Id())
	}
	for r, want := range map[string]string{"eu-west-1": eu, "us-east-1": us} {
		if pm, ok := f.Parameter(r, "/hotpath/prod/x86_64/latest/image_id"); !ok || pm.Value != want {
			t.Errorf("parameter in %s: %+v", r, pm)
		}
	}
	for _, g := range []struct{ region, name, ami string }{{"eu-west-1", "web", eu}, {"us-east-1", "web-us", us}} {
		gs := f.GroupState(g.region, g.name)
		if gs.Running != g.ami || gs.Refreshes[0].Status != "Successful" || gs.Refreshes[0].MinHealthy != 100 || gs.Refreshes[0].MaxHealthy != 150 {
			t.Errorf("group %s: %+v", g.name, gs)
		}
	}
	for _, s := range []string{"web (eu-west-1): InProgress", "instances to update", "Waiting for the checkpoint delay (300s) at 50%", "web-us (us-east-1): Successful 100%"} {
		if !ui.Contains(s) {
			t.Errorf("UI does not say %q", s)
		}
	}
}

// A refresh that fails is rolled back, and the plugin says so and puts
// the parameter and the default version back.
func TestRolloutFailureRPC(t *testing.T) {
	f := fakeaws.New("AKIDRPC", "secret")
	defer f.Close()
	ui, _, err := rolloutRun(t, f, context.Background(), func() {
		f.FailRefresh("eu-west-1", "web", 40, "3 targets failed the health check on the management port")
	})
	if err == nil || !strings.Contains(err.Error(), "RollbackSuccessful: Instance refresh failed: 3 targets failed the health check") ||
		!strings.Contains(err.Error(), "group web in eu-west-1 was rolled back") {
		t.Fatalf("err %v", err)
	}
	if f.GroupState("eu-west-1", "web").Running == "" || f.LaunchTemplates()[f.GroupState("eu-west-1", "web").TemplateID].Default != 1 {
		t.Errorf("default version not restored")
	}
	if !ui.Contains("is ami-") || !ui.Contains("again") {
		t.Errorf("UI does not report the parameter restored")
	}
}

// Ctrl-C while waiting for the refresh rolls it back, and the message
// says what the groups run.
func TestRolloutCancelRPC(t *testing.T) {
	f := fakeaws.New("AKIDRPC", "secret")
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	f.OnCall = func(op string, _ int) {
		if op == "DescribeInstanceRefreshes" {
			once.Do(cancel)
		}
	}
	ui, _, err := rolloutRun(t, f, ctx, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "cancelled; state left behind:") || !strings.Contains(err.Error(), "was rolled back") {
		t.Fatalf("err %v", err)
	}
	if ui.Contains("context canceled") {
		t.Errorf("UI shows the context error")
	}
	if f.CountCalls("RollbackInstanceRefresh", 200) == 0 {
		t.Errorf("no rollback")
	}
	for _, g := range []struct{ region, name string }{{"eu-west-1", "web"}, {"us-east-1", "web-us"}} {
		if st := f.GroupState(g.region, g.name).Refreshes[0].Status; st != "RollbackSuccessful" {
			t.Errorf("%s: %s", g.name, st)
		}
	}
}
