//go:build !(linux || darwin)

package main

import "github.com/hashicorp/packer-plugin-sdk/plugin"

// registerBuilders registers no builder: hotpath-image's kernel build and
// sparse disk writer use Linux (and BSD) system calls that Windows and the
// other BSDs lack. The post-processors, which only talk to AWS, run here;
// build the image on Linux and hand it over (or run hotpath-ami after an
// amazon builder).
func registerBuilders(*plugin.Set) {}
