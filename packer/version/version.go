// Package version is the plugin's version, reported by `describe` and
// checked by Packer when the plugin is installed.
package version

import sdkversion "github.com/hashicorp/packer-plugin-sdk/version"

// Set at release time with -ldflags "-X
// github.com/hotpath-dev/hotpath/packer/version.version=...".
var (
	version           = "0.1.0"
	versionPrerelease = "dev"
	versionMetadata   = ""
)

// Version is the plugin version as the SDK wants it.
var Version = sdkversion.NewPluginVersion(version, versionPrerelease, versionMetadata)
