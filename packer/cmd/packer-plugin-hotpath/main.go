// Command packer-plugin-hotpath is the hotpath Packer plugin: the builder
// hotpath-image (the appliance disk image) and the post-processor
// hotpath-ami (that disk as an AMI, uploaded with the EBS direct APIs),
// and the post-processor hotpath-rollout (the AMIs onto a fleet: SSM
// parameter, launch template version, Instance Refresh).
//
// The post-processors run on every platform the plugin is released for;
// the builder only where it can build the appliance (see builder_*.go).
//
// Packer starts it; run alone it only answers `describe`. Install a local
// build with `packer plugins install --path packer-plugin-hotpath
// github.com/hotpath-dev/hotpath`.
package main

import (
	"fmt"
	"os"

	"github.com/hashicorp/packer-plugin-sdk/plugin"
	"github.com/hotpath-dev/hotpath/packer/postprocessor/ami"
	"github.com/hotpath-dev/hotpath/packer/postprocessor/rollout"
	"github.com/hotpath-dev/hotpath/packer/version"
)

func main() {
	pps := plugin.NewSet()
	registerBuilders(pps)
	pps.RegisterPostProcessor("ami", new(ami.PostProcessor))
	pps.RegisterPostProcessor("rollout", new(rollout.PostProcessor))
	pps.SetVersion(version.Version)
	if err := pps.Run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
