package deploy

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/awslabs/goformation/v7"
	"github.com/awslabs/goformation/v7/intrinsics"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/mgmt"
	"github.com/hotpath-dev/hotpath/packer/postprocessor/rollout"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	"gopkg.in/yaml.v3"
)

// Validation. cfn-lint (PyPI) is what the CloudFormation world uses, and
// `make fleet-lint` runs it where it is installed; PyPI cannot be reached
// from the project's machines, so no project file can install it, and the
// check every `make test` makes is this one, with goformation (Go module,
// pinned in go.mod). goformation holds the CloudFormation resource
// specification as Go types and decodes each resource's Properties with
// DisallowUnknownFields: an unknown resource type, a misspelt or misplaced
// property at any depth, or a literal of the wrong type (a string where a
// number goes) fails. It does not know allowed values (HttpTokens:
// requird), required properties or intrinsic functions' arguments, so
// those are checked by hand below (references) or by the agreement tests.
// (npm's "cfn-lint" is another, older project with its own outdated copy of
// the specification; Debian has no CloudFormation linter.)
func TestFleetTemplateDecodes(t *testing.T) {
	src, err := os.ReadFile("fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := decodeTemplate(src); err != nil {
		t.Fatalf("fleet.yaml: %v", err)
	}
	// The same check catches a misspelt property, nested or not, and a
	// literal of the wrong type.
	for _, bad := range []struct{ from, to string }{
		{"HealthCheckPath: /healthz", "HealthCheckPth: /healthz"},
		{"HttpPutResponseHopLimit: 1", "HttpPutResponseHopLimt: 1"},
		{"HealthCheckGracePeriod: 60", "HealthCheckGracePeriod: sixty"},
		{"Type: AWS::EC2::LaunchTemplate", "Type: AWS::EC2::LaunchTemplat"},
	} {
		if !strings.Contains(string(src), bad.from) {
			t.Fatalf("fleet.yaml has no %q to break", bad.from)
		}
		if err := decodeTemplate([]byte(strings.Replace(string(src), bad.from, bad.to, 1))); err == nil {
			t.Errorf("%q decodes", bad.to)
		}
	}
}

// decodeTemplate decodes a template with goformation, every intrinsic
// function replaced by null: the property names and literals are checked,
// never a value goformation would have to guess (a Ref to a Number
// parameter is a string in CloudFormation, a number in its defaults).
func decodeTemplate(src []byte) error {
	none := func(string, any, any) any { return nil }
	overrides := map[string]intrinsics.IntrinsicHandler{"Ref": none}
	for _, fn := range []string{"Base64", "And", "Equals", "If", "Not", "Or", "FindInMap", "GetAtt", "GetAZs",
		"ImportValue", "Join", "Select", "Split", "Sub", "Cidr", "Transform"} {
		overrides["Fn::"+fn] = none
	}
	tmpl, err := goformation.ParseYAMLWithOptions(src, &intrinsics.ProcessorOptions{IntrinsicHandlerOverrides: overrides})
	if err != nil {
		return err
	}
	if len(tmpl.Resources) == 0 {
		return fmt.Errorf("no resources")
	}
	return nil
}

// template is fleet.yaml as YAML nodes, the short-form intrinsics kept as
// tags (!Ref, !Sub, !GetAtt).
type template struct{ root *yaml.Node }

func readTemplate(t *testing.T) template {
	t.Helper()
	src, err := os.ReadFile("fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	return template{doc.Content[0]}
}

// get follows path through mappings (names) and sequences (indexes).
func get(n *yaml.Node, path ...string) *yaml.Node {
	for _, p := range path {
		if n == nil {
			return nil
		}
		switch n.Kind {
		case yaml.MappingNode:
			var next *yaml.Node
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == p {
					next = n.Content[i+1]
				}
			}
			n = next
		case yaml.SequenceNode:
			i, err := strconv.Atoi(p)
			if err != nil || i >= len(n.Content) {
				return nil
			}
			n = n.Content[i]
		default:
			return nil
		}
	}
	return n
}

// str renders a node as it reads in the template: "!Ref X", "80", "a".
func str(n *yaml.Node) string {
	switch {
	case n == nil:
		return "<missing>"
	case n.Kind == yaml.ScalarNode && strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!"):
		return n.Tag + " " + n.Value
	case n.Kind == yaml.ScalarNode:
		return n.Value
	}
	return fmt.Sprintf("<%s node>", n.Tag)
}

func (tm template) prop(resource string, path ...string) *yaml.Node {
	return get(tm.root, append([]string{"Resources", resource, "Properties"}, path...)...)
}

func (tm template) paramDefault(name string) string {
	return str(get(tm.root, "Parameters", name, "Default"))
}

// Every !Ref, !GetAtt and ${} of a !Sub names a parameter, a resource or
// a pseudo parameter; every condition used is defined. (goformation does
// not look: it resolves what it can and nulls the rest.)
func TestFleetTemplateReferences(t *testing.T) {
	tm := readTemplate(t)
	names := map[string]bool{"AWS::NoValue": true, "AWS::Region": true, "AWS::StackName": true, "AWS::AccountId": true, "AWS::Partition": true, "AWS::URLSuffix": true}
	for _, section := range []string{"Parameters", "Resources"} {
		s := get(tm.root, section)
		for i := 0; i < len(s.Content); i += 2 {
			names[s.Content[i].Value] = true
		}
	}
	conds := map[string]bool{}
	if c := get(tm.root, "Conditions"); c != nil {
		for i := 0; i < len(c.Content); i += 2 {
			conds[c.Content[i].Value] = true
		}
	}
	subRE := regexp.MustCompile(`\$\{([^}!]+)\}`)
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		check := func(name, how string) {
			if !names[name] {
				t.Errorf("line %d: %s %s names nothing in the template", n.Line, how, name)
			}
		}
		switch {
		case n.Tag == "!Ref":
			check(n.Value, "!Ref")
		case n.Tag == "!GetAtt":
			check(strings.SplitN(n.Value, ".", 2)[0], "!GetAtt")
		case n.Tag == "!Sub" && n.Kind == yaml.ScalarNode:
			for _, m := range subRE.FindAllStringSubmatch(n.Value, -1) {
				check(strings.SplitN(m[1], ".", 2)[0], "!Sub")
			}
		case n.Tag == "!If" && len(n.Content) > 0 && !conds[n.Content[0].Value]:
			t.Errorf("line %d: !If on undefined condition %s", n.Line, n.Content[0].Value)
		}
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == "Ref" && n.Content[i+1].Kind == yaml.ScalarNode {
					check(n.Content[i+1].Value, "Ref")
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(tm.root)
}

// The ports, the health check and the instance security group agree with
// the image's defaults (init/config) and its management endpoint.
func TestFleetAgreesWithImage(t *testing.T) {
	tm := readTemplate(t)
	d := config.Default()
	if got := tm.paramDefault("WorkloadPort"); got != strconv.Itoa(d.WorkloadPort) {
		t.Errorf("WorkloadPort defaults to %s, the image's workload.port to %d", got, d.WorkloadPort)
	}
	if got := tm.paramDefault("ManagementPort"); got != strconv.Itoa(d.MgmtPort) {
		t.Errorf("ManagementPort defaults to %s, the image's mgmt.port to %d", got, d.MgmtPort)
	}
	for _, c := range []struct {
		path []string
		want string
	}{
		{[]string{"Protocol"}, "TCP"},
		{[]string{"Port"}, "!Ref WorkloadPort"},
		{[]string{"HealthCheckProtocol"}, "HTTP"},
		{[]string{"HealthCheckPort"}, "!Ref ManagementPort"},
		{[]string{"HealthCheckPath"}, "/healthz"},
		{[]string{"Matcher", "HttpCode"}, "200"},
	} {
		if got := str(tm.prop("TargetGroup", c.path...)); got != c.want {
			t.Errorf("TargetGroup %s = %s, want %s", strings.Join(c.path, "."), got, c.want)
		}
	}
	// The management endpoint answers that path: 503 while there is no
	// workload, not 404.
	rec := httptest.NewRecorder()
	mgmt.Handler(mgmt.Options{}).ServeHTTP(rec, httptest.NewRequest("GET", str(tm.prop("TargetGroup", "HealthCheckPath")), nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("the management endpoint answers the health check path with %d, want 503 before the workload runs", rec.Code)
	}

	// Only the two ports, only from the NLB.
	ingress := tm.prop("InstanceSecurityGroup", "SecurityGroupIngress")
	var opened []string
	for _, rule := range ingress.Content {
		from, to := str(get(rule, "FromPort")), str(get(rule, "ToPort"))
		if from != to || str(get(rule, "IpProtocol")) != "tcp" || str(get(rule, "SourceSecurityGroupId")) != "!Ref LoadBalancerSecurityGroup" ||
			get(rule, "CidrIp") != nil || get(rule, "CidrIpv6") != nil {
			t.Errorf("instance ingress rule at line %d is not one TCP port from the NLB's group", rule.Line)
		}
		opened = append(opened, from)
	}
	if want := []string{"!Ref WorkloadPort", "!Ref ManagementPort"}; !slices.Equal(opened, want) {
		t.Errorf("the instances open %v, want %v", opened, want)
	}

	// IMDSv2 only, one hop; the AMI from the parameter.
	for k, want := range map[string]string{"HttpTokens": "required", "HttpPutResponseHopLimit": "1", "HttpEndpoint": "enabled"} {
		if got := str(tm.prop("LaunchTemplate", "LaunchTemplateData", "MetadataOptions", k)); got != want {
			t.Errorf("MetadataOptions.%s = %s, want %s", k, got, want)
		}
	}
	// An AMI id CloudFormation reads from the parameter at deploy, not
	// EC2's resolve:ssm: alias: Auto Scaling does not roll back to a
	// launch template with an alias (TestFleetFirstRolls).
	if got := str(tm.prop("LaunchTemplate", "LaunchTemplateData", "ImageId")); got != "!Ref ImageParameter" {
		t.Errorf("ImageId = %s, want !Ref ImageParameter", got)
	}
	if got := str(get(tm.root, "Parameters", "ImageParameter", "Type")); got != "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>" {
		t.Errorf("ImageParameter is a %s, want the AMI id from the SSM parameter", got)
	}
	if got := str(tm.prop("LaunchTemplate", "LaunchTemplateData", "KeyName")); got != "<missing>" {
		t.Errorf("a key pair (%s): there is no ssh", got)
	}
}

// rolloutBlock is the hotpath-rollout block of example-fleet.pkr.hcl,
// decoded with the post-processor's own spec (variables at their defaults)
// and accepted by its Configure.
func rolloutBlock(t *testing.T) (cty.Value, map[string]string) {
	t.Helper()
	src, err := os.ReadFile("../example-fleet.pkr.hcl")
	if err != nil {
		t.Fatal(err)
	}
	f, diags := hclparse.NewParser().ParseHCL(src, "example-fleet.pkr.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	content, _, diags := f.Body.PartialContent(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
		{Type: "variable", LabelNames: []string{"name"}}, {Type: "build"}}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	vars := map[string]string{}
	ctyVars := map[string]cty.Value{}
	for _, b := range content.Blocks.OfType("variable") {
		var v struct {
			Type    hcl.Expression `hcl:"type"`
			Default string         `hcl:"default"`
		}
		if d := gohcl.DecodeBody(b.Body, nil, &v); d.HasErrors() {
			t.Fatal(d)
		}
		vars[b.Labels[0]] = v.Default
		ctyVars[b.Labels[0]] = cty.StringVal(v.Default)
	}
	ectx := &hcl.EvalContext{
		Variables: map[string]cty.Value{"var": cty.ObjectVal(ctyVars)},
		Functions: map[string]function.Function{"formatdate": stdlib.FormatDateFunc},
	}
	for _, b := range content.Blocks.OfType("build") {
		bc, _, d := b.Body.PartialContent(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "post-processors"}}})
		if d.HasErrors() {
			t.Fatal(d)
		}
		for _, chain := range bc.Blocks {
			cc, _, d := chain.Body.PartialContent(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "post-processor", LabelNames: []string{"type"}}}})
			if d.HasErrors() {
				t.Fatal(d)
			}
			for _, p := range cc.Blocks {
				if p.Labels[0] != "hotpath-rollout" {
					continue
				}
				pp := new(rollout.PostProcessor)
				v, d := hcldec.Decode(p.Body, pp.ConfigSpec(), ectx)
				if d.HasErrors() {
					t.Fatal(d)
				}
				if err := pp.Configure(v); err != nil {
					t.Fatalf("hotpath-rollout refuses example-fleet.pkr.hcl: %v", err)
				}
				return v, vars
			}
		}
	}
	t.Fatal("example-fleet.pkr.hcl has no hotpath-rollout post-processor")
	return cty.NilVal, nil
}

// The names the rollout looks for, the parameter it writes and the
// refresh preferences it asks for are the template's defaults.
func TestFleetAgreesWithRollout(t *testing.T) {
	tm := readTemplate(t)
	v, vars := rolloutBlock(t)
	if got, want := tm.paramDefault("ImageParameter"), v.GetAttr("ssm_parameter").AsString(); got != want {
		t.Errorf("ImageParameter defaults to %s, the rollout writes %s", got, want)
	}
	targets := v.GetAttr("target")
	if targets.LengthInt() != 1 {
		t.Fatalf("%d target blocks, want the fleet's one", targets.LengthInt())
	}
	target := targets.Index(cty.NumberIntVal(0))
	if got, want := tm.paramDefault("LaunchTemplateName"), target.GetAttr("launch_template_name").AsString(); got != want {
		t.Errorf("LaunchTemplateName defaults to %s, the rollout's target is %s (var.launch_template %s)", got, want, vars["launch_template"])
	}
	groups := target.GetAttr("auto_scaling_groups")
	if got := tm.paramDefault("AutoScalingGroupName"); groups.LengthInt() != 1 || groups.Index(cty.NumberIntVal(0)).AsString() != got {
		t.Errorf("AutoScalingGroupName defaults to %s, the rollout refreshes %#v", got, groups)
	}
	if got := str(tm.prop("LaunchTemplate", "LaunchTemplateName")); got != "!Ref LaunchTemplateName" {
		t.Errorf("LaunchTemplateName = %s", got)
	}
	if got := str(tm.prop("AutoScalingGroup", "AutoScalingGroupName")); got != "!Ref AutoScalingGroupName" {
		t.Errorf("AutoScalingGroupName = %s", got)
	}

	num := func(name string) string {
		bf := v.GetAttr(name).AsBigFloat()
		i, _ := bf.Int64()
		return strconv.FormatInt(i, 10)
	}
	warmup, err := time.ParseDuration(v.GetAttr("instance_warmup").AsString())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path []string
		want string
		why  string
	}{
		{[]string{"InstanceMaintenancePolicy", "MinHealthyPercentage"}, num("min_healthy_percentage"), "min_healthy_percentage"},
		{[]string{"InstanceMaintenancePolicy", "MaxHealthyPercentage"}, num("max_healthy_percentage"), "max_healthy_percentage"},
		{[]string{"DefaultInstanceWarmup"}, strconv.Itoa(int(warmup / time.Second)), "instance_warmup"},
		// Instance Refresh waits for the target group's health check only
		// with ELB health checks.
		{[]string{"HealthCheckType"}, "ELB", "the refresh's health"},
		{[]string{"TargetGroupARNs", "0"}, "!Ref TargetGroup", "the refresh's health"},
		{[]string{"VPCZoneIdentifier"}, "!Ref Subnets", "across subnets"},
		{[]string{"LaunchTemplate", "LaunchTemplateId"}, "!Ref LaunchTemplate", "the rollout's template"},
	} {
		if got := str(tm.prop("AutoScalingGroup", c.path...)); got != c.want {
			t.Errorf("AutoScalingGroup %s = %s, want %s (%s)", strings.Join(c.path, "."), got, c.want, c.why)
		}
	}
	if got := str(get(tm.root, "Parameters", "Subnets", "Type")); got != "List<AWS::EC2::Subnet::Id>" {
		t.Errorf("Subnets is a %s", got)
	}
}
