package ami

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hotpath-dev/hotpath/image/manifest"
)

// Architectures lists the values architecture accepts, in EC2's names:
// the CPU architectures hotpath builds images for.
var Architectures = []string{"x86_64", "arm64"}

// amiArchitecture maps a manifest's architecture (Go's name) to EC2's.
// A manifest without one predates arm64 images and is amd64.
var amiArchitecture = map[string]string{"": "x86_64", "amd64": "x86_64", "arm64": "arm64"}

// imageArchitecture is the AMI architecture the input artifact's image is
// built for, and where that was read; "" when the artifact has no hotpath
// manifest (another builder's disk). The hotpath-image builder's artifact
// answers State("architecture") from its manifest; any other artifact
// with a manifest (State("manifest"), or a manifest.json among its files)
// has it read here. A manifest that is named but cannot be read is an
// error: registering an AMI for the wrong architecture gives an image no
// instance can boot.
func imageArchitecture(a packersdk.Artifact) (arch, from string, err error) {
	if a == nil {
		return "", "", nil
	}
	goarch, _ := a.State("architecture").(string)
	from = "the input artifact's manifest"
	if goarch == "" {
		path, _ := a.State("manifest").(string)
		for _, f := range a.Files() {
			if path == "" && filepath.Base(f) == "manifest.json" {
				path = f
			}
		}
		if path == "" {
			return "", "", nil
		}
		m, err := manifest.ReadFile(path)
		if err != nil {
			return "", "", fmt.Errorf("the input artifact's %w", err)
		}
		goarch, from = m.Architecture, path
	}
	arch, ok := amiArchitecture[goarch]
	if !ok {
		return "", "", fmt.Errorf("%s: architecture %q has no AMI architecture (hotpath builds amd64 and arm64)", from, goarch)
	}
	return arch, from, nil
}

// resolveArchitecture is the architecture to register: the configured one
// if set, which must agree with the image's, else the image's, else
// x86_64.
func resolveArchitecture(configured string, a packersdk.Artifact) (string, error) {
	arch, from, err := imageArchitecture(a)
	switch {
	case err != nil:
		return "", err
	case configured == "" && arch == "":
		return Architectures[0], nil
	case configured == "":
		return arch, nil
	case arch != "" && arch != configured:
		return "", fmt.Errorf("architecture = %q, but the image is built for %s (%s): the AMI would not boot; "+
			"leave architecture unset to take the image's, or build the image for %s", configured, arch, from, configured)
	}
	return configured, nil
}

// checkArchitecture validates the architecture setting; "" is left for
// the input artifact to decide at PostProcess.
func checkArchitecture(arch string, add func(string, ...any)) {
	if arch != "" && !slices.Contains(Architectures, arch) {
		add("architecture = %q is not supported: hotpath builds %s images (EC2's names; the builder's amd64 is x86_64)",
			arch, strings.Join(Architectures, " and "))
	}
}
