package image

import (
	"context"
	"io"
	"os"

	hpimage "github.com/hotpath-dev/hotpath/image"
)

// built is what one image build produced.
type built struct {
	Disk, Manifest string
	DiskSHA256     string
	Arch           string // the manifest's architecture
	Size           int64
	Summary        string
}

// buildImage is the one place that talks to hotpath's image package: it
// maps the template's settings onto image.Options and runs the build.
func buildImage(ctx context.Context, c *Config, kernel hpimage.KernelBuilder, log io.Writer) (*built, error) {
	o := hpimage.Options{
		Out:             c.OutputDir,
		Arch:            c.Architecture,
		Root:            c.HotpathRoot,
		Cmdline:         c.KernelCmdline,
		KernelSource:    c.KernelSource,
		CacheDir:        c.CacheDir,
		Jobs:            c.Jobs,
		SourceDateEpoch: c.SourceDateEpoch,
		Log:             log,
		Kernel:          kernel,
	}
	if c.InitBinary != "" {
		o.Init = hpimage.Program{Binary: c.InitBinary}
	}
	if o.Root == "" {
		// Outside the hotpath tree: everything comes from given paths;
		// the go command (for its version in the manifest) runs here.
		o.Root = c.WorkloadDir
		if o.Root == "" {
			o.Root = os.TempDir()
		}
	}
	switch {
	case c.WorkloadBinary != "":
		o.Workload = hpimage.Program{Binary: c.WorkloadBinary}
	case c.Workload != "":
		o.Workload = hpimage.Program{Package: c.Workload, Dir: c.WorkloadDir}
	}
	text, err := c.initConf()
	if err != nil {
		return nil, err
	}
	if text != "" {
		o.InitConfig = []byte(text)
	}
	res, err := hpimage.Build(ctx, o)
	if err != nil {
		return nil, err
	}
	return &built{
		Disk: res.Disk, Manifest: res.Manifest, DiskSHA256: res.DiskSHA256, Arch: res.M.Architecture,
		Size: res.DiskSize, Summary: res.Summary(),
	}, nil
}
