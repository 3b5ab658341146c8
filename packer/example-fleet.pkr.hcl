# hotpath on a fleet: build the appliance, register the AMI, then roll an
# Auto Scaling group onto it (the reference deployment of README.md:
# launch template + Auto Scaling group + NLB target group whose health
# check asks the appliance's management port).
#
#   packer build -var version=1.0.0 example-fleet.pkr.hcl
#
# Besides hotpath-ami's permissions, the principal needs
# ssm:GetParameter, ssm:PutParameter, ssm:DeleteParameter,
# ec2:DescribeLaunchTemplateVersions, ec2:CreateLaunchTemplateVersion,
# ec2:ModifyLaunchTemplate, ec2:DescribeImages, ec2:DescribeInstanceTypes
# (the boot-mode check), autoscaling:DescribeAutoScalingGroups,
# autoscaling:StartInstanceRefresh,
# autoscaling:DescribeInstanceRefreshes, autoscaling:CancelInstanceRefresh
# and autoscaling:RollbackInstanceRefresh (and iam:PassRole for the
# template's instance profile).

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

variable "launch_template" {
  type    = string
  default = "hotpath"
}

variable "auto_scaling_group" {
  type    = string
  default = "hotpath"
}

source "hotpath-image" "json" {
  output_directory = "output-hotpath-${var.version}"
}

build {
  sources = ["source.hotpath-image.json"]

  post-processors {
    post-processor "hotpath-ami" {
      region   = var.region
      ami_name = "hotpath-${var.version}-${formatdate("YYYYMMDDhhmmss", timestamp())}"
      tags = {
        Name    = "hotpath"
        Version = var.version
      }
    }

    # Gets hotpath-ami's AMIs ("region:ami-…" pairs) and hands them over.
    post-processor "hotpath-rollout" {
      region        = var.region
      ssm_parameter = "/hotpath/prod/x86_64/latest/image_id"
      target {
        launch_template_name = var.launch_template
        set_default_version  = true
        auto_scaling_groups  = [var.auto_scaling_group]
      }
      # Zero downtime: launch new instances before old ones go, wait for
      # each to pass the target group's health check and warm up, pause
      # at half the fleet, roll back on failure or when the fleet's alarm
      # (deploy/fleet.yaml's UnhealthyHostsAlarm: targets failing the NLB
      # health check) goes into ALARM during the refresh.
      min_healthy_percentage = 100
      max_healthy_percentage = 150
      instance_warmup        = "60s"
      checkpoint_percentages = [50, 100]
      checkpoint_delay       = "10m"
      auto_rollback          = true
      alarms                 = ["${var.auto_scaling_group}-unhealthy-hosts"]
      refresh_timeout        = "2h"
    }
  }
}
