//go:generate go tool packer-sdc mapstructure-to-hcl2 -type Config

package image

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/packer-plugin-sdk/common"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hashicorp/packer-plugin-sdk/template/config"
	"github.com/hashicorp/packer-plugin-sdk/template/interpolate"
	hpimage "github.com/hotpath-dev/hotpath/image"
)

// Config is the hotpath-image builder's configuration.
type Config struct {
	common.PackerConfig `mapstructure:",squash"`

	// Directory for the disk image (hotpath.img) and manifest.json;
	// default output-<build name>. It must not exist unless packer build
	// runs with -force.
	OutputDir string `mapstructure:"output_directory"`
	// The hotpath source tree (the init is built from it, and the default
	// workload); default: found from the working directory upwards. Not
	// needed when init_binary and workload_binary (or workload with
	// workload_dir) are given: then packer build runs anywhere.
	HotpathRoot string `mapstructure:"hotpath_root"`
	// The image's CPU architecture: "amd64" (the default) or "arm64"
	// (Graviton): the kernel is cross-built, the init and the workload
	// cross-compiled, and the manifest records it for hotpath-ami.
	Architecture string `mapstructure:"architecture"`
	// A prebuilt static linux hotpath init (PID 1) for architecture
	// instead of building ./init from hotpath_root; `make plugin-release`
	// ships one per architecture next to the plugin.
	InitBinary string `mapstructure:"init_binary"`
	// The workload as a Go package: an import path or a ./relative path,
	// built statically in workload_dir; default hotpath's JSON server.
	Workload string `mapstructure:"workload"`
	// The module directory workload is built in; default hotpath_root.
	WorkloadDir string `mapstructure:"workload_dir"`
	// The workload as a prebuilt static linux binary for architecture,
	// instead of workload.
	WorkloadBinary string `mapstructure:"workload_binary"`
	// An init.conf (key=value lines) baked into the image; default every
	// key at its default.
	InitConfigFile string `mapstructure:"init_config_file"`
	// init.conf settings, applied after init_config_file.
	InitConfig map[string]string `mapstructure:"init_config"`
	// Kernel source tree or tarball; default Debian's linux-source-6.12.
	KernelSource string `mapstructure:"kernel_source"`
	// Appended to the kernel's built-in command line; hotpath.<key>=<value>
	// words override init.conf at boot.
	KernelCmdline string `mapstructure:"kernel_cmdline"`
	// Cache for kernel builds; default $HOTPATH_CACHE, else
	// $XDG_CACHE_HOME/hotpath, else ~/.cache/hotpath.
	CacheDir string `mapstructure:"cache_dir"`
	// Parallel kernel compile jobs; default the number of CPUs.
	Jobs int `mapstructure:"jobs"`
	// Timestamp for everything in the image; default $SOURCE_DATE_EPOCH,
	// else 0.
	SourceDateEpoch *int64 `mapstructure:"source_date_epoch"`

	ctx interpolate.Context
}

// DefaultArchitecture is the architecture built when the template does
// not say.
const DefaultArchitecture = "amd64"

// Architectures lists the values architecture accepts, in Go's names (as
// image.Options.Arch and the manifest spell them).
var Architectures = []string{"amd64", "arm64"}

// Prepare decodes, defaults and validates; every problem is reported.
func (c *Config) Prepare(raws ...interface{}) ([]string, error) {
	err := config.Decode(c, &config.DecodeOpts{
		PluginType:         BuilderID,
		Interpolate:        true,
		InterpolateContext: &c.ctx,
	}, raws...)
	if err != nil {
		return nil, err
	}
	var (
		errs     *packersdk.MultiError
		warnings []string
	)
	add := func(format string, args ...any) {
		errs = packersdk.MultiErrorAppend(errs, fmt.Errorf(format, args...))
	}

	if c.Architecture == "" {
		c.Architecture = DefaultArchitecture
	}
	if !slices.Contains(Architectures, c.Architecture) {
		add("architecture %q is not supported: hotpath builds %s images (Go's names: amd64 for x86_64, arm64 for aarch64/Graviton)",
			c.Architecture, strings.Join(Architectures, " or "))
	}
	if c.OutputDir == "" {
		name := c.PackerBuildName
		if name == "" {
			name = "hotpath"
		}
		c.OutputDir = "output-" + name
	}
	if _, err := os.Stat(c.OutputDir); err == nil && !c.PackerForce {
		add("output_directory %s exists; delete it or run packer build -force", c.OutputDir)
	}
	// The source tree is needed for what is built from it: the init
	// unless init_binary is given, the default workload.
	needRoot := c.InitBinary == "" || c.WorkloadBinary == "" && c.WorkloadDir == ""
	if c.HotpathRoot == "" {
		wd, err := os.Getwd()
		if err == nil {
			c.HotpathRoot, err = hpimage.FindRoot(wd)
		}
		if err != nil && needRoot {
			add("the working directory is not in the hotpath tree (%v): set hotpath_root, or give init_binary and "+
				"workload_binary (or workload with workload_dir) to build outside it", err)
		}
		if err != nil {
			c.HotpathRoot = ""
		}
	} else if _, err := os.Stat(filepath.Join(c.HotpathRoot, "go.mod")); err != nil {
		add("hotpath_root %s is not a Go module: %v", c.HotpathRoot, err)
	}
	if c.InitBinary != "" {
		if fi, err := os.Stat(c.InitBinary); err != nil {
			add("init_binary: %v", err)
		} else if !fi.Mode().IsRegular() {
			add("init_binary %s is not a file", c.InitBinary)
		}
	}
	if c.Workload != "" && c.WorkloadBinary != "" {
		add("workload and workload_binary are exclusive")
	}
	if c.WorkloadDir != "" && c.Workload == "" {
		add("workload_dir needs workload")
	}
	if c.WorkloadDir != "" {
		if fi, err := os.Stat(c.WorkloadDir); err != nil || !fi.IsDir() {
			add("workload_dir %s is not a directory", c.WorkloadDir)
		}
	}
	if c.WorkloadBinary != "" {
		if fi, err := os.Stat(c.WorkloadBinary); err != nil {
			add("workload_binary: %v", err)
		} else if !fi.Mode().IsRegular() {
			add("workload_binary %s is not a file", c.WorkloadBinary)
		}
	}
	if c.KernelSource != "" {
		if _, err := os.Stat(c.KernelSource); err != nil {
			add("kernel_source: %v", err)
		}
	}
	if c.Jobs < 0 {
		add("jobs must not be negative")
	}
	if e := c.SourceDateEpoch; e != nil && (*e < 0 || *e > 1<<32-1) {
		add("source_date_epoch %d is outside 0..2^32-1", *e)
	}
	if strings.ContainsAny(c.KernelCmdline, "\n\x00") {
		add("kernel_cmdline must be one line")
	}

	// Check the init configuration and the command line's hotpath.*
	// words now, with the image package's checker (the init's own
	// parser), rather than after a kernel build.
	text, err := c.initConf()
	if err != nil {
		add("%v", err)
	} else if _, err := hpimage.CheckConfig([]byte(text), c.KernelCmdline); err != nil {
		add("%v", err)
	}

	if errs != nil && len(errs.Errors) > 0 {
		return warnings, errs
	}
	return warnings, nil
}

// initConf returns the init.conf text to bake: init_config_file followed
// by init_config (later lines win), or "" when neither is set.
func (c *Config) initConf() (string, error) {
	var b bytes.Buffer
	if c.InitConfigFile != "" {
		data, err := os.ReadFile(c.InitConfigFile)
		if err != nil {
			return "", fmt.Errorf("init_config_file: %w", err)
		}
		b.Write(data)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	keys := make([]string, 0, len(c.InitConfig))
	for k := range c.InitConfig {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := c.InitConfig[k]
		if k == "" || strings.ContainsAny(k, "=\n#") || strings.Contains(v, "\n") {
			return "", fmt.Errorf("init_config: %q must be one key=value line", k)
		}
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	return b.String(), nil
}
