//go:generate go tool packer-sdc mapstructure-to-hcl2 -type Config,Target

package rollout

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/packer-plugin-sdk/common"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hashicorp/packer-plugin-sdk/template/config"
	"github.com/hashicorp/packer-plugin-sdk/template/interpolate"
	"github.com/hotpath-dev/hotpath/packer/postprocessor/ami"
)

// Target is one launch template in one region, and the Auto Scaling
// groups launched from it that are refreshed onto its new version.
type Target struct {
	// Region of the launch template and the groups; default region.
	Region string `mapstructure:"region"`
	// The launch template, by id (lt-…) or by name.
	LaunchTemplateID   string `mapstructure:"launch_template_id"`
	LaunchTemplateName string `mapstructure:"launch_template_name"`
	// The version the new one is copied from, with only the AMI changed
	// (default "$Default").
	SourceVersion string `mapstructure:"source_version"`
	// Make the new version the template's default (for groups and users
	// that launch "$Default").
	SetDefaultVersion bool `mapstructure:"set_default_version"`
	// Auto Scaling groups to move onto the new version with an Instance
	// Refresh; none: only the template version (and the parameter).
	AutoScalingGroups []string `mapstructure:"auto_scaling_groups"`
	// HTTPProtocolIPv6 enables the metadata service's IPv6 endpoint
	// ([fd00:ec2::254]) in the new version's metadata options, which the
	// appliance needs in an IPv6-only subnet (EC2's default is disabled).
	// The options are written whole, so the version also says IMDSv2
	// required and the endpoint enabled, as the appliance wants anyway.
	HTTPProtocolIPv6 bool `mapstructure:"http_protocol_ipv6"`
	// IPv6AddressCount requests that many IPv6 addresses on the primary
	// network interface (device index 0). EC2 replaces the source
	// version's network interfaces with the one given, so set it only
	// for templates that leave the interfaces (subnet, security groups)
	// to the Auto Scaling group; 0 leaves the interfaces alone.
	IPv6AddressCount int `mapstructure:"ipv6_address_count"`
}

// Config is the hotpath-rollout post-processor's configuration.
type Config struct {
	common.PackerConfig `mapstructure:",squash"`
	ami.AccessConfig    `mapstructure:",squash"`

	// SSM parameter that is set to each region's AMI id (data type
	// aws:ec2:image), Bottlerocket's convention, e.g.
	// /hotpath/prod/x86_64/latest/image_id. Launch templates may refer to
	// it as resolve:ssm:<name>, but Auto Scaling cannot roll a group back
	// to such a version: the reference fleet resolves it into an AMI id
	// when the stack is deployed instead.
	SSMParameter string `mapstructure:"ssm_parameter"`
	// Launch templates and groups to roll, one block each.
	Targets []Target `mapstructure:"target"`

	// Instance Refresh preferences, named as in the API.

	// Share of the group kept in service during the refresh (default 90).
	MinHealthyPercentage *int `mapstructure:"min_healthy_percentage"`
	// Share of the group's desired capacity it may grow to while
	// replacing (100..200; above 100, new instances start before old ones
	// stop: the zero-downtime setting with min_healthy_percentage = 100).
	MaxHealthyPercentage *int `mapstructure:"max_healthy_percentage"`
	// How long a new instance warms up before it counts as healthy
	// (default: the group's health check grace period).
	InstanceWarmup time.Duration `mapstructure:"instance_warmup"`
	// Percentages at which the refresh pauses for checkpoint_delay; the
	// last must be 100.
	CheckpointPercentages []int `mapstructure:"checkpoint_percentages"`
	// Pause at each checkpoint (default 1h when checkpoints are set).
	CheckpointDelay time.Duration `mapstructure:"checkpoint_delay"`
	// Leave instances that already run the new configuration alone
	// (default true).
	SkipMatching *bool `mapstructure:"skip_matching"`
	// Let Auto Scaling roll the group back when the refresh fails
	// (default true). Auto Scaling refuses it for a group on its launch
	// template's $Latest or $Default version or on a version whose ImageId
	// is resolve:ssm:; such a group stops the roll-out before any change.
	AutoRollback *bool `mapstructure:"auto_rollback"`
	// Names of CloudWatch alarms (up to 10) Auto Scaling watches during
	// each refresh (RefreshPreferences.AlarmSpecification): when one goes
	// into ALARM the refresh fails and, with auto_rollback, is rolled
	// back, e.g. the NLB target group's unhealthy host count. The alarms
	// must be in the group's region.
	Alarms []string `mapstructure:"alarms"`
	// What to do with a refresh still running when the build fails or is
	// cancelled: "rollback" (default: every instance back on the previous
	// version) or "cancel" (stop; instances already replaced stay).
	OnFailure string `mapstructure:"on_failure"`
	// How long to wait for the refreshes (default 2h); past it the
	// refresh counts as failed.
	RefreshTimeout time.Duration `mapstructure:"refresh_timeout"`
	// Pause between status polls (default 15s).
	PollInterval time.Duration `mapstructure:"poll_interval"`

	ctx interpolate.Context
}

// BuilderID identifies this post-processor's artifacts.
const BuilderID = "hotpath.post-processor.rollout"

// maxAlarms is AlarmSpecification's limit (Auto Scaling API Reference:
// "You can specify up to 10 alarms").
const maxAlarms = 10

// Defaults.
const (
	DefaultMinHealthy     = 90
	DefaultRefreshTimeout = 2 * time.Hour
	DefaultPollInterval   = 15 * time.Second
	DefaultCheckpoint     = time.Hour
)

var (
	regionRE  = regexp.MustCompile(`^[a-z]{2}(-iso[a-z]?)?(-gov)?-[a-z]+-\d+$`)
	ltIDRE    = regexp.MustCompile(`^lt-[0-9a-f]{8,17}$`)
	ltNameRE  = regexp.MustCompile(`^[a-zA-Z0-9().\-/_]{3,128}$`)
	ssmNameRE = regexp.MustCompile(`^/?[a-zA-Z0-9_.\-]+(/[a-zA-Z0-9_.\-]+)*$`)
	versionRE = regexp.MustCompile(`^(\$Default|\$Latest|[1-9][0-9]*)$`)
)

// Prepare decodes, defaults and validates; every problem is reported.
func (c *Config) Prepare(raws ...interface{}) ([]string, error) {
	err := config.Decode(c, &config.DecodeOpts{
		PluginType:         BuilderID,
		Interpolate:        true,
		InterpolateContext: &c.ctx,
	}, raws...)
	if err != nil {
		return nil, err
	}
	var (
		errs     *packersdk.MultiError
		warnings []string
	)
	add := func(format string, args ...any) {
		errs = packersdk.MultiErrorAppend(errs, fmt.Errorf(format, args...))
	}
	c.AccessConfig.Check(add)

	if p := c.SSMParameter; p != "" {
		lower := strings.ToLower(strings.TrimPrefix(p, "/"))
		switch {
		case len(p) > 1011 || !ssmNameRE.MatchString(p):
			add("ssm_parameter %q is not a parameter name (letters, digits, _ . - and / between levels)", p)
		case strings.HasPrefix(lower, "aws") || strings.HasPrefix(lower, "ssm"):
			add("ssm_parameter %q: names starting with aws or ssm are reserved", p)
		case strings.Count(p, "/") > 15:
			add("ssm_parameter %q has more than 15 levels", p)
		}
	}
	if c.SSMParameter == "" && len(c.Targets) == 0 {
		add("nothing to roll out: set ssm_parameter or at least one target block")
	}
	seen := map[string]bool{}
	for i := range c.Targets {
		t := &c.Targets[i]
		name := fmt.Sprintf("target %d", i+1)
		if t.Region == "" {
			t.Region = c.RawRegion
		} else if !c.SkipRegionValidation && !regionRE.MatchString(t.Region) {
			add("%s: region %q is not an AWS region name", name, t.Region)
		}
		switch {
		case (t.LaunchTemplateID == "") == (t.LaunchTemplateName == ""):
			add("%s: set exactly one of launch_template_id and launch_template_name", name)
		case t.LaunchTemplateID != "" && !ltIDRE.MatchString(t.LaunchTemplateID):
			add("%s: launch_template_id %q is not a launch template id (lt-…)", name, t.LaunchTemplateID)
		case t.LaunchTemplateName != "" && !ltNameRE.MatchString(t.LaunchTemplateName):
			add("%s: launch_template_name %q is not a launch template name", name, t.LaunchTemplateName)
		}
		if t.SourceVersion == "" {
			t.SourceVersion = "$Default"
		} else if !versionRE.MatchString(t.SourceVersion) {
			add("%s: source_version %q is not $Default, $Latest or a version number", name, t.SourceVersion)
		}
		for _, g := range t.AutoScalingGroups {
			switch {
			case g == "" || len(g) > 255:
				add("%s: auto_scaling_groups: %q is not a group name", name, g)
			case seen[t.Region+"/"+g]:
				add("%s: auto scaling group %s in %s is listed twice", name, g, t.Region)
			}
			seen[t.Region+"/"+g] = true
		}
		if t.IPv6AddressCount < 0 || t.IPv6AddressCount > 64 {
			add("%s: ipv6_address_count %d is not between 0 and 64", name, t.IPv6AddressCount)
		}
		if len(t.AutoScalingGroups) == 0 && !t.SetDefaultVersion {
			warnings = append(warnings, fmt.Sprintf("%s: no auto_scaling_groups and not set_default_version: the new version is only created", name))
		}
	}

	switch {
	case c.MinHealthyPercentage == nil:
		c.MinHealthyPercentage = new(int)
		*c.MinHealthyPercentage = DefaultMinHealthy
	case *c.MinHealthyPercentage < 0 || *c.MinHealthyPercentage > 100:
		add("min_healthy_percentage %d is outside 0..100", *c.MinHealthyPercentage)
	}
	if m := c.MaxHealthyPercentage; m != nil {
		switch {
		case *m < 100 || *m > 200:
			add("max_healthy_percentage %d is outside 100..200", *m)
		case *m-*c.MinHealthyPercentage > 100:
			add("max_healthy_percentage %d is more than 100 above min_healthy_percentage %d", *m, *c.MinHealthyPercentage)
		}
	} else if *c.MinHealthyPercentage == 100 {
		add("min_healthy_percentage = 100 needs max_healthy_percentage above 100 (new instances launch before old ones go)")
	}
	if c.InstanceWarmup < 0 || c.InstanceWarmup%time.Second != 0 {
		add("instance_warmup %s must be whole seconds, not negative", c.InstanceWarmup)
	}
	for i, p := range c.CheckpointPercentages {
		if p < 1 || p > 100 || i > 0 && p <= c.CheckpointPercentages[i-1] {
			add("checkpoint_percentages %v must ascend within 1..100", c.CheckpointPercentages)
			break
		}
	}
	if n := len(c.CheckpointPercentages); n > 0 && c.CheckpointPercentages[n-1] != 100 {
		add("checkpoint_percentages %v: the last must be 100", c.CheckpointPercentages)
	}
	switch {
	case c.CheckpointDelay < 0 || c.CheckpointDelay > 48*time.Hour || c.CheckpointDelay%time.Second != 0:
		add("checkpoint_delay %s must be whole seconds within 0..48h", c.CheckpointDelay)
	case c.CheckpointDelay != 0 && len(c.CheckpointPercentages) == 0:
		add("checkpoint_delay needs checkpoint_percentages")
	case c.CheckpointDelay == 0 && len(c.CheckpointPercentages) > 0:
		c.CheckpointDelay = DefaultCheckpoint
	}
	if c.SkipMatching == nil {
		c.SkipMatching = boolPtr(true)
	}
	if c.AutoRollback == nil {
		c.AutoRollback = boolPtr(true)
	}
	if len(c.Alarms) > maxAlarms {
		add("alarms: %d names, Auto Scaling watches at most %d", len(c.Alarms), maxAlarms)
	}
	for i, a := range c.Alarms {
		switch {
		case a == "" || len(a) > 255:
			add("alarms: %q is not an alarm name (1 to 255 characters)", a)
		case slices.Contains(c.Alarms[:i], a):
			add("alarms: %s is listed twice", a)
		}
	}
	if len(c.Alarms) > 0 && !*c.AutoRollback {
		warnings = append(warnings, "alarms without auto_rollback: an alarm fails the refresh, and the instances it replaced stay (the group is left mixed)")
	}
	if c.OnFailure == "" {
		c.OnFailure = "rollback"
	} else if !slices.Contains([]string{"rollback", "cancel"}, c.OnFailure) {
		add("on_failure %q is neither rollback nor cancel", c.OnFailure)
	}
	ami.CheckDuration(&c.RefreshTimeout, DefaultRefreshTimeout, "refresh_timeout", add)
	ami.CheckDuration(&c.PollInterval, DefaultPollInterval, "poll_interval", add)
	if errs != nil && len(errs.Errors) > 0 {
		return warnings, errs
	}
	return warnings, nil
}

func boolPtr(b bool) *bool { return &b }
