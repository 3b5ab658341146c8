# The Packer integrations index reads this file and the generated
# components/ beside it from the plugin's release repository. Written by
# hand; `go run ./tools/webdocs` (in packer/) generates the rest.
integration {
  name        = "hotpath"
  description = "Build the hotpath appliance image, register it as an AMI and roll an Auto Scaling group onto it."
  identifier  = "packer/hotpath-dev/hotpath"
  docs {
    process_docs    = true
    readme_location = "./README.md"
    external_url    = "https://github.com/hotpath-dev/hotpath"
  }
  component {
    type = "builder"
    name = "hotpath-image"
    slug = "image"
  }
  component {
    type = "post-processor"
    name = "hotpath-ami"
    slug = "ami"
  }
  component {
    type = "post-processor"
    name = "hotpath-rollout"
    slug = "rollout"
  }
}
