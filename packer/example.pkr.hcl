# hotpath: build the tuned appliance and register it as an AMI.
#
# Install the plugin (no Packer download of it is needed):
#
#   make plugin-release PLUGIN_VERSION=0.1.0     # in the hotpath tree
#   packer plugins install --path packer/dist/packer-plugin-hotpath_v0.1.0_x5.0_linux_amd64 \
#       github.com/hotpath-dev/hotpath
#   packer init example.pkr.hcl                  # satisfied by the install above
#   packer build -var version=1.0.0 example.pkr.hcl
#
# `packer init` downloads only when no installed version matches: it would
# look for the release assets of github.com/hotpath-dev/packer-plugin-hotpath
# (Packer adds the packer-plugin- prefix to the repository name); upload
# packer/dist/*.zip, *_SHA256SUMS and *_manifest.json there as release
# v0.1.0 to make that work for everyone.
#
# Run from inside the hotpath tree (the init is built from it), or set
# init_binary = "hotpath-init_v0.1.0_linux_amd64" (shipped next to the
# plugin) and workload_binary to build anywhere.
#
# Credentials and the rest of the AWS configuration come from the standard
# chain (AWS_PROFILE, ~/.aws, SSO, environment, instance role); the IAM
# principal needs ebs:StartSnapshot, ebs:PutSnapshotBlock,
# ebs:CompleteSnapshot, ec2:DescribeSnapshots, ec2:DeleteSnapshot,
# ec2:RegisterImage, ec2:DescribeImages, ec2:DeregisterImage,
# ec2:CreateTags, ec2:CopyImage and ec2:ModifyImageAttribute (plus
# kms:GenerateDataKeyWithoutPlaintext / kms:CreateGrant with encrypt_boot).
# example-fleet.pkr.hcl goes on to roll the AMI onto an Auto Scaling group.

packer {
  required_plugins {
    hotpath = {
      source  = "github.com/hotpath-dev/hotpath"
      version = ">= 0.1.0"
    }
  }
}

variable "version" {
  type    = string
  default = "dev"
}

variable "region" {
  type    = string
  default = "eu-west-1"
}

source "hotpath-image" "json" {
  # Defaults: hotpath's own JSON server as the workload, Debian's
  # linux-source-6.1, the kernel cache in ~/.cache/hotpath.
  # workload        = "./cmd/myserver"         # your own Go package ...
  # workload_dir    = "/src/myserver"          # ... built in this module
  # workload_binary = "/path/to/static-binary" # or a prebuilt static binary
  # init_binary     = "hotpath-init_v0.1.0_linux_amd64" # outside the hotpath tree
  # architecture    = "arm64" # Graviton; hotpath-ami registers an arm64 AMI
  output_directory = "output-hotpath-${var.version}"
  # kernel_cmdline = "hotpath.workload.port=8080" # init.conf overrides at boot
  init_config = {
    "nic.rx_usecs" = "20"
  }
}

build {
  sources = ["source.hotpath-image.json"]

  post-processor "hotpath-ami" {
    region          = var.region
    ami_name        = "hotpath-${var.version}-${formatdate("YYYYMMDDhhmmss", timestamp())}"
    ami_description = "hotpath ${var.version}: tuned JSON API appliance (UEFI, ENA, IMDSv2)"
    tags = {
      Name    = "hotpath"
      Version = var.version
    }
    snapshot_tags = {
      Name = "hotpath-${var.version}-root"
    }
    # encrypt_boot       = true
    # kms_key_id         = "arn:aws:kms:eu-west-1:111122223333:key/..."
    # ami_regions        = ["us-east-1"]
    # region_kms_key_ids = { "us-east-1" = "arn:aws:kms:us-east-1:111122223333:key/..." }
    # ami_users          = ["111122223333"] # sharing encrypted AMIs needs the keys above
    # force_deregister   = true             # replace an AMI of the same name
  }
}
