//go:generate go tool packer-sdc mapstructure-to-hcl2 -type Config,AccessConfig

package ami

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/packer-plugin-sdk/common"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hashicorp/packer-plugin-sdk/template/config"
	"github.com/hashicorp/packer-plugin-sdk/template/interpolate"
)

// AccessConfig says where and as whom to talk to AWS. Names follow the
// official amazon plugin; credentials not given here come from the SDK's
// standard chain (environment, shared config/credentials files and
// profile, SSO, web identity, ECS/EC2 roles).
type AccessConfig struct {
	// AWS access key id; needs secret_key too. Usually left out in favour
	// of the standard credential chain.
	AccessKey string `mapstructure:"access_key"`
	// AWS secret access key; needs access_key too.
	SecretKey string `mapstructure:"secret_key"`
	// Session token for temporary credentials.
	Token string `mapstructure:"token"`
	// Profile of the shared config/credentials files to use.
	Profile string `mapstructure:"profile"`
	// Shared credentials file, instead of ~/.aws/credentials.
	SharedCredentialsFile string `mapstructure:"shared_credentials_file"`
	// Region the snapshot is written to and the AMI registered in.
	RawRegion string `mapstructure:"region" required:"true"`
	// Accept region names that do not look like AWS regions (new regions,
	// other partitions, local endpoints).
	SkipRegionValidation bool `mapstructure:"skip_region_validation"`
	// Endpoint URL for EC2 instead of the regional default.
	CustomEndpointEC2 string `mapstructure:"custom_endpoint_ec2"`
	// Endpoint URL for the EBS direct APIs instead of the regional default.
	CustomEndpointEBS string `mapstructure:"custom_endpoint_ebs"`
	// How often the SDK retries a throttled or failed request (default 8).
	MaxRetries int `mapstructure:"max_retries"`
}

// Config is the hotpath-ami post-processor's configuration.
type Config struct {
	common.PackerConfig `mapstructure:",squash"`
	AccessConfig        `mapstructure:",squash"`

	// Name of the AMI: 3 to 128 characters from letters, digits and
	// ( ) [ ] space . / - ' @ _ ; unique in the region.
	AMIName string `mapstructure:"ami_name" required:"true"`
	// Description of the AMI, at most 255 characters.
	AMIDescription string `mapstructure:"ami_description"`
	// Regions to copy the AMI to, besides region.
	AMIRegions []string `mapstructure:"ami_regions"`
	// Account ids (12 digits) allowed to launch the AMI.
	AMIUsers []string `mapstructure:"ami_users"`
	// Groups allowed to launch the AMI; only "all" exists (public AMI).
	AMIGroups []string `mapstructure:"ami_groups"`
	// Tags on the AMI (and its copies).
	Tags map[string]string `mapstructure:"tags"`
	// Tags on the snapshot (and the copies' snapshots).
	SnapshotTags map[string]string `mapstructure:"snapshot_tags"`
	// Encrypt the snapshot, with kms_key_id or the account's default EBS
	// key. Encrypted uploads write every block, zeros included.
	EncryptBoot bool `mapstructure:"encrypt_boot"`
	// ARN of the KMS key for encrypt_boot in region (the EBS direct APIs
	// take ARNs only, not key ids or aliases). Needed to share an
	// encrypted AMI: EC2 cannot share AMIs encrypted with the AWS managed
	// key (aws/ebs).
	KMSKeyID string `mapstructure:"kms_key_id"`
	// KMS key ARN per region for encrypt_boot: the copies in ami_regions
	// are encrypted with the key of their region (default: that region's
	// AWS managed key). The build region's entry may stand in for
	// kms_key_id. Like the amazon plugin's.
	RegionKMSKeyIDs map[string]string `mapstructure:"region_kms_key_ids"`
	// Root volume size in GiB; default: the disk image rounded up to GiB.
	VolumeSize int64 `mapstructure:"volume_size"`
	// Raw disk image to upload; default: the .img/.raw file of the input
	// artifact.
	ImagePath string `mapstructure:"image_path"`
	// Blocks uploaded in parallel (default 16, at most 256).
	UploadWorkers int `mapstructure:"upload_workers"`
	// Attempts per block on top of the SDK's own retries (default 5).
	UploadAttempts int `mapstructure:"upload_attempts"`
	// How long EBS waits for the upload to complete before it abandons
	// the snapshot (10m to 72h, default 1h).
	SnapshotTimeout time.Duration `mapstructure:"snapshot_timeout"`
	// How long to wait for the snapshot and the AMIs to become ready
	// (default 1h).
	WaitTimeout time.Duration `mapstructure:"wait_timeout"`
	// Pause between status polls while waiting (default 5s).
	PollInterval time.Duration `mapstructure:"poll_interval"`

	ctx interpolate.Context
}

// Defaults, kept in one place so tests and docs agree.
const (
	DefaultMaxRetries      = 8
	DefaultUploadWorkers   = 16
	DefaultUploadAttempts  = 5
	DefaultSnapshotTimeout = time.Hour
	DefaultWaitTimeout     = time.Hour
	DefaultPollInterval    = 5 * time.Second
)

var (
	// regionRE matches the region names of the AWS partitions (aws,
	// aws-cn, aws-us-gov, aws-iso*): a geography, a direction, a number.
	// Checking the shape instead of calling ec2:DescribeRegions keeps
	// Prepare offline; skip_region_validation accepts anything.
	regionRE  = regexp.MustCompile(`^[a-z]{2}(-iso[a-z]?)?(-gov)?-[a-z]+-\d+$`)
	amiNameRE = regexp.MustCompile(`^[a-zA-Z0-9().\-/_ '@\[\]]{3,128}$`)
	accountRE = regexp.MustCompile(`^\d{12}$`)
	kmsARNRE  = regexp.MustCompile(`^arn:aws[a-z-]*:kms:([a-z0-9-]+):\d{12}:(key|alias)/[A-Za-z0-9/_+=,.@-]+$`)
)

// Prepare decodes raws into c, applies defaults and validates; every
// problem is reported, not only the first. It returns warnings.
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

	// Access.
	switch {
	case c.RawRegion == "":
		add("region is required")
	case !c.SkipRegionValidation && !regionRE.MatchString(c.RawRegion):
		add("region %q is not an AWS region name (set skip_region_validation to use it anyway)", c.RawRegion)
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		add("access_key and secret_key must be given together")
	}
	if c.Token != "" && c.AccessKey == "" {
		add("token needs access_key and secret_key")
	}
	for name, ep := range map[string]string{"custom_endpoint_ec2": c.CustomEndpointEC2, "custom_endpoint_ebs": c.CustomEndpointEBS} {
		if ep == "" {
			continue
		}
		if u, err := url.Parse(ep); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("%s %q is not an http(s) URL", name, ep)
		}
	}
	if c.MaxRetries < 0 {
		add("max_retries must not be negative")
	} else if c.MaxRetries == 0 {
		c.MaxRetries = DefaultMaxRetries
	}

	// The AMI.
	switch {
	case c.AMIName == "":
		add("ami_name is required")
	case !amiNameRE.MatchString(c.AMIName):
		add("ami_name %q must be 3 to 128 characters of letters, digits and ( ) [ ] space . / - ' @ _", c.AMIName)
	}
	if len(c.AMIDescription) > 255 {
		add("ami_description is %d characters long, at most 255 are allowed", len(c.AMIDescription))
	}
	var regions []string
	for _, r := range c.AMIRegions {
		switch {
		case r == c.RawRegion:
			warnings = append(warnings, fmt.Sprintf("ami_regions: %s is the build region; not copying to it", r))
		case slices.Contains(regions, r):
			warnings = append(warnings, fmt.Sprintf("ami_regions: %s listed twice", r))
		case r == "":
			add("ami_regions: empty region name")
		case !c.SkipRegionValidation && !regionRE.MatchString(r):
			add("ami_regions: %q is not an AWS region name", r)
		default:
			regions = append(regions, r)
		}
	}
	c.AMIRegions = regions
	for _, u := range c.AMIUsers {
		if !accountRE.MatchString(u) {
			add("ami_users: %q is not a 12-digit AWS account id", u)
		}
	}
	for _, g := range c.AMIGroups {
		if g != "all" {
			add("ami_groups: %q is not a launch permission group (only \"all\" exists)", g)
		}
	}
	if slices.Contains(c.AMIGroups, "all") {
		warnings = append(warnings, "ami_groups contains \"all\": the AMI will be public")
	}
	for name, m := range map[string]map[string]string{"tags": c.Tags, "snapshot_tags": c.SnapshotTags} {
		for k, v := range m {
			switch {
			case k == "":
				add("%s: empty tag key", name)
			case len(k) > 128:
				add("%s: key %q longer than 128 characters", name, k)
			case strings.HasPrefix(strings.ToLower(k), "aws:"):
				add("%s: key %q uses the reserved aws: prefix", name, k)
			}
			if len(v) > 256 {
				add("%s: value of %q longer than 256 characters", name, k)
			}
		}
	}

	// Encryption and the volume.
	c.prepareKMS(add)
	if c.VolumeSize < 0 || c.VolumeSize > 16384 {
		add("volume_size %d GiB is outside 1..16384 (0 means the image size)", c.VolumeSize)
	}

	// Upload and waiting.
	switch {
	case c.UploadWorkers < 0 || c.UploadWorkers > 256:
		add("upload_workers %d is outside 1..256", c.UploadWorkers)
	case c.UploadWorkers == 0:
		c.UploadWorkers = DefaultUploadWorkers
	}
	switch {
	case c.UploadAttempts < 0:
		add("upload_attempts must not be negative")
	case c.UploadAttempts == 0:
		c.UploadAttempts = DefaultUploadAttempts
	}
	switch {
	case c.SnapshotTimeout == 0:
		c.SnapshotTimeout = DefaultSnapshotTimeout
	case c.SnapshotTimeout < 10*time.Minute || c.SnapshotTimeout > 72*time.Hour:
		add("snapshot_timeout %s is outside 10m..72h", c.SnapshotTimeout)
	}
	switch {
	case c.WaitTimeout == 0:
		c.WaitTimeout = DefaultWaitTimeout
	case c.WaitTimeout < 0:
		add("wait_timeout must be positive")
	}
	switch {
	case c.PollInterval == 0:
		c.PollInterval = DefaultPollInterval
	case c.PollInterval < 0:
		add("poll_interval must be positive")
	}

	if errs != nil && len(errs.Errors) > 0 {
		return warnings, errs
	}
	return warnings, nil
}

// errNoImage is returned when neither image_path nor the artifact names a
// raw disk image.
var errNoImage = errors.New("no raw disk image: the input artifact has no .img or .raw file and image_path is not set")

// prepareKMS checks kms_key_id and region_kms_key_ids: ARNs of the region
// they are used in, only with encrypt_boot, and a customer managed key
// wherever an encrypted AMI is shared (EC2 refuses to share AMIs encrypted
// with the AWS managed key; the amazon plugin rejects it too).
func (c *Config) prepareKMS(add func(string, ...any)) {
	check := func(name, region, arn string) {
		m := kmsARNRE.FindStringSubmatch(arn)
		switch {
		case m == nil:
			add("%s %q must be a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>)", name, arn)
		case m[1] != region:
			add("%s %q is a key of %s, not of %s (KMS keys are regional)", name, arn, m[1], region)
		}
	}
	if c.KMSKeyID != "" {
		if !c.EncryptBoot {
			add("kms_key_id needs encrypt_boot = true")
		}
		check("kms_key_id", c.RawRegion, c.KMSKeyID)
	}
	if len(c.RegionKMSKeyIDs) > 0 && !c.EncryptBoot {
		add("region_kms_key_ids needs encrypt_boot = true")
	}
	for _, r := range sortedRegions(c.RegionKMSKeyIDs) {
		if r != c.RawRegion && !slices.Contains(c.AMIRegions, r) {
			add("region_kms_key_ids: %s is neither region nor one of ami_regions", r)
			continue
		}
		check(fmt.Sprintf("region_kms_key_ids[%s]", r), r, c.RegionKMSKeyIDs[r])
	}
	if k, ok := c.RegionKMSKeyIDs[c.RawRegion]; ok {
		if c.KMSKeyID != "" && c.KMSKeyID != k {
			add("kms_key_id and region_kms_key_ids[%s] name different keys", c.RawRegion)
		}
		if c.KMSKeyID == "" {
			c.KMSKeyID = k
		}
	}
	if !c.EncryptBoot || !c.shared() {
		return
	}
	if c.KMSKeyID == "" {
		add("encrypt_boot without kms_key_id cannot be shared with ami_users/ami_groups/ami_org_arns/ami_ou_arns: " +
			"EC2 does not share AMIs encrypted with the AWS managed key (aws/ebs); set kms_key_id to a customer managed key")
	}
	for _, r := range c.AMIRegions {
		if c.RegionKMSKeyIDs[r] == "" {
			add("encrypt_boot with sharing: region_kms_key_ids needs a customer managed key for %s (copies are otherwise encrypted with its AWS managed key, which cannot be shared)", r)
		}
	}
}

// shared says whether anyone besides the owner gets launch permission.
func (c *Config) shared() bool {
	return len(c.AMIUsers)+len(c.AMIGroups) > 0
}
