// Package ami is the hotpath-ami post-processor: it uploads the raw disk
// image of its input artifact into an EBS snapshot with the EBS direct
// APIs and registers it as a UEFI, ENA, IMDSv2-only AMI for the image's
// architecture (x86_64 or arm64, from its manifest), optionally
// copied to more regions and shared. Whatever it created is deleted again
// when a step fails or the build is cancelled.
package ami

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/packer-plugin-sdk/multistep"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
)

// PostProcessor implements packersdk.PostProcessor.
type PostProcessor struct {
	config   Config
	warnings []string

	// Hooks for tests; zero values are the production behaviour.
	loadOptions   []func(*awsconfig.LoadOptions) error
	progressEvery time.Duration
}

var _ packersdk.PostProcessor = (*PostProcessor)(nil)

func (p *PostProcessor) ConfigSpec() hcldec.ObjectSpec { return p.config.FlatMapstructure().HCL2Spec() }

// Configure decodes and validates the configuration. Warnings are shown
// when the post-processor runs, as Configure has no UI.
func (p *PostProcessor) Configure(raws ...interface{}) error {
	w, err := p.config.Prepare(raws...)
	p.warnings = w
	return err
}

// PostProcess turns the input artifact's raw disk into AMIs. The input
// artifact is kept unless the template says otherwise: the disk image is
// the build's other deliverable (the same bytes boot in QEMU).
func (p *PostProcessor) PostProcess(ctx context.Context, ui packersdk.Ui, in packersdk.Artifact) (packersdk.Artifact, bool, bool, error) {
	for _, w := range p.warnings {
		ui.Say("Warning: " + w)
	}
	path, err := diskImage(p.config.ImagePath, in)
	if err != nil {
		return nil, true, false, err
	}
	// This run's configuration: the architecture follows the input
	// artifact, and the configured value stays for the next run.
	c := p.config
	if c.Architecture, err = resolveArchitecture(p.config.Architecture, in); err != nil {
		return nil, true, false, err
	}
	if c.BootMode, err = resolveBootMode(&c, in); err != nil {
		return nil, true, false, err
	}
	pcrs, err := imageMeasurements(in, c.uefiVars)
	if err != nil {
		return nil, true, false, err
	}
	cl, err := newClients(ctx, &c.AccessConfig, p.loadOptions...)
	if err != nil {
		return nil, true, false, err
	}

	state := new(multistep.BasicStateBag)
	state.Put(keyConfig, &c)
	state.Put(keyUI, ui)
	state.Put(keyClients, cl)
	state.Put(keyImagePath, path)
	runner := &multistep.BasicRunner{Steps: []multistep.Step{
		&stepPreValidate{},
		&stepUpload{progressEvery: p.progressEvery},
		&stepRegister{},
		&stepCopy{},
		&stepLaunchPermissions{},
		&stepProtect{},
	}}
	runner.Run(ctx, state)

	if err := outcome(state); err != nil {
		return nil, true, false, err
	}
	a := &Artifact{
		Amis:         state.Get(keyAMIs).(map[string]string),
		Snapshots:    state.Get(keySnapshots).(map[string]string),
		SourceImage:  path,
		BuildRegion:  p.config.RawRegion,
		DiskSHA256:   diskSHA256(in),
		Architecture: c.Architecture,
		PCRs:         pcrs,
		clients:      cl,
	}
	return a, true, false, nil
}

// outcome turns a failed or cancelled run into the error Packer shows:
// what happened, then whether the clean-up left anything behind.
func outcome(state multistep.StateBag) error {
	err, failed := state.GetOk(keyError)
	_, cancelled := state.GetOk(multistep.StateCancelled)
	if !failed && !cancelled {
		return nil
	}
	msg := "cancelled"
	if failed && err != errCancelled {
		msg = err.(error).Error()
	}
	if l, _ := state.Get(keyLeftovers).([]string); len(l) > 0 {
		return fmt.Errorf("%s; left behind, delete by hand: %s", msg, strings.Join(l, ", "))
	}
	if failed && err != errCancelled {
		return fmt.Errorf("%w; everything created was deleted", err.(error))
	}
	return fmt.Errorf("%s; everything created was deleted", msg)
}

// diskSHA256 is the input disk's sha256 when the artifact knows it (the
// hotpath-image builder's does), for the HCP Packer registry.
func diskSHA256(a packersdk.Artifact) string {
	if a == nil {
		return ""
	}
	if s, ok := a.State("disk_sha256").(string); ok {
		return s
	}
	return ""
}

// diskImage finds the raw disk to upload: image_path if set, else the
// artifact's .img or .raw file.
func diskImage(override string, a packersdk.Artifact) (string, error) {
	path := override
	if path == "" && a != nil {
		if s, ok := a.State("disk_image").(string); ok && s != "" {
			path = s
		}
		for _, f := range a.Files() {
			if path != "" {
				break
			}
			if ext := strings.ToLower(filepath.Ext(f)); ext == ".img" || ext == ".raw" {
				path = f
			}
		}
	}
	if path == "" {
		return "", errNoImage
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("disk image: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("disk image %s is not a regular file", path)
	}
	return path, nil
}
