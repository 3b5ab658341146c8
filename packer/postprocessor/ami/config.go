//go:generate go tool packer-sdc mapstructure-to-hcl2 -type Config,AccessConfig,AssumeRoleConfig,DeregistrationProtectionOptions

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
	// Endpoint URL for STS (assume_role) instead of the regional default.
	CustomEndpointSTS string `mapstructure:"custom_endpoint_sts"`
	// Endpoint URL for SSM instead of the regional default (hotpath-rollout).
	CustomEndpointSSM string `mapstructure:"custom_endpoint_ssm"`
	// Endpoint URL for EC2 Auto Scaling instead of the regional default
	// (hotpath-rollout).
	CustomEndpointAutoScaling string `mapstructure:"custom_endpoint_autoscaling"`
	// Assume this IAM role with the credentials found, as the amazon
	// plugin's assume_role block does.
	AssumeRole AssumeRoleConfig `mapstructure:"assume_role"`
	// How often the SDK retries a throttled or failed request (default 8).
	MaxRetries int `mapstructure:"max_retries"`
}

// AssumeRoleConfig is the amazon plugin's assume_role block: every AWS
// call is made as this role, with temporary credentials from STS
// AssumeRole (renewed before they expire).
type AssumeRoleConfig struct {
	// ARN of the role to assume; the block is ignored without it.
	RoleARN string `mapstructure:"role_arn"`
	// Session length in seconds, 900 to 43200 (default 900).
	DurationSeconds int `mapstructure:"duration_seconds"`
	// External id the role's trust policy asks for.
	ExternalID string `mapstructure:"external_id"`
	// Inline session policy (JSON) that narrows the role's permissions.
	Policy string `mapstructure:"policy"`
	// Managed policy ARNs that narrow the role's permissions.
	PolicyARNs []string `mapstructure:"policy_arns"`
	// Session name (default packer-plugin-hotpath-<unix time>).
	SessionName string `mapstructure:"session_name"`
	// Session tags.
	Tags map[string]string `mapstructure:"tags"`
	// Session tag keys passed on to roles assumed from this one.
	TransitiveTagKeys []string `mapstructure:"transitive_tag_keys"`
}

// DeregistrationProtectionOptions is the amazon plugin's
// deregistration_protection block.
type DeregistrationProtectionOptions struct {
	// Protect the AMIs against DeregisterImage.
	Enabled bool `mapstructure:"enabled"`
	// After protection is removed, keep the AMI for 24 more hours.
	WithCooldown bool `mapstructure:"with_cooldown"`
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
	// Tags on the AMIs as repeatable blocks (tag { key = "" value = "" }),
	// merged into tags: the amazon plugin's form for keys that are not
	// HCL identifiers.
	AMITag config.KeyValues `mapstructure:"tag"`
	// Snapshot tags as blocks, merged into snapshot_tags.
	SnapshotTag config.KeyValues `mapstructure:"snapshot_tag"`
	// Account ids that may create volumes from the snapshots.
	SnapshotUsers []string `mapstructure:"snapshot_users"`
	// Groups that may create volumes from the snapshots; only "all".
	SnapshotGroups []string `mapstructure:"snapshot_groups"`
	// AWS Organizations (arn:aws:organizations::<account>:organization/o-…)
	// allowed to launch the AMIs.
	AMIOrgArns []string `mapstructure:"ami_org_arns"`
	// Organizational units allowed to launch the AMIs.
	AMIOuArns []string `mapstructure:"ami_ou_arns"`
	// When the AMIs become deprecated, RFC 3339 in UTC
	// (2027-01-02T15:04:00Z); EC2 rounds to the minute.
	DeprecateAt string `mapstructure:"deprecate_at"`
	// Deregistration protection of the AMIs.
	DeregistrationProtection DeregistrationProtectionOptions `mapstructure:"deregistration_protection"`
	// Deregister AMIs of this account that already have ami_name, in
	// every target region, before the upload.
	ForceDeregister bool `mapstructure:"force_deregister"`
	// With force_deregister: delete those AMIs' snapshots too.
	ForceDeleteSnapshot bool `mapstructure:"force_delete_snapshot"`

	// The AMI attributes are fixed by what the image is; they are
	// accepted (amazon plugin templates set them) only with the values
	// the appliance supports.

	// Boot mode: "uefi-preferred" (the default for an x86 disk that boots
	// both ways, as hotpath's does: UEFI where the instance type has it,
	// legacy BIOS on .metal sizes and the few other types without it),
	// "uefi" (the default for arm64, for a UEFI-only disk and with
	// tpm_support), or "legacy-bios". Like the amazon plugin's.
	BootMode string `mapstructure:"boot_mode"`
	// Instance metadata: only "v2.0" (IMDSv2 tokens only; the init
	// never uses IMDSv1).
	IMDSSupport string `mapstructure:"imds_support"`
	// ENA: only true (ENA is the kernel's network driver on Nitro).
	ENASupport *bool `mapstructure:"ena_support"`
	// SR-IOV: only true ("simple").
	SriovSupport *bool `mapstructure:"sriov_support"`
	// NitroTPM: "v2.0" to expose a TPM 2.0, or unset.
	TPMSupport string `mapstructure:"tpm_support"`
	// UEFI variable store the AMI's instances start with, in EC2's format
	// (base64, what python-uefivars -O aws writes and EC2
	// GetInstanceUefiData returns): the Secure Boot keys. Prepare refuses
	// one that does not decode.
	UEFIData string `mapstructure:"uefi_data"`
	// Secure Boot certificates to build uefi_data from (instead of
	// giving it): pk, kek and db, PEM or DER files.
	SecureBootCerts SecureBootCerts `mapstructure:"secure_boot_certs"`
	// CPU architecture of the AMI: "x86_64" or "arm64" (Graviton).
	// Default: the input artifact's manifest (amd64 is x86_64), else
	// x86_64; a value that disagrees with the manifest is an error.
	Architecture string `mapstructure:"architecture"`
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
	// uefiData is what RegisterImage sends as UefiData: uefi_data, or the
	// store built from secure_boot_certs (prepareSecureBoot); uefiVars
	// its variables, when they decode.
	uefiData string
	uefiVars uefiVariables
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
	orgARNRE  = regexp.MustCompile(`^arn:aws[a-z-]*:organizations::\d{12}:organization/o-[a-z0-9]{10,32}$`)
	ouARNRE   = regexp.MustCompile(`^arn:aws[a-z-]*:organizations::\d{12}:ou/o-[a-z0-9]{10,32}/ou-[a-z0-9]{4,32}-[a-z0-9]{8,32}$`)
	roleARNRE = regexp.MustCompile(`^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}$`)
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

	c.AccessConfig.Check(add)

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
	for _, e := range c.AMITag.CopyOn(&c.Tags) {
		add("tag: %v", e)
	}
	for _, e := range c.SnapshotTag.CopyOn(&c.SnapshotTags) {
		add("snapshot_tag: %v", e)
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

	c.prepareAmazonKeys(add, &warnings)
	c.prepareSecureBoot(add, &warnings)

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
	CheckDuration(&c.WaitTimeout, DefaultWaitTimeout, "wait_timeout", add)
	CheckDuration(&c.PollInterval, DefaultPollInterval, "poll_interval", add)

	if errs != nil && len(errs.Errors) > 0 {
		return warnings, errs
	}
	return warnings, nil
}

// CheckDuration sets an unset duration (*d == 0) to def and reports a
// negative one as key's problem: the waits and poll intervals of the
// post-processors.
func CheckDuration(d *time.Duration, def time.Duration, key string, add func(format string, args ...any)) {
	switch {
	case *d == 0:
		*d = def
	case *d < 0:
		add("%s must be positive", key)
	}
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
	if c.EncryptBoot && slices.Contains(c.AMIGroups, "all") {
		// EC2 User Guide, "Share an AMI publicly": an AMI with encrypted
		// volumes cannot be made public.
		add("encrypt_boot with ami_groups = [\"all\"]: EC2 cannot make an AMI with encrypted volumes public; " +
			"share it with ami_users, ami_org_arns or ami_ou_arns instead")
	}
	if !c.EncryptBoot || !c.shared() {
		return
	}
	if c.KMSKeyID == "" {
		add("encrypt_boot without kms_key_id cannot be shared with ami_users/ami_groups/ami_org_arns/ami_ou_arns/snapshot_users: " +
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
	return len(c.AMIUsers)+len(c.AMIGroups)+len(c.AMIOrgArns)+len(c.AMIOuArns)+len(c.SnapshotUsers)+len(c.SnapshotGroups) > 0
}

func (a *AssumeRoleConfig) prepare(add func(string, ...any)) {
	if a.RoleARN == "" {
		if a.ExternalID != "" || a.Policy != "" || len(a.PolicyARNs) > 0 || a.SessionName != "" || a.DurationSeconds != 0 ||
			len(a.Tags) > 0 || len(a.TransitiveTagKeys) > 0 {
			add("assume_role: role_arn is required")
		}
		return
	}
	if !roleARNRE.MatchString(a.RoleARN) {
		add("assume_role: role_arn %q is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)", a.RoleARN)
	}
	if a.DurationSeconds != 0 && (a.DurationSeconds < 900 || a.DurationSeconds > 43200) {
		add("assume_role: duration_seconds %d is outside 900..43200", a.DurationSeconds)
	}
	if len(a.SessionName) > 64 {
		add("assume_role: session_name is longer than 64 characters")
	}
	if len(a.PolicyARNs) > 10 {
		add("assume_role: at most 10 policy_arns")
	}
	for _, k := range a.TransitiveTagKeys {
		if _, ok := a.Tags[k]; !ok {
			add("assume_role: transitive_tag_keys: %q is not one of tags", k)
		}
	}
}

// prepareAmazonKeys checks the keys taken over from the amazon plugin:
// sharing, deprecation, forced deregistration and the fixed attributes.
func (c *Config) prepareAmazonKeys(add func(string, ...any), warnings *[]string) {
	for _, u := range c.SnapshotUsers {
		if !accountRE.MatchString(u) {
			add("snapshot_users: %q is not a 12-digit AWS account id", u)
		}
	}
	for _, g := range c.SnapshotGroups {
		if g != "all" {
			add("snapshot_groups: %q is not a create volume permission group (only \"all\" exists)", g)
		}
	}
	if c.EncryptBoot && len(c.SnapshotGroups) > 0 {
		add("snapshot_groups: encrypted snapshots cannot be made public")
	}
	for _, a := range c.AMIOrgArns {
		if !orgARNRE.MatchString(a) {
			add("ami_org_arns: %q is not an organization ARN (arn:aws:organizations::<account>:organization/o-<id>)", a)
		}
	}
	for _, a := range c.AMIOuArns {
		if !ouARNRE.MatchString(a) {
			add("ami_ou_arns: %q is not an organizational unit ARN (arn:aws:organizations::<account>:ou/o-<id>/ou-<id>)", a)
		}
	}
	if c.DeprecateAt != "" {
		t, err := time.Parse(time.RFC3339, c.DeprecateAt)
		switch {
		case err != nil:
			add("deprecate_at %q is not an RFC 3339 time (2027-01-02T15:04:00Z)", c.DeprecateAt)
		case !t.After(time.Now()):
			add("deprecate_at %s is not in the future", c.DeprecateAt)
		}
	}
	if c.ForceDeleteSnapshot && !c.ForceDeregister {
		add("force_delete_snapshot needs force_deregister = true")
	}
	if c.DeregistrationProtection.WithCooldown && !c.DeregistrationProtection.Enabled {
		add("deregistration_protection: with_cooldown needs enabled = true")
	}

	fixed := func(name, got, want, why string) {
		if got != "" && got != want {
			add("%s = %q is not supported: only %q (%s)", name, got, want, why)
		}
	}
	c.checkBootMode(add)
	fixed("imds_support", c.IMDSSupport, "v2.0", "the init uses IMDSv2 tokens only; allowing IMDSv1 would only open a door")
	fixed("tpm_support", c.TPMSupport, "v2.0", "NitroTPM 2.0, or leave it unset")
	if c.ENASupport != nil && !*c.ENASupport {
		add("ena_support = false is not supported: ENA is the appliance's network driver on Nitro instances")
	}
	if c.SriovSupport != nil && !*c.SriovSupport {
		add("sriov_support = false is not supported: the AMI is registered with SR-IOV (simple) for enhanced networking")
	}
	checkArchitecture(c.Architecture, add)
}

// Check validates the access settings and applies their defaults; add
// collects each problem. hotpath-rollout shares it.
func (c *AccessConfig) Check(add func(format string, args ...any)) {
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
	c.AssumeRole.prepare(add)
	for name, ep := range map[string]string{"custom_endpoint_sts": c.CustomEndpointSTS, "custom_endpoint_ssm": c.CustomEndpointSSM, "custom_endpoint_autoscaling": c.CustomEndpointAutoScaling} {
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
}
