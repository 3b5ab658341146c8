// Package image is the hotpath-image builder: it runs hotpath's image
// package (workload and init built statically, deterministic initramfs,
// kernel with both built in, UEFI-bootable GPT raw disk, manifest) and
// yields the disk and manifest as its artifact, ready for hotpath-ami.
package image

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2/hcldec"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	hpimage "github.com/hotpath-dev/hotpath/image"
)

// BuilderID identifies artifacts of this builder.
const BuilderID = "hotpath.builder.image"

// Builder implements packersdk.Builder.
type Builder struct {
	config Config
	// kernel builds the kernel; nil means the real one (kernel-config).
	// Tests use a stand-in to exercise Run without a kernel build.
	kernel hpimage.KernelBuilder
}

var _ packersdk.Builder = (*Builder)(nil)

func (b *Builder) ConfigSpec() hcldec.ObjectSpec { return b.config.FlatMapstructure().HCL2Spec() }

func (b *Builder) Prepare(raws ...interface{}) ([]string, []string, error) {
	warnings, err := b.config.Prepare(raws...)
	if err != nil {
		return nil, warnings, err
	}
	// Generated variables, usable as build.<name> in later blocks.
	return []string{"DiskImage", "Manifest", "DiskSHA256", "Architecture"}, warnings, nil
}

// Run builds the image into the output directory. On failure or cancel
// the output directory is removed again if this run created it.
func (b *Builder) Run(ctx context.Context, ui packersdk.Ui, hook packersdk.Hook) (packersdk.Artifact, error) {
	c := &b.config
	created := false
	if _, err := os.Stat(c.OutputDir); errors.Is(err, os.ErrNotExist) {
		created = true
	} else if c.PackerForce {
		ui.Say("Removing " + c.OutputDir + " (-force)")
		if err := os.RemoveAll(c.OutputDir); err != nil {
			return nil, fmt.Errorf("remove output directory: %w", err)
		}
		created = true
	}
	if err := os.MkdirAll(c.OutputDir, 0o755); err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	}

	ui.Say("Building the hotpath appliance image in " + c.OutputDir + "...")
	log := uiWriter(ui)
	res, err := buildImage(ctx, c, b.kernel, log)
	log.Close()
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		if created {
			ui.Say("Removing " + c.OutputDir + " (the build failed or was cancelled)")
			os.RemoveAll(c.OutputDir)
		}
		return nil, fmt.Errorf("hotpath image: %w", err)
	}
	ui.Say(strings.TrimRight(res.Summary, "\n"))
	return &Artifact{
		Disk: res.Disk, Manifest: res.Manifest, DiskSHA256: res.DiskSHA256, Architecture: res.Arch,
		StateData: map[string]interface{}{"generated_data": map[string]interface{}{
			"DiskImage": res.Disk, "Manifest": res.Manifest, "DiskSHA256": res.DiskSHA256, "Architecture": res.Arch,
		}},
	}, nil
}

// uiWriter turns the image build's log lines into UI messages.
func uiWriter(ui packersdk.Ui) io.WriteCloser {
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			ui.Say(sc.Text())
		}
		io.Copy(io.Discard, pr)
	}()
	return &waitCloser{pw, &wg}
}

type waitCloser struct {
	*io.PipeWriter
	wg *sync.WaitGroup
}

func (w *waitCloser) Close() error {
	err := w.PipeWriter.Close()
	w.wg.Wait()
	return err
}
