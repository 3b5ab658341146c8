package fakeaws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
	return rawAt(t, s, time.Now(), secret, service, region, contentType, target, body, tamper)
}

// rawAt is rawSigned with the signing time given.
func rawAt(t *testing.T, s *Server, at time.Time, secret, service, region, contentType, target, body string, tamper func(*http.Request)) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/", strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	if target != "" {
		req.Header.Set("X-Amz-Target", target)
	}
	sum := sha256.Sum256([]byte(body))
	creds := aws.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: secret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), service, region, at); err != nil {
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
		// Auto Scaling lists are Name.member.N, not EC2's Name.N.
		{"autoscaling list without member", "autoscaling", form, "", q("Action", "DescribeAutoScalingGroups", "Version", "2011-01-01",
			"AutoScalingGroupNames.1", "web"), "AutoScalingGroupNames.1 is not recognized"},
		{"ssm unknown field", "ssm", "application/x-amz-json-1.1", "AmazonSSM.PutParameter", `{"Name":"/a","Value":"v","Type":"String","Bogus":1}`, "unknown field"},
		{"ssm wrong type", "ssm", "application/x-amz-json-1.1", "AmazonSSM.PutParameter", `{"Name":"/a","Value":"v","Type":"String","Overwrite":"yes"}`, "cannot unmarshal"},
		{"ssm reserved name", "ssm", "application/x-amz-json-1.1", "AmazonSSM.PutParameter", `{"Name":"/aws/x","Value":"v","Type":"String"}`, "prefixed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := raw(t, s, tc.service, "eu-west-1", tc.ct, tc.target, tc.body)
			if status != 400 || !strings.Contains(body, tc.want) {
				t.Errorf("status %d, body %s; want 400 with %q", status, body, tc.want)
			}
		})
	}
}

// TestClockSkew: a request signed more than 5 minutes away from the
// server's clock is refused with RequestTimeTooSkewed, in the service's
// own error format and with the server's time in Date (what the SDK
// corrects its clock from); within 5 minutes it passes.
func TestClockSkew(t *testing.T) {
	s := New("AKIDTEST", "secret")
	defer s.Close()
	form := "application/x-www-form-urlencoded; charset=utf-8"
	ec2Body := "Action=DescribeImages&Version=2016-11-15&Owner.1=self"
	ssmBody := `{"Name":"/hotpath/none"}`
	serverNow := time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		name          string
		server        time.Time // zero: the real clock
		signed        time.Duration
		service, want string
		status        int
	}{
		{"in time", time.Time{}, 0, "ec2", "imagesSet", 200},
		{"4 minutes ahead", time.Time{}, 4 * time.Minute, "ec2", "imagesSet", 200},
		{"6 minutes ahead", time.Time{}, 6 * time.Minute, "ec2", "<Code>RequestTimeTooSkewed</Code>", 403},
		{"6 minutes behind", time.Time{}, -6 * time.Minute, "ec2", "<Code>RequestTimeTooSkewed</Code>", 403},
		{"ssm 6 minutes behind", time.Time{}, -6 * time.Minute, "ssm", `"__type":"RequestTimeTooSkewed"`, 403},
		{"server clock an hour back", serverNow, 0, "ec2", "<Code>RequestTimeTooSkewed</Code>", 403},
		{"signed by the server's clock", serverNow, -time.Hour, "ec2", "imagesSet", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.SetClock(nil)
			if !tc.server.IsZero() {
				s.SetClock(func() time.Time { return tc.server })
			}
			body, ct, target := ec2Body, form, ""
			if tc.service == "ssm" {
				body, ct, target = ssmBody, "application/x-amz-json-1.1", "AmazonSSM.GetParameter"
			}
			status, resp := rawAt(t, s, time.Now().Add(tc.signed), s.SecretKey, tc.service, "eu-west-1", ct, target, body, nil)
			if status != tc.status || !strings.Contains(resp, tc.want) {
				t.Errorf("status %d, body %s; want %d with %q", status, resp, tc.status, tc.want)
			}
		})
	}
}

// TestImageParameter: PutParameter of an aws:ec2:image value answers 200
// at once and is validated afterwards: the next read still sees the old
// state, a later one the new value, or the old state for good when the
// value is no AMI of the region. A parameter's data type cannot change
// to or from aws:ec2:image.
func TestImageParameter(t *testing.T) {
	s := New("AKIDTEST", "secret")
	defer s.Close()
	ami := s.AddImage("eu-west-1", "hotpath 1")
	other := s.AddImage("us-east-1", "hotpath 1")
	js := "application/x-amz-json-1.1"
	put := func(name, value, dataType string) (int, string) {
		return raw(t, s, "ssm", "eu-west-1", js, "AmazonSSM.PutParameter",
			fmt.Sprintf(`{"Name":%q,"Value":%q,"Type":"String","DataType":%q,"Overwrite":true}`, name, value, dataType))
	}
	get := func(name string) string {
		_, body := raw(t, s, "ssm", "eu-west-1", js, "AmazonSSM.GetParameter", fmt.Sprintf(`{"Name":%q}`, name))
		return body
	}
	for _, tc := range []struct {
		name, value string
		stored      bool
	}{
		{"an AMI of the region", ami, true},
		{"no AMI at all", "ami-0123456789abcdef0", false},
		{"an AMI of another region", other, false},
		{"not an AMI id", "hello", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "/hotpath/" + strings.ReplaceAll(tc.name, " ", "-")
			if status, body := put(name, tc.value, "aws:ec2:image"); status != 200 || !strings.Contains(body, `"Version":1`) {
				t.Fatalf("put: %d %s", status, body)
			}
			if body := get(name); !strings.Contains(body, "ParameterNotFound") {
				t.Errorf("first read, before validation: %s", body)
			}
			body := get(name)
			if got := strings.Contains(body, `"Value":"`+tc.value+`"`); got != tc.stored {
				t.Errorf("second read: %s (stored: %v, want %v)", body, got, tc.stored)
			}
			if _, ok := s.Parameter("eu-west-1", name); ok != tc.stored {
				t.Errorf("stored %v, want %v", ok, tc.stored)
			}
		})
	}
	if status, body := put("/hotpath/text", "v1", "text"); status != 200 {
		t.Fatalf("put text: %d %s", status, body)
	}
	for _, tc := range []struct{ name, value, dataType string }{
		{"/hotpath/text", ami, "aws:ec2:image"},
		{"/hotpath/an-AMI-of-the-region", "v2", "text"},
		{"/hotpath/an-AMI-of-the-region", "v2", ""},
	} {
		if status, body := put(tc.name, tc.value, tc.dataType); status != 400 || !strings.Contains(body, "data type") {
			t.Errorf("%s to data type %q: %d %s, want a refusal", tc.name, tc.dataType, status, body)
		}
	}
}

// TestDeregistrationCooldown: protection enabled with cooldown holds for
// 24 hours after it is disabled, by the fake's clock; without cooldown
// it ends at once.
func TestDeregistrationCooldown(t *testing.T) {
	s := New("AKIDTEST", "secret")
	defer s.Close()
	now := time.Now()
	s.SetClock(func() time.Time { return now })
	form := "application/x-www-form-urlencoded; charset=utf-8"
	ec2 := func(action, image string, kv ...string) (int, string) {
		v := url.Values{"Action": {action}, "Version": {"2016-11-15"}, "ImageId": {image}}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		// Signed by the fake's clock: time passes for the client too.
		return rawAt(t, s, now, s.SecretKey, "ec2", "eu-west-1", form, "", v.Encode(), nil)
	}
	for _, cooldown := range []bool{false, true} {
		now = time.Now()
		ami := s.AddImage("eu-west-1", fmt.Sprintf("hotpath %v", cooldown))
		ec2("EnableImageDeregistrationProtection", ami, "WithCooldown", fmt.Sprint(cooldown))
		if status, body := ec2("DeregisterImage", ami); status != 400 {
			t.Errorf("cooldown %v: deregistered while protected: %d %s", cooldown, status, body)
		}
		_, body := ec2("DisableImageDeregistrationProtection", ami)
		until := now.Add(24 * time.Hour).UTC().Format("2006-01-02T15:04:05.000Z")
		if want := map[bool]string{false: "<return>disabled</return>", true: "disabled-until-" + until}[cooldown]; !strings.Contains(body, want) {
			t.Errorf("cooldown %v: disable answered %s, want %s", cooldown, body, want)
		}
		if cooldown {
			now = now.Add(24*time.Hour - time.Second)
			if status, body := ec2("DeregisterImage", ami); status != 400 || !strings.Contains(body, "cooldown ends at "+until) {
				t.Errorf("deregistered 1 s before the cooldown ends: %d %s", status, body)
			}
			now = now.Add(2 * time.Second)
		}
		if status, body := ec2("DeregisterImage", ami); status != 200 {
			t.Errorf("cooldown %v: not deregistered once the protection is off: %d %s", cooldown, status, body)
		}
	}
}

// TestEncryptedNotPublic: an AMI whose snapshot is encrypted can be
// shared with accounts, never with the group "all".
func TestEncryptedNotPublic(t *testing.T) {
	s := New("AKIDTEST", "secret")
	defer s.Close()
	src := s.AddImage("eu-west-1", "hotpath plain")
	form := "application/x-www-form-urlencoded; charset=utf-8"
	q := func(kv ...string) string {
		v := url.Values{"Version": {"2016-11-15"}}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v.Encode()
	}
	status, body := raw(t, s, "ec2", "eu-west-1", form, "", q("Action", "CopyImage", "Name", "hotpath enc",
		"SourceImageId", src, "SourceRegion", "eu-west-1", "Encrypted", "true"))
	enc, _, _ := strings.Cut(strings.TrimPrefix(body[strings.Index(body, "<imageId>"):], "<imageId>"), "<")
	if status != 200 || enc == "" {
		t.Fatalf("copy: %d %s", status, body)
	}
	for _, tc := range []struct {
		image, key, value string
		status            int
	}{
		{src, "LaunchPermission.Add.1.Group", "all", 200},
		{enc, "LaunchPermission.Add.1.Group", "all", 400},
		{enc, "LaunchPermission.Add.1.UserId", "111122223333", 200},
	} {
		status, body := raw(t, s, "ec2", "eu-west-1", form, "", q("Action", "ModifyImageAttribute", "ImageId", tc.image, tc.key, tc.value))
		if status != tc.status || tc.status == 400 && !strings.Contains(body, "cannot be made public") {
			t.Errorf("%s %s=%s: %d %s, want %d", tc.image, tc.key, tc.value, status, body, tc.status)
		}
	}
}

// DescribeAutoScalingGroups reports a plain group's launch template under
// LaunchTemplate and a mixed group's under MixedInstancesPolicy, with its
// overrides, as the API reference's AutoScalingGroup does; unknown names
// are left out.
func TestDescribeAutoScalingGroups(t *testing.T) {
	s := New("AKIDTEST", "secret")
	defer s.Close()
	lt := s.AddLaunchTemplate("eu-west-1", "web", "ami-0123456789abcdef0")
	s.AddGroup("eu-west-1", "plain", lt, "1", 2)
	s.AddGroup("eu-west-1", "mixed", lt, "$Default", 3)
	s.SetMixedInstancesPolicy("eu-west-1", "mixed", MixedInstancesPolicy{Overrides: []Override{
		{InstanceType: "c5n.metal"}, {Requirements: &InstanceRequirements{VCPUMin: 4, MemoryMiBMin: 8192, BareMetal: "included"}},
	}})
	form := "application/x-www-form-urlencoded; charset=utf-8"
	status, body := raw(t, s, "autoscaling", "eu-west-1", form, "",
		"Action=DescribeAutoScalingGroups&Version=2011-01-01&AutoScalingGroupNames.member.1=plain&AutoScalingGroupNames.member.2=mixed&AutoScalingGroupNames.member.3=gone")
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	for _, want := range []string{
		"<member><AutoScalingGroupName>mixed</AutoScalingGroupName>",
		"<MixedInstancesPolicy><LaunchTemplate><LaunchTemplateSpecification><LaunchTemplateId>" + lt + "</LaunchTemplateId><LaunchTemplateName>web</LaunchTemplateName><Version>$Default</Version>",
		"<Overrides><member><InstanceType>c5n.metal</InstanceType></member><member><InstanceRequirements><VCpuCount><Min>4</Min></VCpuCount><MemoryMiB><Min>8192</Min></MemoryMiB><BareMetal>included</BareMetal></InstanceRequirements></member></Overrides>",
		"<AutoScalingGroupName>plain</AutoScalingGroupName><AutoScalingGroupARN>",
		"</AutoScalingGroupARN><LaunchTemplate><LaunchTemplateId>" + lt + "</LaunchTemplateId><LaunchTemplateName>web</LaunchTemplateName><Version>1</Version></LaunchTemplate>",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("answer lacks %s\n%s", want, body)
		}
	}
	if strings.Contains(body, "gone") || strings.Count(body, "<AutoScalingGroupName>") != 2 {
		t.Errorf("want exactly the two groups that exist:\n%s", body)
	}
}
