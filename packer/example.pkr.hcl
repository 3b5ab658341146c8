# hotpath: build the tuned appliance and register it as an AMI.
#
#   cd packer && go build -o packer-plugin-hotpath ./cmd/packer-plugin-hotpath
#   packer plugins install --path ./packer-plugin-hotpath github.com/hotpath-dev/hotpath
#   packer build -var version=1.0.0 example.pkr.hcl        # from inside the hotpath tree
#
# Credentials and the rest of the AWS configuration come from the standard
# chain (AWS_PROFILE, ~/.aws, SSO, environment, instance role); the IAM
# principal needs ebs:StartSnapshot, ebs:PutSnapshotBlock,
# ebs:CompleteSnapshot, ec2:DescribeSnapshots, ec2:DeleteSnapshot,
# ec2:RegisterImage, ec2:DescribeImages, ec2:DeregisterImage,
# ec2:CreateTags, ec2:CopyImage and ec2:ModifyImageAttribute (plus
# kms:GenerateDataKeyWithoutPlaintext / kms:CreateGrant with encrypt_boot).

# Needed only when installing a released plugin with `packer init`; a
# locally built one installed with `packer plugins install --path` is found
# without it.
# packer {
#   required_plugins {
#     hotpath = {
#       source  = "github.com/hotpath-dev/hotpath"
#       version = ">= 0.1.0"
#     }
#   }
# }

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
    # encrypt_boot = true
    # kms_key_id   = "arn:aws:kms:eu-west-1:111122223333:key/..."
    # ami_regions  = ["us-east-1"]
    # ami_users    = ["111122223333"]
  }
}
