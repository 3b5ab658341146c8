package fakeaws

import (
	"net/url"
	"strings"
	"testing"
)

// TestAutoRollbackRefused: Auto Scaling refuses AutoRollback (and
// RollbackInstanceRefresh) in exactly the cases the API reference lists —
// no desired configuration; the group's launch template takes its ImageId
// from a Systems Manager parameter; the group uses $Latest or $Default —
// and accepts it otherwise, a desired configuration naming $Latest
// included (the restriction is on what the group goes back to).
func TestAutoRollbackRefused(t *testing.T) {
	form := "application/x-www-form-urlencoded; charset=utf-8"
	for _, tc := range []struct {
		name    string
		image   string // version 1's ImageId; "" an AMI
		group   string // the group's version
		desired string // the desired version; "" no desired configuration
		want    string // "" accepted
	}{
		{"numbered version, AMI id", "", "1", "2", ""},
		{"desired $Latest", "", "1", "$Latest", ""},
		{"no desired configuration", "", "1", "", "there is no desired configuration"},
		{"group on $Default", "", "$Default", "2", "uses the $Default version of its launch template"},
		{"group on $Latest", "", "$Latest", "2", "uses the $Latest version of its launch template"},
		{"launch template uses an SSM parameter", "resolve:ssm:/hotpath/image", "1", "2", "uses a Systems Manager parameter instead of an AMI ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New("AKIDTEST", "secret")
			defer s.Close()
			old, next := s.AddImage("eu-west-1", "old"), s.AddImage("eu-west-1", "new")
			s.PutParameterValue("eu-west-1", "/hotpath/image", old)
			img := old
			if tc.image != "" {
				img = tc.image
			}
			lt := s.AddLaunchTemplate("eu-west-1", "web", img)
			s.AddGroup("eu-west-1", "web", lt, tc.group, 2)
			status, body := raw(t, s, "ec2", "eu-west-1", form, "", url.Values{"Action": {"CreateLaunchTemplateVersion"}, "Version": {"2016-11-15"},
				"LaunchTemplateId": {lt}, "SourceVersion": {"1"}, "LaunchTemplateData.ImageId": {next}}.Encode())
			if status != 200 {
				t.Fatalf("CreateLaunchTemplateVersion: %d %s", status, body)
			}
			start := func(autoRollback string) (int, string) {
				v := url.Values{"Action": {"StartInstanceRefresh"}, "Version": {"2011-01-01"}, "AutoScalingGroupName": {"web"},
					"Preferences.AutoRollback": {autoRollback}}
				if tc.desired != "" {
					v.Set("DesiredConfiguration.LaunchTemplate.LaunchTemplateId", lt)
					v.Set("DesiredConfiguration.LaunchTemplate.Version", tc.desired)
				}
				return raw(t, s, "autoscaling", "eu-west-1", form, "", v.Encode())
			}
			status, body = start("true")
			switch {
			case tc.want == "" && status != 200:
				t.Fatalf("AutoRollback refused: %d %s", status, body)
			case tc.want != "" && (status != 400 || !strings.Contains(body, "ValidationError") || !strings.Contains(body, tc.want)):
				t.Fatalf("AutoRollback: %d %s; want ValidationError saying %q", status, body, tc.want)
			}
			// RollbackInstanceRefresh of a refresh started without
			// AutoRollback is refused in the same cases.
			if status != 200 {
				if status, body = start("false"); status != 200 {
					t.Fatalf("without AutoRollback: %d %s", status, body)
				}
			}
			status, body = raw(t, s, "autoscaling", "eu-west-1", form, "", url.Values{"Action": {"RollbackInstanceRefresh"},
				"Version": {"2011-01-01"}, "AutoScalingGroupName": {"web"}}.Encode())
			switch {
			case tc.want == "" && status != 200:
				t.Errorf("RollbackInstanceRefresh refused: %d %s", status, body)
			case tc.want != "" && (status != 400 || !strings.Contains(body, "IrreversibleInstanceRefresh") || !strings.Contains(body, tc.want)):
				t.Errorf("RollbackInstanceRefresh: %d %s; want IrreversibleInstanceRefresh saying %q", status, body, tc.want)
			}
		})
	}
}

// TestNotFoundAfterCreate: a launch template version and an instance
// refresh the API just created are unknown to the first K lookups by id
// (VersionNotFound; left out of DescribeInstanceRefreshes), then seen; a
// version a test added directly is always seen.
func TestNotFoundAfterCreate(t *testing.T) {
	form := "application/x-www-form-urlencoded; charset=utf-8"
	s := New("AKIDTEST", "secret")
	defer s.Close()
	s.NotFoundAfterCreate = 3
	img := s.AddImage("eu-west-1", "old")
	lt := s.AddLaunchTemplate("eu-west-1", "web", img)
	s.AddGroup("eu-west-1", "web", lt, "1", 2)
	ec2 := func(kv url.Values) (int, string) {
		kv.Set("Version", "2016-11-15")
		return raw(t, s, "ec2", "eu-west-1", form, "", kv.Encode())
	}
	describe := func(v string) (int, string) {
		return ec2(url.Values{"Action": {"DescribeLaunchTemplateVersions"}, "LaunchTemplateId": {lt}, "LaunchTemplateVersion.1": {v}})
	}
	if st, body := describe("1"); st != 200 {
		t.Fatalf("version 1 (added, not created): %d %s", st, body)
	}
	if st, body := ec2(url.Values{"Action": {"CreateLaunchTemplateVersion"}, "LaunchTemplateId": {lt}, "SourceVersion": {"1"}}); st != 200 {
		t.Fatalf("create: %d %s", st, body)
	}
	for i := 1; i <= 3; i++ {
		if st, body := describe("2"); st != 400 || !strings.Contains(body, "InvalidLaunchTemplateId.VersionNotFound") {
			t.Fatalf("lookup %d of the new version: %d %s", i, st, body)
		}
	}
	if st, body := describe("2"); st != 200 {
		t.Fatalf("lookup 4: %d %s", st, body)
	}
	refresh := func(v url.Values) (int, string) {
		v.Set("Version", "2011-01-01")
		v.Set("AutoScalingGroupName", "web")
		return raw(t, s, "autoscaling", "eu-west-1", form, "", v.Encode())
	}
	st, body := refresh(url.Values{"Action": {"StartInstanceRefresh"}, "DesiredConfiguration.LaunchTemplate.LaunchTemplateId": {lt},
		"DesiredConfiguration.LaunchTemplate.Version": {"2"}})
	if st != 200 {
		t.Fatalf("start: %d %s", st, body)
	}
	id := body[strings.Index(body, "<InstanceRefreshId>")+len("<InstanceRefreshId>") : strings.Index(body, "</InstanceRefreshId>")]
	for i := 1; i <= 4; i++ {
		st, body := refresh(url.Values{"Action": {"DescribeInstanceRefreshes"}, "InstanceRefreshIds.member.1": {id}})
		if listed := strings.Contains(body, id); st != 200 || listed != (i == 4) {
			t.Errorf("lookup %d: %d, listed %t", i, st, listed)
		}
	}
	if n := s.NotFoundAnswers(); n != 6 {
		t.Errorf("%d NotFound answers, want 6", n)
	}
}
