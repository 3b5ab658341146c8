package image

import (
	"fmt"
	"os"
)

// Artifact is the raw disk image and its manifest on the local disk.
type Artifact struct {
	Disk, Manifest, DiskSHA256 string
	StateData                  map[string]interface{}
}

func (a *Artifact) BuilderId() string { return BuilderID }

// Files lists the disk first: hotpath-ami takes the .img file.
func (a *Artifact) Files() []string { return []string{a.Disk, a.Manifest} }

func (a *Artifact) Id() string { return a.DiskSHA256 }

func (a *Artifact) String() string {
	return fmt.Sprintf("hotpath disk image %s (sha256 %s), manifest %s", a.Disk, a.DiskSHA256, a.Manifest)
}

// State answers "disk_image", "manifest", "disk_sha256" and the generated
// data.
func (a *Artifact) State(name string) interface{} {
	switch name {
	case "disk_image":
		return a.Disk
	case "manifest":
		return a.Manifest
	case "disk_sha256":
		return a.DiskSHA256
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
