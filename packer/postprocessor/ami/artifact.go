package ami

import (
	"context"
	"fmt"
	"sort"
	"strings"

	registryimage "github.com/hashicorp/packer-plugin-sdk/packer/registry/image"
	"github.com/hotpath-dev/hotpath/image/manifest"
)

// BuilderID identifies artifacts of this post-processor.
const BuilderID = "hotpath.post-processor.ami"

// Artifact is a set of AMIs, one per region, like the amazon plugin's.
type Artifact struct {
	// Amis maps region to AMI id.
	Amis map[string]string
	// Snapshots maps region to the AMI's root snapshot id.
	Snapshots map[string]string
	// SourceImage is the raw disk the AMIs were made from.
	SourceImage string
	// BuildRegion is where the AMI was registered; the others are copies.
	BuildRegion string
	// DiskSHA256 is that disk's sha256, when the input artifact said.
	DiskSHA256 string
	// Architecture is what the AMIs are registered as: x86_64 or arm64.
	Architecture string
	// PCRs are the image's reference PCR values (its manifest's
	// measurements): what a KMS key policy for an attestable AMI names.
	PCRs []manifest.Measurement

	clients *clients
}

func (a *Artifact) BuilderId() string { return BuilderID }

// Files is empty: AMIs live in AWS.
func (a *Artifact) Files() []string { return nil }

// Id is "region:ami-id" pairs, comma separated, sorted by region (the
// amazon plugin's format, which tools parse).
func (a *Artifact) Id() string {
	var parts []string
	for _, r := range sortedRegions(a.Amis) {
		parts = append(parts, r+":"+a.Amis[r])
	}
	return strings.Join(parts, ",")
}

func (a *Artifact) String() string {
	var b strings.Builder
	b.WriteString("AMIs were created:\n")
	for _, r := range sortedRegions(a.Amis) {
		fmt.Fprintf(&b, "%s: %s\n", r, a.Amis[r])
	}
	return b.String()
}

// State answers the HCP Packer registry's query, the ids by name and the
// AMIs' architecture.
func (a *Artifact) State(name string) interface{} {
	switch name {
	case registryimage.ArtifactStateURI:
		return a.registryImages()
	case "amis":
		return a.Amis
	case "snapshots":
		return a.Snapshots
	case "architecture":
		return a.Architecture
	case "pcrs":
		return a.PCRs
	}
	return nil
}

// Destroy deregisters every AMI and deletes its snapshot.
func (a *Artifact) Destroy() error {
	if a.clients == nil {
		return fmt.Errorf("artifact %s: no AWS clients to destroy it with", a.Id())
	}
	var errs []string
	regions := make([]string, 0, len(a.Amis))
	for r := range a.Amis {
		regions = append(regions, r)
	}
	sort.Strings(regions)
	for _, r := range regions {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		err := deleteImage(ctx, a.clients.ec2(r), a.Amis[r], DefaultPollInterval, false)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", r, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("destroy AMIs: %s", strings.Join(errs, "; "))
	}
	return nil
}

// registryImages describes the AMIs for the HCP Packer registry. The
// AMIs are built from a disk, not from another AMI: the one registered
// from the upload has no source image id (the disk's sha256 and the
// snapshot are labels); each copy's source is that AMI.
func (a *Artifact) registryImages() []*registryimage.Image {
	var imgs []*registryimage.Image
	for _, r := range sortedRegions(a.Amis) {
		im := &registryimage.Image{
			ImageID: a.Amis[r], ProviderName: "aws", ProviderRegion: r,
			Labels: map[string]string{},
		}
		if r != a.BuildRegion {
			im.SourceImageID = a.Amis[a.BuildRegion]
			im.Labels["source_region"] = a.BuildRegion
		}
		if a.DiskSHA256 != "" {
			im.Labels["disk_sha256"] = a.DiskSHA256
		}
		if s := a.Snapshots[r]; s != "" {
			im.Labels["snapshot_id"] = s
		}
		if a.Architecture != "" {
			im.Labels["architecture"] = a.Architecture
		}
		for _, m := range a.PCRs {
			im.Labels[fmt.Sprintf("pcr%d_sha256", m.PCR)] = m.SHA256
			im.Labels[fmt.Sprintf("pcr%d_sha384", m.PCR)] = m.SHA384
		}
		imgs = append(imgs, im)
	}
	return imgs
}
