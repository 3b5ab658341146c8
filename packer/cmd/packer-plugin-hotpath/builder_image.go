//go:build linux || darwin

package main

import (
	"github.com/hashicorp/packer-plugin-sdk/plugin"
	"github.com/hotpath-dev/hotpath/packer/builder/image"
)

// registerBuilders registers hotpath-image. It builds the appliance from
// source (kernel, static binaries, disk), which needs Linux; it also
// compiles on macOS, where it was released before.
func registerBuilders(pps *plugin.Set) {
	pps.RegisterBuilder("image", new(image.Builder))
}
