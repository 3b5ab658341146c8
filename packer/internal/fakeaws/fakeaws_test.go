package fakeaws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// raw sends one request signed as an SDK client signs it (the SDK's own
// signer), with service and region in the SigV4 scope; secret is the key's
// secret, tamper changes the request after signing.
func raw(t *testing.T, s *Server, service, region, contentType, target, body string) (int, string) {
	t.Helper()
	return rawSigned(t, s, s.SecretKey, service, region, contentType, target, body, nil)
}

func rawSigned(t *testing.T, s *Server, secret, service, region, contentType, target, body string, tamper func(*http.Request)) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/", strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	if target != "" {
		req.Header.Set("X-Amz-Target", target)
	}
	sum := sha256.Sum256([]byte(body))
	creds := aws.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: secret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), service, region, time.Now()); err != nil {
		t.Fatal(err)
	}
	if tamper != nil {
		tamper(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSignature: the fake recomputes every signature, as AWS does. A
// request signed with the wrong secret, or changed after it was signed
// (its body, a signed header), or whose scope names another region than
// it was signed for, is refused; extra unsigned headers are not.
func TestSignature(t *testing.T) {
	s := New("AKIDTEST", "secret")
	defer s.Close()
	form := "application/x-www-form-urlencoded; charset=utf-8"
	body := "Action=DescribeImages&Version=2016-11-15&Owner.1=self"
	for _, tc := range []struct {
		name   string
		secret string
		tamper func(*http.Request)
		want   int
	}{
		{"signed", "secret", nil, 200},
		{"unsigned header added", "secret", func(r *http.Request) { r.Header.Set("X-Unsigned", "1") }, 200},
		{"wrong secret", "not-the-secret", nil, 403},
		{"body changed", "secret", func(r *http.Request) {
			b := strings.Replace(body, "self", "sel2", 1)
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader(b)), int64(len(b))
		}, 403},
		{"signed header changed", "secret", func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, 403},
		{"scope changed", "secret", func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/eu-west-1/", "/us-east-1/", 1))
		}, 403},
		{"date changed", "secret", func(r *http.Request) {
			r.Header.Set("X-Amz-Date", time.Now().UTC().Add(time.Minute).Format("20060102T150405Z"))
		}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, resp := rawSigned(t, s, tc.secret, "ec2", "eu-west-1", form, "", body, tc.tamper)
			if status != tc.want {
				t.Errorf("status %d, want %d: %s", status, tc.want, resp)
			}
			if tc.want == 403 && !strings.Contains(resp, "Signature") && !strings.Contains(resp, "X-Amz-Date") {
				t.Errorf("refusal does not say why: %s", resp)
			}
		})
	}
}

// The fake refuses what AWS refuses: parameters an action does not have
// and values of the wrong type, in each protocol it speaks.
func TestStrictParameters(t *testing.T) {
	s := New("AKIDTEST", "secret")
	defer s.Close()
	lt := s.AddLaunchTemplate("eu-west-1", "web", "ami-0123456789abcdef0")
	s.AddGroup("eu-west-1", "web", lt, "1", 2)
	form := "application/x-www-form-urlencoded; charset=utf-8"
	q := func(kv ...string) string {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v.Encode()
	}
	for _, tc := range []struct {
		name, service, ct, target, body, want string
	}{
		{"ec2 unknown parameter", "ec2", form, "", q("Action", "DescribeImages", "Version", "2016-11-15", "ImageIds.1", "ami-1"), "UnknownParameter"},
		{"ec2 bad boolean", "ec2", form, "", q("Action", "CopyImage", "Version", "2016-11-15", "Encrypted", "yes"), "expected a boolean"},
		{"ec2 bad timestamp", "ec2", form, "", q("Action", "EnableImageDeprecation", "Version", "2016-11-15", "ImageId", "ami-1", "DeprecateAt", "soon"), "ISO 8601"},
		// EC2's ArchitectureValues: arm64, not Go's or kbuild's aarch64.
		{"ec2 architecture EC2 does not have", "ec2", form, "", q("Action", "RegisterImage", "Version", "2016-11-15", "Name", "hotpath arm",
			"Architecture", "aarch64", "VirtualizationType", "hvm", "RootDeviceName", "/dev/xvda"), "aarch64"},
		{"ec2 unknown action", "ec2", form, "", q("Action", "RunInstances", "Version", "2016-11-15"), "InvalidAction"},
		{"ec2 unknown launch template data", "ec2", form, "", q("Action", "CreateLaunchTemplateVersion", "Version", "2016-11-15",
			"LaunchTemplateId", lt, "LaunchTemplateData.UserData", "x"), "LaunchTemplateData.UserData is not recognized"},
		{"autoscaling unknown preference", "autoscaling", form, "", q("Action", "StartInstanceRefresh", "Version", "2011-01-01",
			"AutoScalingGroupName", "web", "Preferences.ScaleInProtectedInstances", "Wait"), "ValidationError"},
		{"autoscaling bad integer", "autoscaling", form, "", q("Action", "StartInstanceRefresh", "Version", "2011-01-01",
			"AutoScalingGroupName", "web", "Preferences.InstanceWarmup", "1m"), "expected an integer"},
		{"autoscaling rollback of $Latest", "autoscaling", form, "", q("Action", "StartInstanceRefresh", "Version", "2011-01-01",
			"AutoScalingGroupName", "web", "DesiredConfiguration.LaunchTemplate.LaunchTemplateId", lt,
			"DesiredConfiguration.LaunchTemplate.Version", "$Latest", "Preferences.AutoRollback", "true"), "AutoRollback needs a specific launch template version"},
		{"ssm unknown field", "ssm", "application/x-amz-json-1.1", "AmazonSSM.PutParameter", `{"Name":"/a","Value":"v","Type":"String","Bogus":1}`, "unknown field"},
		{"ssm wrong type", "ssm", "application/x-amz-json-1.1", "AmazonSSM.PutParameter", `{"Name":"/a","Value":"v","Type":"String","Overwrite":"yes"}`, "cannot unmarshal"},
		{"ssm reserved name", "ssm", "application/x-amz-json-1.1", "AmazonSSM.PutParameter", `{"Name":"/aws/x","Value":"v","Type":"String"}`, "prefixed"},
		{"ssm image that does not exist", "ssm", "application/x-amz-json-1.1", "AmazonSSM.PutParameter",
			`{"Name":"/hotpath/ami","Value":"ami-0123456789abcdef0","Type":"String","DataType":"aws:ec2:image"}`, "is not an image id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := raw(t, s, tc.service, "eu-west-1", tc.ct, tc.target, tc.body)
			if status != 400 || !strings.Contains(body, tc.want) {
				t.Errorf("status %d, body %s; want 400 with %q", status, body, tc.want)
			}
		})
	}
}
