package deploy

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hotpath-dev/hotpath/packer/internal/fakeaws"
	"github.com/hotpath-dev/hotpath/packer/internal/uitest"
	"github.com/hotpath-dev/hotpath/packer/postprocessor/rollout"
	"gopkg.in/yaml.v3"
)

const region = "eu-west-1"

// parseTemplate is readTemplate for a template given as text.
func parseTemplate(t *testing.T, src string) template {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	return template{doc.Content[0]}
}

// deployed is what deployFleet made in the fake.
type deployed struct {
	template, group, image string // the launch template's id and version 1's ImageId
	alarms                 []string
}

// deployFleet does in the fake what CloudFormation does with the
// template's launch template and Auto Scaling group, every parameter at
// its default: the ImageId is evaluated as CloudFormation evaluates it —
// a !Ref to a parameter of type AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>
// is the parameter's value when the stack is deployed (the stack fails
// when it has none), a !Sub "resolve:ssm:${P}" stays EC2's alias, which
// EC2 resolves at each launch —, and the group takes the template's
// version as the template names it (!GetAtt LaunchTemplate.LatestVersionNumber:
// 1, just created; or a literal such as $Default). Anything else the
// helper does not know fails the test, so a change of the template's form
// is seen here.
func deployFleet(t *testing.T, f *fakeaws.Server, tm template) deployed {
	t.Helper()
	param := func(n *yaml.Node) (name, typ, def string) {
		if n.Tag != "!Ref" {
			t.Fatalf("line %d: %s is not a !Ref to a parameter", n.Line, str(n))
		}
		return n.Value, str(get(tm.root, "Parameters", n.Value, "Type")), tm.paramDefault(n.Value)
	}
	var image string
	switch n := tm.prop("LaunchTemplate", "LaunchTemplateData", "ImageId"); {
	case n != nil && n.Tag == "!Ref":
		name, typ, def := param(n)
		switch typ {
		case "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>":
			pm, ok := f.Parameter(region, def)
			if !ok {
				t.Fatalf("stack fails: parameter %s (%s) does not exist", def, name)
			}
			image = pm.Value
		case "AWS::EC2::Image::Id":
			image = def
		default:
			t.Fatalf("ImageId is !Ref %s of type %s", name, typ)
		}
	case n != nil && n.Tag == "!Sub" && strings.HasPrefix(n.Value, "resolve:ssm:${"):
		name := strings.TrimSuffix(strings.TrimPrefix(n.Value, "resolve:ssm:${"), "}")
		image = "resolve:ssm:" + tm.paramDefault(name)
	default:
		t.Fatalf("ImageId is %s", str(n))
	}
	_, _, ltName := param(tm.prop("LaunchTemplate", "LaunchTemplateName"))
	lt := f.AddLaunchTemplate(region, ltName, image)

	if got := str(tm.prop("AutoScalingGroup", "LaunchTemplate", "LaunchTemplateId")); got != "!Ref LaunchTemplate" {
		t.Fatalf("the group's launch template is %s", got)
	}
	version := str(tm.prop("AutoScalingGroup", "LaunchTemplate", "Version"))
	if version == "!GetAtt LaunchTemplate.LatestVersionNumber" {
		version = "1"
	}
	_, _, group := param(tm.prop("AutoScalingGroup", "AutoScalingGroupName"))
	_, _, desired := param(tm.prop("AutoScalingGroup", "DesiredCapacity"))
	n, err := strconv.Atoi(desired)
	if err != nil {
		t.Fatal(err)
	}
	f.AddGroup(region, group, lt, version, n)
	d := deployed{template: lt, group: group, image: image}

	// Every AWS::CloudWatch::Alarm, by its AlarmName.
	res := get(tm.root, "Resources")
	for i := 0; i+1 < len(res.Content); i += 2 {
		if str(get(res.Content[i+1], "Type")) != "AWS::CloudWatch::Alarm" {
			continue
		}
		n := get(res.Content[i+1], "Properties", "AlarmName")
		if n == nil || n.Tag != "!Sub" {
			t.Fatalf("alarm %s: AlarmName %s, want a !Sub of parameters", res.Content[i].Value, str(n))
		}
		name := regexp.MustCompile(`\$\{(\w+)\}`).ReplaceAllStringFunc(n.Value, func(m string) string {
			return tm.paramDefault(m[2 : len(m)-1])
		})
		f.AddAlarm(region, name)
		d.alarms = append(d.alarms, name)
	}
	return d
}

// roll runs example-fleet.pkr.hcl's hotpath-rollout block, with its
// defaults, against the fake on an AMI.
func roll(t *testing.T, f *fakeaws.Server, ami string) (*uitest.UI, error) {
	t.Helper()
	v, _ := rolloutBlock(t)
	pp := new(rollout.PostProcessor)
	if err := pp.Configure(v, map[string]interface{}{
		"access_key": f.AccessKey, "secret_key": f.SecretKey,
		"custom_endpoint_ec2": f.URL, "custom_endpoint_ssm": f.URL, "custom_endpoint_autoscaling": f.URL,
		"poll_interval": "1ms",
	}); err != nil {
		t.Fatal(err)
	}
	ui := new(uitest.UI)
	_, _, _, err := pp.PostProcess(context.Background(), ui, &packersdk.MockArtifact{BuilderIdValue: "hotpath.post-processor.ami", IdValue: region + ":" + ami})
	return ui, err
}

// TestFleetFirstRolls: the fleet deployed from fleet.yaml as the README
// says (the first AMI published to the parameter, then the stack) rolls
// with example-fleet.pkr.hcl's settings — auto rollback on — twice, both
// successful; its launch template carries an AMI id, not an alias.
func TestFleetFirstRolls(t *testing.T) {
	f := fakeaws.New("AKIDFLEET", "secret")
	defer f.Close()
	first := f.AddImage(region, "hotpath 1.0.0")
	v, _ := rolloutBlock(t)
	param := v.GetAttr("ssm_parameter").AsString()
	f.PutParameterAs(region, param, first, "aws:ec2:image")
	d := deployFleet(t, f, readTemplate(t))
	if d.image != first {
		t.Fatalf("the deployed launch template's ImageId is %s, want the parameter's AMI %s", d.image, first)
	}
	// The example watches the template's alarm (the fake refuses a
	// refresh watching an alarm it does not have, too).
	alarms := v.GetAttr("alarms")
	if alarms.LengthInt() == 0 {
		t.Error("example-fleet.pkr.hcl watches no alarm")
	}
	for it := alarms.ElementIterator(); it.Next(); {
		if _, a := it.Element(); !slices.Contains(d.alarms, a.AsString()) {
			t.Errorf("example-fleet.pkr.hcl watches %s, the template makes %v", a.AsString(), d.alarms)
		}
	}
	for i, name := range []string{"hotpath 1.0.1", "hotpath 1.0.2"} {
		ami := f.AddImage(region, name)
		ui, err := roll(t, f, ami)
		if err != nil {
			t.Fatalf("roll %d: %v\n%s", i+1, err, ui.Text())
		}
		g := f.GroupState(region, d.group)
		last := g.Refreshes[len(g.Refreshes)-1]
		if want := strconv.Itoa(i + 2); g.Version != want || g.Running != ami || last.Status != "Successful" || !last.AutoRollback {
			t.Errorf("roll %d: group on version %s running %s, refresh %s auto rollback %t; want version %s running %s, Successful with auto rollback",
				i+1, g.Version, g.Running, last.Status, last.AutoRollback, want, ami)
		}
		if pm, _ := f.Parameter(region, param); pm.Value != ami {
			t.Errorf("roll %d: parameter %s", i+1, pm.Value)
		}
	}
}

// TestFleetWithSSMAliasRefused: the template as it was (ImageId
// resolve:ssm:, the parameter a plain String) deploys a group Auto Scaling
// cannot roll back: the first roll with the example's settings is refused
// before anything changes, with the way on.
func TestFleetWithSSMAliasRefused(t *testing.T) {
	src, err := os.ReadFile("fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	old := strings.NewReplacer(
		"ImageId: !Ref ImageParameter", `ImageId: !Sub "resolve:ssm:${ImageParameter}"`,
		"Type: AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>", "Type: String",
	).Replace(string(src))
	if old == string(src) {
		t.Fatal("nothing replaced")
	}
	f := fakeaws.New("AKIDFLEET", "secret")
	defer f.Close()
	first := f.AddImage(region, "hotpath 1.0.0")
	v, _ := rolloutBlock(t)
	f.PutParameterAs(region, v.GetAttr("ssm_parameter").AsString(), first, "aws:ec2:image")
	d := deployFleet(t, f, parseTemplate(t, old))
	if !strings.HasPrefix(d.image, "resolve:ssm:") {
		t.Fatalf("ImageId %s", d.image)
	}
	ui, err := roll(t, f, f.AddImage(region, "hotpath 1.0.1"))
	if err == nil || !strings.Contains(err.Error(), "cannot roll back to a launch template that takes its AMI from a Systems Manager parameter") ||
		!strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("err %v\n%s", err, ui.Text())
	}
	if n := f.CountCalls("PutParameter", 0) + f.CountCalls("CreateLaunchTemplateVersion", 0) + f.CountCalls("StartInstanceRefresh", 0); n != 0 {
		t.Errorf("%d changes made", n)
	}
}

// TestFleetAlarmRollsBack: end to end with the template and the example:
// the fleet's alarm goes into ALARM when half the fleet runs the new AMI;
// Auto Scaling rolls the refresh back, and the rollout reports it, puts
// the parameter back and leaves the group on its previous version.
func TestFleetAlarmRollsBack(t *testing.T) {
	f := fakeaws.New("AKIDFLEET", "secret")
	defer f.Close()
	first := f.AddImage(region, "hotpath 1.0.0")
	v, _ := rolloutBlock(t)
	param := v.GetAttr("ssm_parameter").AsString()
	f.PutParameterAs(region, param, first, "aws:ec2:image")
	d := deployFleet(t, f, readTemplate(t))
	if len(d.alarms) != 1 {
		t.Fatalf("the template makes alarms %v", d.alarms)
	}
	f.FireAlarm(region, d.alarms[0], 50, "UnHealthyHostCount >= 1 for 2 of 2 datapoints")
	ui, err := roll(t, f, f.AddImage(region, "hotpath 1.0.1"))
	t.Logf("the rollout's report:\n%s", ui.Text())
	if err == nil {
		t.Fatal("the roll succeeded with the alarm in ALARM")
	}
	for _, s := range []string{
		"RollbackSuccessful: Instance refresh failed: alarm in ALARM state: " + d.alarms[0],
		"group hotpath in eu-west-1 was rolled back: every instance runs its previous configuration",
	} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the report does not say %q: %v", s, err)
		}
	}
	for _, s := range []string{"auto rollback true, alarms " + d.alarms[0], "hotpath (eu-west-1): RollbackInProgress 50%",
		"SSM parameter " + param + " in eu-west-1 is " + first + " again", "default version is 1 again"} {
		if !ui.Contains(s) {
			t.Errorf("UI does not say %q", s)
		}
	}
	g := f.GroupState(region, d.group)
	if g.Version != "1" || g.Running != first || g.Refreshes[0].Status != "RollbackSuccessful" {
		t.Errorf("group on version %s running %s, refresh %s", g.Version, g.Running, g.Refreshes[0].Status)
	}
	if pm, _ := f.Parameter(region, param); pm.Value != first {
		t.Errorf("parameter %s, want %s back", pm.Value, first)
	}
}
