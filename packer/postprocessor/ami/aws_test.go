package ami

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
)

// isolateAWSEnv keeps the developer's AWS settings out of a test of the
// credential chain, and keeps the chain from asking the EC2 instance
// metadata service (a network call) when it finds nothing.
func isolateAWSEnv(t *testing.T) {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(home, "no-config"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for _, k := range []string{"AWS_SHARED_CREDENTIALS_FILE", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ACCESS_KEY_ID",
		"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE"} {
		t.Setenv(k, "")
	}
}

// TestLoadAWS: profile and shared_credentials_file choose the
// credentials the SDK's chain finds, static keys in the template come
// first, and max_retries = n lets the SDK try a call n+1 times. (The
// post-processor tests replace the retryer with a fast one, which makes
// the SDK ignore the attempts set here: they are checked on the
// configuration.)
func TestLoadAWS(t *testing.T) {
	isolateAWSEnv(t)
	creds := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(creds, []byte("[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = s1\n\n"+
		"[hotpath]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = s2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		ac       AccessConfig
		key      string // the access key found
		attempts int
	}{
		{"profile of the file", AccessConfig{Profile: "hotpath", SharedCredentialsFile: creds, MaxRetries: 2}, "AKIDPROFILE", 3},
		{"the file's default profile", AccessConfig{SharedCredentialsFile: creds, MaxRetries: DefaultMaxRetries}, "AKIDDEFAULT", 9},
		{"static keys first", AccessConfig{Profile: "hotpath", SharedCredentialsFile: creds, AccessKey: "AKIDSTATIC", SecretKey: "s3", MaxRetries: 1},
			"AKIDSTATIC", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.ac.RawRegion = "eu-west-1"
			cfg, err := LoadAWS(context.Background(), &tc.ac)
			if err != nil {
				t.Fatal(err)
			}
			c, err := cfg.Credentials.Retrieve(context.Background())
			if err != nil {
				t.Fatalf("credentials: %v", err)
			}
			if c.AccessKeyID != tc.key || cfg.RetryMaxAttempts != tc.attempts {
				t.Errorf("access key %s, %d attempts; want %s, %d", c.AccessKeyID, cfg.RetryMaxAttempts, tc.key, tc.attempts)
			}
		})
	}
}

// TestAssumeRoleOptions: the assume_role block's settings reach STS
// AssumeRole; an unset one is left out (the SDK's default duration, 15
// minutes; no session policy).
func TestAssumeRoleOptions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		a        AssumeRoleConfig
		duration time.Duration
	}{
		{"defaults", AssumeRoleConfig{SessionName: "ci"}, 0},
		{"every setting", AssumeRoleConfig{SessionName: "ci", DurationSeconds: 3600, ExternalID: "ext", Policy: `{"Version":"2012-10-17"}`}, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o stscreds.AssumeRoleOptions
			tc.a.options(&o)
			if o.RoleSessionName != tc.a.SessionName || o.Duration != tc.duration {
				t.Errorf("session %q, duration %s; want %q, %s", o.RoleSessionName, o.Duration, tc.a.SessionName, tc.duration)
			}
			for _, f := range []struct {
				name       string
				got        *string
				configured string
			}{{"external id", o.ExternalID, tc.a.ExternalID}, {"policy", o.Policy, tc.a.Policy}} {
				if (f.got == nil) != (f.configured == "") || aws.ToString(f.got) != f.configured {
					t.Errorf("%s %v, configured %q", f.name, f.got, f.configured)
				}
			}
		})
	}
	var o stscreds.AssumeRoleOptions
	AssumeRoleConfig{}.options(&o)
	if !strings.HasPrefix(o.RoleSessionName, "packer-plugin-hotpath-") {
		t.Errorf("default session name %q", o.RoleSessionName)
	}
}
