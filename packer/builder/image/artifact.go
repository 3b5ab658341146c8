package image

import (
	"fmt"
	"os"
)

// Artifact is the raw disk image and its manifest on the local disk.
type Artifact struct {
	Disk, Manifest, DiskSHA256 string
	// Architecture is the manifest's: "amd64" or "arm64" (Go's names).
	Architecture string
	StateData    map[string]interface{}
}

func (a *Artifact) BuilderId() string { return BuilderID }

// Files lists the disk first: hotpath-ami takes the .img file.
func (a *Artifact) Files() []string { return []string{a.Disk, a.Manifest} }

func (a *Artifact) Id() string { return a.DiskSHA256 }

func (a *Artifact) String() string {
	return fmt.Sprintf("hotpath %s disk image %s (sha256 %s), manifest %s", a.Architecture, a.Disk, a.DiskSHA256, a.Manifest)
}

// State answers "disk_image", "manifest", "disk_sha256", "architecture"
// (the manifest's, for hotpath-ami's AMI architecture) and the generated
// data.
func (a *Artifact) State(name string) interface{} {
	switch name {
	case "disk_image":
		return a.Disk
	case "manifest":
		return a.Manifest
	case "disk_sha256":
		return a.DiskSHA256
	case "architecture":
		return a.Architecture
	}
	return a.StateData[name]
}

func (a *Artifact) Destroy() error {
	for _, f := range a.Files() {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}
