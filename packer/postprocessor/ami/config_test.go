package ami

import (
	"strings"
	"testing"
	"time"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
)

func minimal() map[string]interface{} {
	return map[string]interface{}{"region": "eu-west-1", "ami_name": "hotpath test"}
}

func with(kv ...interface{}) map[string]interface{} {
	m := minimal()
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(m, kv[i].(string))
			continue
		}
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func TestPrepareDefaults(t *testing.T) {
	var c Config
	warns, err := c.Prepare(minimal())
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("warnings %v", warns)
	}
	for _, tc := range []struct {
		name      string
		got, want interface{}
	}{
		// The values the keys' documentation gives.
		{"max_retries", c.MaxRetries, 8},
		{"upload_workers", c.UploadWorkers, 16},
		{"upload_attempts", c.UploadAttempts, 5},
		{"snapshot_timeout", c.SnapshotTimeout, time.Hour},
		{"wait_timeout", c.WaitTimeout, time.Hour},
		{"poll_interval", c.PollInterval, 5 * time.Second},
		{"volume_size", c.VolumeSize, int64(0)},
		{"encrypt_boot", c.EncryptBoot, false},
		{"region", c.RawRegion, "eu-west-1"},
		// Unset until PostProcess reads the input artifact's manifest.
		{"architecture", c.Architecture, ""},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestPrepareValues(t *testing.T) {
	var c Config
	warns, err := c.Prepare(with(
		"ami_regions", []string{"us-east-1", "eu-west-1", "us-east-1", "ap-southeast-2"},
		"ami_users", []string{"123456789012"},
		"encrypt_boot", true,
		"kms_key_id", "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
		"region_kms_key_ids", map[string]string{
			"us-east-1":      "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ac",
			"ap-southeast-2": "arn:aws:kms:ap-southeast-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ad",
		},
		"snapshot_timeout", "2h",
		"poll_interval", "250ms",
		"upload_workers", 64,
		"tags", map[string]string{"Name": "x"},
	))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.AMIRegions, ","); got != "us-east-1,ap-southeast-2" {
		t.Errorf("ami_regions %s: the build region and duplicates must go", got)
	}
	if len(warns) != 2 {
		t.Errorf("warnings %q, want build region, duplicate", warns)
	}
	if c.SnapshotTimeout != 2*time.Hour || c.PollInterval != 250*time.Millisecond || c.UploadWorkers != 64 || c.Tags["Name"] != "x" {
		t.Errorf("decoded %+v", c)
	}
}

// A public AMI (unencrypted: an encrypted one cannot be public) is
// accepted with a warning.
func TestPreparePublic(t *testing.T) {
	var c Config
	warns, err := c.Prepare(with("ami_groups", []string{"all"}))
	if err != nil || len(warns) != 1 || !strings.Contains(warns[0], "the AMI will be public") {
		t.Errorf("warnings %q, err %v", warns, err)
	}
}

func TestPrepareErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  map[string]interface{}
		want string
	}{
		{"no region", with("region", nil), "region is required"},
		{"bad region", with("region", "moon-1"), `region "moon-1" is not an AWS region`},
		{"keys alone", with("access_key", "AKID"), "access_key and secret_key must be given together"},
		{"secret alone", with("secret_key", "s"), "access_key and secret_key must be given together"},
		{"token alone", with("token", "t"), "token needs access_key"},
		{"bad ec2 endpoint", with("custom_endpoint_ec2", "localhost:1"), "custom_endpoint_ec2"},
		{"bad ebs endpoint", with("custom_endpoint_ebs", "ftp://x"), "custom_endpoint_ebs"},
		{"negative retries", with("max_retries", -1), "max_retries must not be negative"},
		{"no name", with("ami_name", nil), "ami_name is required"},
		{"short name", with("ami_name", "ab"), "ami_name \"ab\" must be 3 to 128"},
		{"bad name", with("ami_name", "a*b*c"), "ami_name \"a*b*c\""},
		{"long name", with("ami_name", strings.Repeat("a", 129)), "must be 3 to 128"},
		{"long description", with("ami_description", strings.Repeat("d", 256)), "ami_description is 256 characters"},
		{"empty copy region", with("ami_regions", []string{""}), "ami_regions: empty region name"},
		{"bad copy region", with("ami_regions", []string{"mars-north-1x"}), `ami_regions: "mars-north-1x"`},
		{"bad user", with("ami_users", []string{"1234"}), `ami_users: "1234" is not a 12-digit`},
		{"bad group", with("ami_groups", []string{"friends"}), `ami_groups: "friends"`},
		{"empty tag key", with("tags", map[string]string{"": "v"}), "tags: empty tag key"},
		{"aws tag", with("snapshot_tags", map[string]string{"aws:x": "v"}), "snapshot_tags: key \"aws:x\" uses the reserved"},
		{"long tag key", with("tags", map[string]string{strings.Repeat("k", 129): "v"}), "longer than 128"},
		{"long tag value", with("tags", map[string]string{"k": strings.Repeat("v", 257)}), "longer than 256"},
		{"kms without encryption", with("kms_key_id", "arn:aws:kms:eu-west-1:123456789012:key/abc"), "kms_key_id needs encrypt_boot"},
		{"kms not an arn", with("encrypt_boot", true, "kms_key_id", "alias/mine"), "must be a KMS key ARN"},
		{"kms in another region", with("encrypt_boot", true, "kms_key_id", "arn:aws:kms:us-east-1:123456789012:key/abc"),
			`is a key of us-east-1, not of eu-west-1`},
		{"shared with the managed key", with("encrypt_boot", true, "ami_users", []string{"123456789012"}),
			"encrypt_boot without kms_key_id cannot be shared"},
		{"public with the managed key", with("encrypt_boot", true, "ami_groups", []string{"all"}),
			"encrypt_boot without kms_key_id cannot be shared"},
		{"public and encrypted", with("encrypt_boot", true, "kms_key_id", "arn:aws:kms:eu-west-1:123456789012:key/abc", "ami_groups", []string{"all"}),
			"EC2 cannot make an AMI with encrypted volumes public"},
		{"shared copy with the managed key", with("encrypt_boot", true, "ami_users", []string{"123456789012"},
			"kms_key_id", "arn:aws:kms:eu-west-1:123456789012:key/abc", "ami_regions", []string{"us-east-1"}),
			"region_kms_key_ids needs a customer managed key for us-east-1"},
		{"region kms without encryption", with("region_kms_key_ids", map[string]string{"eu-west-1": "arn:aws:kms:eu-west-1:123456789012:key/abc"}),
			"region_kms_key_ids needs encrypt_boot"},
		{"region kms for an unknown region", with("encrypt_boot", true, "region_kms_key_ids", map[string]string{"us-west-2": "arn:aws:kms:us-west-2:123456789012:key/abc"}),
			"region_kms_key_ids: us-west-2 is neither region nor one of ami_regions"},
		{"region kms key of another region", with("encrypt_boot", true, "ami_regions", []string{"us-east-1"},
			"region_kms_key_ids", map[string]string{"us-east-1": "arn:aws:kms:eu-west-1:123456789012:key/abc"}),
			"region_kms_key_ids[us-east-1] \"arn:aws:kms:eu-west-1:123456789012:key/abc\" is a key of eu-west-1, not of us-east-1"},
		{"two keys for the build region", with("encrypt_boot", true, "kms_key_id", "arn:aws:kms:eu-west-1:123456789012:key/a",
			"region_kms_key_ids", map[string]string{"eu-west-1": "arn:aws:kms:eu-west-1:123456789012:key/b"}),
			"name different keys"},
		{"unknown boot mode", with("boot_mode", "bios"), `boot_mode = "bios" is not supported: one of uefi-preferred, uefi, legacy-bios`},
		{"nitrotpm on legacy bios", with("boot_mode", "legacy-bios", "tpm_support", "v2.0"), `tpm_support = "v2.0" needs boot_mode = "uefi", not "legacy-bios"`},
		{"nitrotpm uefi preferred", with("boot_mode", "uefi-preferred", "tpm_support", "v2.0"), `needs boot_mode = "uefi", not "uefi-preferred"`},
		{"graviton legacy bios", with("boot_mode", "legacy-bios", "architecture", "arm64"), `Graviton instances boot UEFI only`},
		{"imdsv1", with("imds_support", "v1.0"), `imds_support = "v1.0" is not supported: only "v2.0"`},
		{"no ena", with("ena_support", false), "ena_support = false is not supported"},
		{"no sriov", with("sriov_support", false), "sriov_support = false is not supported"},
		{"tpm 1.2", with("tpm_support", "v1.2"), `tpm_support = "v1.2" is not supported`},
		{"go's name for x86_64", with("architecture", "amd64"), `architecture = "amd64" is not supported: hotpath builds x86_64 and arm64 images`},
		{"aarch64", with("architecture", "aarch64"), `architecture = "aarch64" is not supported`},
		{"i386", with("architecture", "i386"), `architecture = "i386" is not supported`},
		{"bad snapshot user", with("snapshot_users", []string{"me"}), `snapshot_users: "me" is not a 12-digit`},
		{"bad snapshot group", with("snapshot_groups", []string{"friends"}), `snapshot_groups: "friends"`},
		{"public encrypted snapshot", with("encrypt_boot", true, "kms_key_id", "arn:aws:kms:eu-west-1:123456789012:key/a", "snapshot_groups", []string{"all"}),
			"encrypted snapshots cannot be made public"},
		{"snapshot users with the managed key", with("encrypt_boot", true, "snapshot_users", []string{"123456789012"}),
			"encrypt_boot without kms_key_id cannot be shared"},
		{"bad org arn", with("ami_org_arns", []string{"o-123"}), `ami_org_arns: "o-123" is not an organization ARN`},
		{"bad ou arn", with("ami_ou_arns", []string{"arn:aws:organizations::123456789012:organization/o-abcdefghij"}), "ami_ou_arns"},
		{"bad deprecate_at", with("deprecate_at", "tomorrow"), `deprecate_at "tomorrow" is not an RFC 3339 time`},
		{"past deprecate_at", with("deprecate_at", "2001-01-01T00:00:00Z"), "deprecate_at 2001-01-01T00:00:00Z is not in the future"},
		{"snapshot deletion alone", with("force_delete_snapshot", true), "force_delete_snapshot needs force_deregister"},
		{"cooldown alone", with("deregistration_protection", map[string]interface{}{"with_cooldown": true}), "with_cooldown needs enabled"},
		{"tag block without key", with("tag", []map[string]string{{"value": "v"}}), "tags: empty tag key"},
		{"assume_role without arn", with("assume_role", map[string]interface{}{"external_id": "x"}), "assume_role: role_arn is required"},
		{"assume_role bad arn", with("assume_role", map[string]interface{}{"role_arn": "hotpath"}), `assume_role: role_arn "hotpath" is not an IAM role ARN`},
		{"assume_role duration", with("assume_role", map[string]interface{}{"role_arn": "arn:aws:iam::123456789012:role/x", "duration_seconds": 60}),
			"duration_seconds 60 is outside 900..43200"},
		{"assume_role transitive", with("assume_role", map[string]interface{}{"role_arn": "arn:aws:iam::123456789012:role/x", "transitive_tag_keys": []string{"team"}}),
			`transitive_tag_keys: "team" is not one of tags`},
		{"bad sts endpoint", with("custom_endpoint_sts", "sts"), "custom_endpoint_sts"},
		{"negative volume", with("volume_size", -1), "volume_size -1 GiB"},
		{"huge volume", with("volume_size", 20000), "volume_size 20000 GiB"},
		{"too many workers", with("upload_workers", 1000), "upload_workers 1000"},
		{"negative workers", with("upload_workers", -2), "upload_workers -2"},
		{"negative attempts", with("upload_attempts", -1), "upload_attempts must not be negative"},
		{"short snapshot timeout", with("snapshot_timeout", "5m"), "snapshot_timeout 5m0s is outside"},
		{"long snapshot timeout", with("snapshot_timeout", "100h"), "snapshot_timeout 100h0m0s is outside"},
		{"negative wait", with("wait_timeout", "-1s"), "wait_timeout must be positive"},
		{"negative poll", with("poll_interval", "-1s"), "poll_interval must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			_, err := c.Prepare(tc.raw)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// TestPrepareLimits: a value at a documented limit is accepted (one past
// it is refused, in TestPrepareErrors), and so is an encrypted AMI that
// is not shared, which may use the account's default key.
func TestPrepareLimits(t *testing.T) {
	role := func(kv ...interface{}) map[string]interface{} {
		m := map[string]interface{}{"role_arn": "arn:aws:iam::123456789012:role/x"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	arns := make([]string, 10)
	for i := range arns {
		arns[i] = "arn:aws:iam::123456789012:policy/p" + strings.Repeat("x", i)
	}
	for _, tc := range []struct {
		name string
		raw  map[string]interface{}
	}{
		{"description of 255", with("ami_description", strings.Repeat("d", 255))},
		{"tag key of 128", with("tags", map[string]string{strings.Repeat("k", 128): "v"})},
		{"tag value of 256", with("snapshot_tags", map[string]string{"k": strings.Repeat("v", 256)})},
		{"volume of 16384 GiB", with("volume_size", 16384)},
		{"256 workers", with("upload_workers", 256)},
		{"snapshot timeout of 10m", with("snapshot_timeout", "10m")},
		{"snapshot timeout of 72h", with("snapshot_timeout", "72h")},
		{"shortest session", with("assume_role", role("duration_seconds", 900))},
		{"longest session", with("assume_role", role("duration_seconds", 43200))},
		{"session name of 64", with("assume_role", role("session_name", strings.Repeat("s", 64)))},
		{"10 policy arns", with("assume_role", role("policy_arns", arns))},
		{"encrypted with the default key, not shared", with("encrypt_boot", true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			if _, err := c.Prepare(tc.raw); err != nil {
				t.Errorf("refused: %v", err)
			}
		})
	}
}

// TestPrepareReportsEach: a problem found does not hide the next one of
// the same loop or check, and sharing by organization, by OU or of the
// snapshots counts as sharing for the key check.
func TestPrepareReportsEach(t *testing.T) {
	const managed = "encrypt_boot without kms_key_id cannot be shared"
	for _, tc := range []struct {
		name string
		raw  map[string]interface{}
		want []string
	}{
		{"region kms keys", with("encrypt_boot", true, "ami_regions", []string{"us-east-1"},
			"region_kms_key_ids", map[string]string{"ap-south-1": "arn:aws:kms:ap-south-1:123456789012:key/a", "us-east-1": "alias/mine"}),
			[]string{"region_kms_key_ids: ap-south-1 is neither region nor one of ami_regions", `region_kms_key_ids[us-east-1] "alias/mine" must be a KMS key ARN`}},
		{"shared by organization", with("encrypt_boot", true, "ami_org_arns", []string{"arn:aws:organizations::123456789012:organization/o-abcdefghij"}),
			[]string{managed}},
		{"shared by OU", with("encrypt_boot", true, "ami_ou_arns", []string{"arn:aws:organizations::123456789012:ou/o-abcdefghij/ou-ab12-cdefgh34"}),
			[]string{managed}},
		{"public snapshots", with("encrypt_boot", true, "snapshot_groups", []string{"all"}),
			[]string{"encrypted snapshots cannot be made public", managed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			_, err := c.Prepare(tc.raw)
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v does not mention %q", err, w)
				}
			}
		})
	}
}

// TestPrepareEndpoints: every custom endpoint must be an http(s) URL with
// a host, and each malformed one is reported, whichever order the keys
// are checked in (a map's) and whichever are left empty.
func TestPrepareEndpoints(t *testing.T) {
	keys := []string{"custom_endpoint_ec2", "custom_endpoint_ebs", "custom_endpoint_sts", "custom_endpoint_ssm", "custom_endpoint_autoscaling"}
	for _, k := range keys {
		for _, tc := range []struct{ url, want string }{
			{"ftp://x", "is not an http(s) URL"},
			{"http://", "is not an http(s) URL"},
			{"http://[::1", "is not an http(s) URL"},
			{"http://127.0.0.1:1", ""},
			{"https://ec2.eu-west-1.amazonaws.com", ""},
		} {
			var c Config
			_, err := c.Prepare(with(k, tc.url))
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), k+` "`+tc.url+`" `+tc.want)) {
				t.Errorf("%s = %q: error %v, want %q", k, tc.url, err, tc.want)
			}
		}
	}
	for range 20 {
		var c Config
		_, err := c.Prepare(with(keys[1], "ftp://b", keys[3], "ftp://d", keys[4], "ftp://e"))
		for _, k := range []string{keys[1], keys[3], keys[4]} {
			if err == nil || !strings.Contains(err.Error(), k+" ") {
				t.Fatalf("error %v does not name %s", err, k)
			}
		}
	}
}

// Both AMI architectures are accepted.
func TestPrepareArchitectures(t *testing.T) {
	for _, arch := range Architectures {
		var c Config
		if _, err := c.Prepare(with("architecture", arch)); err != nil || c.Architecture != arch {
			t.Errorf("architecture %q: %v, decoded %q", arch, err, c.Architecture)
		}
	}
}

// skip_region_validation lets any region name through.
func TestPrepareSkipRegionValidation(t *testing.T) {
	var c Config
	if _, err := c.Prepare(with("region", "local-test", "ami_regions", []string{"other"}, "skip_region_validation", true)); err != nil {
		t.Fatal(err)
	}
}

// Every problem is reported at once, not only the first.
func TestPrepareReportsAllErrors(t *testing.T) {
	var c Config
	_, err := c.Prepare(map[string]interface{}{
		"ami_users":      []string{"nope"},
		"upload_workers": -1,
		"kms_key_id":     "x",
	})
	me, ok := err.(*packersdk.MultiError)
	if !ok {
		t.Fatalf("error %T %v, want *packer.MultiError", err, err)
	}
	// region, ami_name, ami_users, kms needs encrypt_boot, kms not ARN, workers
	if len(me.Errors) != 6 {
		t.Errorf("%d errors, want 6:\n%v", len(me.Errors), err)
	}
}
