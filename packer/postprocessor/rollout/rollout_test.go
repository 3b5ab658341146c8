package rollout

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hotpath-dev/hotpath/packer/internal/fakeaws"
	"github.com/hotpath-dev/hotpath/packer/internal/uitest"
)

const param = "/hotpath/prod/x86_64/latest/image_id"

// fleet is a fake account with an old AMI running on two groups from one
// launch template in eu-west-1, and a new AMI to roll out.
type fleet struct {
	f            *fakeaws.Server
	lt, old, new string
}

func newFleet(t *testing.T) *fleet {
	f := fakeaws.New("AKIDRO", "secret")
	t.Cleanup(f.Close)
	fl := &fleet{f: f, old: f.AddImage("eu-west-1", "hotpath 1"), new: f.AddImage("eu-west-1", "hotpath 2")}
	fl.lt = f.AddLaunchTemplate("eu-west-1", "hotpath", fl.old)
	f.AddGroup("eu-west-1", "web-a", fl.lt, "1", 4)
	f.AddGroup("eu-west-1", "web-b", fl.lt, "1", 10)
	f.PutParameterValue("eu-west-1", param, fl.old)
	return fl
}

func (fl *fleet) pp(t *testing.T, extra map[string]interface{}) *PostProcessor {
	t.Helper()
	raw := map[string]interface{}{
		"region": "eu-west-1", "access_key": fl.f.AccessKey, "secret_key": fl.f.SecretKey,
		"custom_endpoint_ec2": fl.f.URL, "custom_endpoint_ssm": fl.f.URL, "custom_endpoint_autoscaling": fl.f.URL,
		"ssm_parameter": param,
		"target": []map[string]interface{}{{
			"launch_template_name": "hotpath", "set_default_version": true, "auto_scaling_groups": []string{"web-a", "web-b"},
		}},
		"instance_warmup": "30s", "checkpoint_percentages": []int{50, 100}, "checkpoint_delay": "10s",
		"poll_interval": "2ms",
	}
	for k, v := range extra {
		raw[k] = v
	}
	p := &PostProcessor{loadOptions: []func(*awsconfig.LoadOptions) error{awsconfig.WithRetryer(func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxBackoff, o.RateLimiter = time.Millisecond, ratelimit.None })
	})}}
	if err := p.Configure(raw); err != nil {
		t.Fatal(err)
	}
	return p
}

func (fl *fleet) input() packersdk.Artifact {
	return &packersdk.MockArtifact{BuilderIdValue: "hotpath.post-processor.ami", IdValue: "eu-west-1:" + fl.new}
}

// The roll-out: parameter, new default version, both groups refreshed
// onto it, progress shown.
func TestRolloutSuccessful(t *testing.T) {
	fl := newFleet(t)
	ui := new(uitest.UI)
	a, keep, _, err := fl.pp(t, nil).PostProcess(context.Background(), ui, fl.input())
	t.Logf("UI:\n%s", ui.Text())
	if err != nil {
		t.Fatal(err)
	}
	if !keep || a.Id() != "eu-west-1:"+fl.new {
		t.Errorf("artifact %s, keep %v", a.Id(), keep)
	}
	if pm, _ := fl.f.Parameter("eu-west-1", param); pm.Value != fl.new || pm.DataType != "aws:ec2:image" {
		t.Errorf("parameter %+v", pm)
	}
	lt := fl.f.LaunchTemplates()[fl.lt]
	if len(lt.Images) != 2 || lt.Images[1] != fl.new || lt.Default != 2 {
		t.Errorf("launch template %+v", lt)
	}
	for _, g := range []string{"web-a", "web-b"} {
		gs := fl.f.GroupState("eu-west-1", g)
		if gs.Version != "2" || gs.Refreshes[0].Status != "Successful" || gs.Refreshes[0].MinHealthy != 90 ||
			gs.Refreshes[0].Warmup != 30 || !gs.Refreshes[0].AutoRollback || !gs.Refreshes[0].SkipMatching {
			t.Errorf("group %s: %+v", g, gs)
		}
	}
	if ui.Contains("runs the new AMI") {
		t.Error("a successful roll-out reported a clean-up")
	}
	for _, s := range []string{
		"SSM parameter " + param + " in eu-west-1 = " + fl.new,
		"Launch template hotpath (" + fl.lt + ") in eu-west-1: version 2 launches " + fl.new, "default version 1 -> 2",
		"web-b (eu-west-1): InProgress 10%, 10 instances to update: Replacing instances",
		"Waiting for the checkpoint delay (10s) at 50%",
		"web-a (eu-west-1): Successful 100%",
	} {
		if !ui.Contains(s) {
			t.Errorf("UI does not say %q", s)
		}
	}
}

// A refresh that fails is rolled back by Auto Scaling; the plugin
// restores the parameter and the default version and says what each
// group runs.
func TestRolloutFailureRolledBack(t *testing.T) {
	fl := newFleet(t)
	fl.f.FailRefresh("eu-west-1", "web-b", 30, "2 instances failed the ELB health check")
	ui := new(uitest.UI)
	_, _, _, err := fl.pp(t, nil).PostProcess(context.Background(), ui, fl.input())
	t.Logf("UI:\n%s", ui.Text())
	if err == nil || !strings.Contains(err.Error(), "RollbackSuccessful: Instance refresh failed: 2 instances failed the ELB health check") ||
		!strings.Contains(err.Error(), "group web-b in eu-west-1 was rolled back") {
		t.Fatalf("err %v", err)
	}
	if pm, _ := fl.f.Parameter("eu-west-1", param); pm.Value != fl.old {
		t.Errorf("parameter %s, want the old AMI back", pm.Value)
	}
	if lt := fl.f.LaunchTemplates()[fl.lt]; lt.Default != 1 {
		t.Errorf("default version %d, want 1 back", lt.Default)
	}
	gb := fl.f.GroupState("eu-west-1", "web-b")
	if gb.Version != "1" || gb.Refreshes[0].Status != "RollbackSuccessful" {
		t.Errorf("web-b %+v", gb)
	}
	// web-a was still replacing when web-b failed: it is rolled back too.
	ga := fl.f.GroupState("eu-west-1", "web-a")
	if fl.f.CountCalls("RollbackInstanceRefresh", 200) != 1 || ga.Refreshes[0].Status != "RollbackSuccessful" {
		t.Errorf("web-a %+v", ga)
	}
}

// Without auto rollback a failed refresh leaves the group mixed, and the
// plugin says so.
func TestRolloutFailureWithoutAutoRollback(t *testing.T) {
	fl := newFleet(t)
	fl.f.FailRefresh("eu-west-1", "web-a", 50, "the new instances never became healthy")
	ui := new(uitest.UI)
	_, _, _, err := fl.pp(t, map[string]interface{}{"auto_rollback": false, "on_failure": "cancel"}).PostProcess(context.Background(), ui, fl.input())
	t.Logf("UI:\n%s", ui.Text())
	if err == nil || !strings.Contains(err.Error(), "group web-a in eu-west-1 is mixed: the refresh failed at 50%") ||
		!strings.Contains(err.Error(), "group web-b in eu-west-1 is mixed: the refresh was cancelled") {
		t.Fatalf("err %v", err)
	}
	if fl.f.CountCalls("CancelInstanceRefresh", 200) != 1 || fl.f.CountCalls("RollbackInstanceRefresh", 0) != 0 {
		t.Errorf("on_failure = cancel: %d cancels, %d rollbacks", fl.f.CountCalls("CancelInstanceRefresh", 200), fl.f.CountCalls("RollbackInstanceRefresh", 0))
	}
}

// TestRolloutStopsRefreshes: when one group's refresh fails, the other
// groups' refreshes, still replacing, are rolled back, or cancelled when
// on_failure says so or when Auto Scaling refuses the rollback; a cancel
// that is refused is reported, and the group then runs to the end of its
// refresh, which the clean-up waits for and reports; a refresh that has
// ended meanwhile is read as it ended. Whatever happens to the first
// group, the next one is stopped too.
func TestRolloutStopsRefreshes(t *testing.T) {
	refused := fakeaws.Fault{Status: 400, Code: "ValidationError", Message: "refused"}
	ended := fakeaws.Fault{Status: 400, Code: "ActiveInstanceRefreshNotFound", Message: "No in progress or pending Instance Refresh found"}
	for _, tc := range []struct {
		name          string
		onFailure, op string        // op: the call answered fault once, if any
		fault         fakeaws.Fault //
		a, c          string        // web-a's and web-c's refresh at the end
		says, notSays []string      // in notSays, ID is web-a's refresh
	}{
		{"rollback refused", "rollback", "RollbackInstanceRefresh", refused, "Cancelled", "RollbackSuccessful",
			[]string{"Rollback of web-a in eu-west-1 refused", "Cancelling instance refresh "}, nil},
		{"rollback of an ended refresh", "rollback", "RollbackInstanceRefresh", ended, "Successful", "RollbackSuccessful",
			[]string{"group web-a in eu-west-1 runs the new AMI"}, []string{"Cancelling instance refresh "}},
		{"cancel", "cancel", "", refused, "Cancelled", "Cancelled", []string{"Cancelling instance refresh "}, []string{"Error cancelling"}},
		{"cancel refused", "cancel", "CancelInstanceRefresh", refused, "Successful", "Cancelled",
			[]string{"Error cancelling the instance refresh of web-a in eu-west-1", "group web-a in eu-west-1 runs the new AMI"},
			[]string{"Cancelling instance refresh ID of web-a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fl := newFleet(t)
			fl.f.AddGroup("eu-west-1", "web-c", fl.lt, "1", 20)
			// web-b fails at its first batch; web-a has half its
			// instances, a checkpoint and two batches to go, web-c more.
			fl.f.FailRefresh("eu-west-1", "web-b", 10, "2 instances failed the ELB health check")
			if tc.op != "" {
				fl.f.Inject(tc.op, tc.fault)
			}
			ui := new(uitest.UI)
			_, _, _, err := fl.pp(t, map[string]interface{}{"on_failure": tc.onFailure, "target": []map[string]interface{}{{
				"launch_template_name": "hotpath", "set_default_version": true, "auto_scaling_groups": []string{"web-a", "web-b", "web-c"},
			}}}).PostProcess(context.Background(), ui, fl.input())
			if err == nil {
				t.Fatal("the roll-out succeeded")
			}
			ra, rc := fl.f.GroupState("eu-west-1", "web-a").Refreshes[0], fl.f.GroupState("eu-west-1", "web-c").Refreshes[0]
			if ra.Status != tc.a || rc.Status != tc.c {
				t.Errorf("refreshes: web-a %s, web-c %s; want %s, %s", ra.Status, rc.Status, tc.a, tc.c)
			}
			for _, s := range tc.says {
				if !ui.Contains(s) {
					t.Errorf("UI does not say %q", s)
				}
			}
			for _, s := range tc.notSays {
				if s = strings.Replace(s, "ID", ra.ID, 1); ui.Contains(s) {
					t.Errorf("UI says %q", s)
				}
			}
			if t.Failed() {
				t.Logf("err %v\nUI:\n%s", err, ui.Text())
			}
		})
	}
}

// Ctrl-C during the wait rolls the refreshes back.
func TestRolloutCancel(t *testing.T) {
	fl := newFleet(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	polls := 0
	fl.f.OnCall = func(op string, _ int) {
		if op == "DescribeInstanceRefreshes" {
			if polls++; polls == 3 {
				cancel()
			}
		}
	}
	ui := new(uitest.UI)
	_, _, _, err := fl.pp(t, nil).PostProcess(ctx, ui, fl.input())
	t.Logf("UI:\n%s", ui.Text())
	if err == nil || !strings.HasPrefix(err.Error(), "cancelled; state left behind: group web-a in eu-west-1 was rolled back") {
		t.Fatalf("err %v", err)
	}
	if ui.Contains("context canceled") {
		t.Errorf("UI shows the context error")
	}
	for _, g := range []string{"web-a", "web-b"} {
		if st := fl.f.GroupState("eu-west-1", g).Refreshes[0].Status; st != "RollbackSuccessful" {
			t.Errorf("%s: %s", g, st)
		}
	}
	if pm, _ := fl.f.Parameter("eu-west-1", param); pm.Value != fl.old {
		t.Errorf("parameter %s, want the old AMI back", pm.Value)
	}
}

// cancelUI cancels the build when a line with on is said: a Ctrl-C that
// comes between two steps, after a step's last call.
type cancelUI struct {
	*uitest.UI
	on     string
	cancel context.CancelFunc
}

func (u cancelUI) Say(s string) {
	u.UI.Say(s)
	if strings.Contains(s, u.on) {
		u.cancel()
	}
}

// TestRolloutCancelBetweenSteps: a cancel after the boot-mode check has
// ended, before the parameter is touched, stops the roll-out with
// "cancelled" and nothing changed.
func TestRolloutCancelBetweenSteps(t *testing.T) {
	fl := newFleet(t)
	fl.f.SetImageBootMode(fl.new, "uefi")
	fl.f.SetInstanceType(fl.lt, 1, "c6in.xlarge")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ui := cancelUI{UI: new(uitest.UI), on: ": compatible", cancel: cancel}
	_, _, _, err := fl.pp(t, nil).PostProcess(ctx, ui, fl.input())
	if err == nil || err.Error() != "cancelled" {
		t.Fatalf("err %v\n%s", err, ui.Text())
	}
	fl.unchanged(t)
}

func TestInputWithoutAMIs(t *testing.T) {
	fl := newFleet(t)
	_, _, _, err := fl.pp(t, nil).PostProcess(context.Background(), new(uitest.UI), &packersdk.MockArtifact{IdValue: "sha256"})
	if err == nil || !strings.Contains(err.Error(), "put hotpath-rollout after hotpath-ami") {
		t.Errorf("err %v", err)
	}
	_, _, _, err = fl.pp(t, nil).PostProcess(context.Background(), new(uitest.UI), &packersdk.MockArtifact{IdValue: "us-east-1:" + fl.new})
	if err == nil || !strings.Contains(err.Error(), "has no AMI in eu-west-1") {
		t.Errorf("err %v", err)
	}
	if n := len(fl.f.Calls()); n != 0 {
		t.Errorf("%d AWS calls", n)
	}
}

// base is a valid configuration (a template rolled onto group a), with
// the key-value pairs kv on top.
func base(kv ...interface{}) map[string]interface{} {
	m := map[string]interface{}{"region": "eu-west-1", "target": []map[string]interface{}{{"launch_template_name": "web", "auto_scaling_groups": []string{"a"}}}}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func TestPrepareErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  map[string]interface{}
		want string
	}{
		{"nothing", map[string]interface{}{"region": "eu-west-1"}, "nothing to roll out"},
		{"no region", base("region", ""), "region is required"},
		{"reserved parameter", base("ssm_parameter", "/aws/service/x"), "reserved"},
		{"bad parameter", base("ssm_parameter", "/a b"), "is not a parameter name"},
		{"both template keys", base("target", []map[string]interface{}{{"launch_template_id": "lt-0123456789abcdef0", "launch_template_name": "x"}}), "target 1: set exactly one of"},
		{"bad template id", base("target", []map[string]interface{}{{"launch_template_id": "web"}}), "is not a launch template id"},
		{"bad source version", base("target", []map[string]interface{}{{"launch_template_name": "web", "source_version": "latest"}}), "source_version"},
		{"group twice", base("target", []map[string]interface{}{{"launch_template_name": "web", "auto_scaling_groups": []string{"a", "a"}}}), "listed twice"},
		{"min healthy", base("min_healthy_percentage", 120), "min_healthy_percentage 120"},
		{"min 100 alone", base("min_healthy_percentage", 100), "needs max_healthy_percentage above 100"},
		{"max healthy", base("max_healthy_percentage", 250), "max_healthy_percentage 250"},
		{"checkpoints order", base("checkpoint_percentages", []int{50, 20, 100}), "must ascend"},
		{"last checkpoint", base("checkpoint_percentages", []int{20, 50}), "the last must be 100"},
		{"delay alone", base("checkpoint_delay", "5m"), "checkpoint_delay needs checkpoint_percentages"},
		{"fractional warmup", base("instance_warmup", "1500ms"), "whole seconds"},
		{"on_failure", base("on_failure", "ignore"), `on_failure "ignore"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			_, err := c.Prepare(tc.raw)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
	var c Config
	if _, err := c.Prepare(base()); err != nil {
		t.Fatal(err)
	}
	if *c.MinHealthyPercentage != 90 || !*c.AutoRollback || !*c.SkipMatching || c.OnFailure != "rollback" || c.Targets[0].Region != "eu-west-1" || c.Targets[0].SourceVersion != "$Default" ||
		c.RefreshTimeout != 2*time.Hour || c.PollInterval != 15*time.Second || c.CheckpointDelay != 0 {
		t.Errorf("defaults %+v", c)
	}
	// Checkpoints without a delay pause an hour at each.
	var cp Config
	if _, err := cp.Prepare(base("checkpoint_percentages", []int{50, 100})); err != nil || cp.CheckpointDelay != time.Hour {
		t.Errorf("checkpoint_delay %s, %v; want 1h", cp.CheckpointDelay, err)
	}
}

// TestPrepareEdges: values at the limits are accepted, a problem is
// reported once however often it occurs, and a target that moves no
// group and no default version is warned about.
func TestPrepareEdges(t *testing.T) {
	target := func(kv ...interface{}) []map[string]interface{} {
		m := map[string]interface{}{"launch_template_name": "web"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return []map[string]interface{}{m}
	}
	for _, tc := range []struct {
		name         string
		raw          map[string]interface{}
		err, warning string // "": none
	}{
		{"64 IPv6 addresses", base("target", target("auto_scaling_groups", []string{"a"}, "ipv6_address_count", 64)), "", ""},
		{"checkpoints at 1 and 100", base("checkpoint_percentages", []int{1, 100}), "", ""},
		{"a checkpoint at 0", base("checkpoint_percentages", []int{0, 100}), "checkpoint_percentages [0 100] must ascend within 1..100", ""},
		{"checkpoints at 0", base("checkpoint_percentages", []int{0, 0, 100}), "checkpoint_percentages [0 0 100] must ascend within 1..100", ""},
		{"a checkpoint twice", base("checkpoint_percentages", []int{50, 50, 100}), "must ascend within 1..100", ""},
		{"only a version", base("target", target()), "", "target 1: no auto_scaling_groups and not set_default_version: the new version is only created"},
		{"a new default version", base("target", target("set_default_version", true)), "", ""},
		{"a parameter name of 1011", base("ssm_parameter", "/"+strings.Repeat("p", 1010)), "", ""},
		{"a parameter name of 1012", base("ssm_parameter", "/"+strings.Repeat("p", 1011)), "is not a parameter name", ""},
		{"a parameter of 15 levels", base("ssm_parameter", strings.Repeat("/l", 15)), "", ""},
		{"a target region not checked", base("skip_region_validation", true, "target", target("region", "local-1", "set_default_version", true)), "", ""},
		{"a bad template name", base("target", target("launch_template_name", "a b", "set_default_version", true)), "launch_template_name \"a b\" is not a launch template name", ""},
		{"a group name of 255", base("target", target("auto_scaling_groups", []string{strings.Repeat("g", 255)})), "", ""},
		{"an empty group name", base("target", target("auto_scaling_groups", []string{""})), `auto_scaling_groups: "" is not a group name`, ""},
		{"min healthy 0", base("min_healthy_percentage", 0), "", ""},
		{"healthy 100 to 200", base("min_healthy_percentage", 100, "max_healthy_percentage", 200), "", ""},
		{"max healthy 100", base("max_healthy_percentage", 100), "", ""},
		{"max healthy 99", base("max_healthy_percentage", 99), "max_healthy_percentage 99 is outside 100..200", ""},
		{"max healthy 201", base("min_healthy_percentage", 100, "max_healthy_percentage", 201), "max_healthy_percentage 201 is outside 100..200", ""},
		{"checkpoint delay 48h", base("checkpoint_percentages", []int{100}, "checkpoint_delay", "48h"), "", ""},
		{"checkpoint delay 49h", base("checkpoint_percentages", []int{100}, "checkpoint_delay", "49h"), "checkpoint_delay 49h0m0s must be whole seconds within 0..48h", ""},
		{"checkpoint delay 1.5s", base("checkpoint_percentages", []int{100}, "checkpoint_delay", "1500ms"), "checkpoint_delay 1.5s must be whole seconds", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			warnings, err := c.Prepare(tc.raw)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || strings.Count(err.Error(), tc.err) != 1) {
				t.Errorf("error %v, want %q once", err, tc.err)
			}
			if got := strings.Join(warnings, "; "); got != tc.warning {
				t.Errorf("warnings %q, want %q", got, tc.warning)
			}
		})
	}
}

// Past refresh_timeout the refresh counts as failed and is rolled back.
func TestRolloutTimeout(t *testing.T) {
	fl := newFleet(t)
	ui := new(uitest.UI)
	_, _, _, err := fl.pp(t, map[string]interface{}{"refresh_timeout": "1ns"}).PostProcess(context.Background(), ui, fl.input())
	t.Logf("UI:\n%s", ui.Text())
	if err == nil || !strings.Contains(err.Error(), "did not finish within refresh_timeout") || !strings.Contains(err.Error(), "was rolled back") {
		t.Fatalf("err %v", err)
	}
	if fl.f.CountCalls("RollbackInstanceRefresh", 200) != 2 {
		t.Errorf("%d rollbacks, want both groups", fl.f.CountCalls("RollbackInstanceRefresh", 200))
	}
}

// TestRolloutParameterNotTaken: Parameter Store answers PutParameter of
// an aws:ec2:image value with 200 and validates it afterwards, dropping
// an id that is no available AMI of the region. The roll-out reads the
// parameter back, and stops with a message that says so before any
// launch template or group is touched.
func TestRolloutParameterNotTaken(t *testing.T) {
	for _, existed := range []bool{true, false} {
		t.Run(fmt.Sprintf("parameter existed %v", existed), func(t *testing.T) {
			fl := newFleet(t)
			holds := fl.old
			if !existed {
				fl.f.DeleteParameterValue("eu-west-1", param)
				holds = "no value"
			}
			gone := "ami-0000000000000dead"
			in := &packersdk.MockArtifact{BuilderIdValue: "hotpath.post-processor.ami", IdValue: "eu-west-1:" + gone}
			ui := new(uitest.UI)
			_, _, _, err := fl.pp(t, map[string]interface{}{"target": []map[string]interface{}{}}).PostProcess(context.Background(), ui, in)
			t.Logf("UI:\n%s", ui.Text())
			if err == nil || !strings.Contains(err.Error(), "publish "+gone+" to SSM parameter "+param) ||
				!strings.Contains(err.Error(), "still holds "+holds) || !strings.Contains(err.Error(), "validates aws:ec2:image values asynchronously") {
				t.Fatalf("err %v", err)
			}
			if strings.Contains(err.Error(), "still names the new AMI") {
				t.Errorf("err %v: the parameter never took the new AMI", err)
			}
			if reads := fl.f.CountCalls("GetParameter", 0); reads < 20 {
				t.Errorf("%d reads: the roll-out gave up before its bound", reads)
			}
			pm, ok := fl.f.Parameter("eu-west-1", param)
			if ok != existed || existed && pm.Value != fl.old {
				t.Errorf("parameter %+v (exists %v), want it as before", pm, ok)
			}
		})
	}
}

// TestRolloutParameterPublished: the parameter is published whether or
// not it existed, the UI says what it was; when the roll-out then fails,
// it is put back as it was: the old value again, or deleted.
func TestRolloutParameterPublished(t *testing.T) {
	for _, tc := range []struct {
		existed, fail bool
		says          string // NEW: the new AMI, OLD: the old one
	}{
		{true, false, "SSM parameter " + param + " in eu-west-1 = NEW (version 2, was OLD)"},
		{false, false, "SSM parameter " + param + " in eu-west-1 = NEW (version 1, new)"},
		{true, true, "SSM parameter " + param + " in eu-west-1 is OLD again"},
		{false, true, "SSM parameter " + param + " in eu-west-1 deleted again (it did not exist before)"},
	} {
		t.Run(fmt.Sprintf("existed %v, fails %v", tc.existed, tc.fail), func(t *testing.T) {
			fl := newFleet(t)
			if !tc.existed {
				fl.f.DeleteParameterValue("eu-west-1", param)
			}
			if tc.fail {
				fl.f.FailRefresh("eu-west-1", "web-a", 50, "unhealthy")
			}
			ui := new(uitest.UI)
			_, _, _, err := fl.pp(t, nil).PostProcess(context.Background(), ui, fl.input())
			if (err != nil) != tc.fail {
				t.Fatalf("err %v\n%s", err, ui.Text())
			}
			if says := strings.NewReplacer("NEW", fl.new, "OLD", fl.old).Replace(tc.says); !ui.Contains(says) {
				t.Errorf("UI does not say %q:\n%s", says, ui.Text())
			}
			want, wantOK := fl.new, true
			if tc.fail {
				want, wantOK = fl.old, tc.existed
			}
			if pm, ok := fl.f.Parameter("eu-west-1", param); ok != wantOK || ok && pm.Value != want {
				t.Errorf("parameter %+v (exists %v), want %s (exists %v)", pm, ok, want, wantOK)
			}
		})
	}
}

// TestRolloutPreferences: the Instance Refresh preferences sent are the
// configured ones; one left unset is left out, so that Auto Scaling
// applies its default (the group's grace period for the warm-up), not 0.
func TestRolloutPreferences(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra map[string]interface{}
		given string
		want  fakeaws.Refresh // the preferences compared
	}{
		{"defaults", map[string]interface{}{"instance_warmup": "0s", "checkpoint_percentages": []int{}, "checkpoint_delay": "0s"},
			"AutoRollback MinHealthyPercentage SkipMatching", fakeaws.Refresh{MinHealthy: 90, SkipMatching: true, AutoRollback: true}},
		{"every one", map[string]interface{}{"max_healthy_percentage": 150, "auto_rollback": false, "skip_matching": false},
			"AutoRollback CheckpointDelay CheckpointPercentages InstanceWarmup MaxHealthyPercentage MinHealthyPercentage SkipMatching",
			fakeaws.Refresh{MinHealthy: 90, MaxHealthy: 150, Warmup: 30, CheckDelay: 10, Checkpoints: []int{50, 100}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fl := newFleet(t)
			ui := new(uitest.UI)
			if _, _, _, err := fl.pp(t, tc.extra).PostProcess(context.Background(), ui, fl.input()); err != nil {
				t.Fatalf("%v\n%s", err, ui.Text())
			}
			rf := fl.f.GroupState("eu-west-1", "web-a").Refreshes[0]
			got := fakeaws.Refresh{MinHealthy: rf.MinHealthy, MaxHealthy: rf.MaxHealthy, Warmup: rf.Warmup, CheckDelay: rf.CheckDelay, Checkpoints: rf.Checkpoints,
				SkipMatching: rf.SkipMatching, AutoRollback: rf.AutoRollback}
			if g := strings.Join(rf.Given, " "); g != tc.given || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("preferences %s: %+v\nwant %s: %+v", g, got, tc.given, tc.want)
			}
		})
	}
}

// TestRolloutDefaultVersionRestored: after a failed refresh each launch
// template's previous default comes back, and the error names the ones
// that could not be restored, the clean-up going on with the next.
func TestRolloutDefaultVersionRestored(t *testing.T) {
	for _, tc := range []struct {
		name         string
		two          bool // a second template, hotpath-b, also made default (first)
		refuseAfter  int  // ModifyLaunchTemplate calls before one is refused (0: none)
		hotpath, b   int  // the defaults at the end
		stillHotpath bool // the error says hotpath's default is still the new one
	}{
		{"restored", false, 0, 1, 0, false},
		{"restore refused", false, 1, 2, 0, true},
		{"first restore refused, second done", true, 2, 1, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fl := newFleet(t)
			fl.f.FailRefresh("eu-west-1", "web-a", 50, "unhealthy")
			targets := []map[string]interface{}{{"launch_template_name": "hotpath", "set_default_version": true, "auto_scaling_groups": []string{"web-a", "web-b"}}}
			other := ""
			if tc.two {
				other = fl.f.AddLaunchTemplate("eu-west-1", "hotpath-b", fl.old)
				targets = append([]map[string]interface{}{{"launch_template_name": "hotpath-b", "set_default_version": true}}, targets...)
			}
			modified := 0
			fl.f.OnCall = func(op string, status int) {
				if op == "ModifyLaunchTemplate" && status == 200 {
					if modified++; modified == tc.refuseAfter {
						fl.f.Inject(op, fakeaws.Fault{Status: 403, Code: "UnauthorizedOperation", Message: "You are not authorized"})
					}
				}
			}
			ui := new(uitest.UI)
			_, _, _, err := fl.pp(t, map[string]interface{}{"target": targets}).PostProcess(context.Background(), ui, fl.input())
			if err == nil {
				t.Fatal("the roll-out succeeded")
			}
			lts := fl.f.LaunchTemplates()
			still := "launch template " + fl.lt + " in eu-west-1: default is still the new version 2"
			if lts[fl.lt].Default != tc.hotpath || tc.two && lts[other].Default != tc.b || strings.Contains(err.Error(), still) != tc.stillHotpath ||
				ui.Contains("Launch template "+fl.lt+" in eu-west-1: default version is 1 again") != (tc.hotpath == 1) {
				t.Errorf("defaults %d and %d, want %d and %d; err %v\n%s", lts[fl.lt].Default, lts[other].Default, tc.hotpath, tc.b, err, ui.Text())
			}
		})
	}
}

// TestRolloutParameterDataType: a parameter of another data type cannot
// become an aws:ec2:image parameter; the roll-out says so instead of
// publishing.
func TestRolloutParameterDataType(t *testing.T) {
	fl := newFleet(t)
	fl.f.PutParameterAs("eu-west-1", param, "not an ami", "text")
	ui := new(uitest.UI)
	_, _, _, err := fl.pp(t, nil).PostProcess(context.Background(), ui, fl.input())
	if err == nil || !strings.Contains(err.Error(), `has data type "text": Parameter Store cannot change a parameter's data type`) {
		t.Fatalf("err %v", err)
	}
	if n := fl.f.CountCalls("PutParameter", 0) + fl.f.CountCalls("CreateLaunchTemplateVersion", 0); n != 0 {
		t.Errorf("%d PutParameter/CreateLaunchTemplateVersion calls after the refusal", n)
	}
}

// TestRolloutParameterAlreadyPublished: a region whose parameter already
// holds its new AMI (a roll-out run again) is left as it is, and the
// regions after it are still published.
func TestRolloutParameterAlreadyPublished(t *testing.T) {
	fl := newFleet(t)
	fl.f.PutParameterValue("eu-west-1", param, fl.new)
	before, _ := fl.f.Parameter("eu-west-1", param)
	east := fl.f.AddImage("us-east-1", "hotpath 2")
	fl.f.PutParameterValue("us-east-1", param, fl.old)
	ui := new(uitest.UI)
	in := &packersdk.MockArtifact{BuilderIdValue: "hotpath.post-processor.ami", IdValue: "eu-west-1:" + fl.new + ",us-east-1:" + east}
	if _, _, _, err := fl.pp(t, nil).PostProcess(context.Background(), ui, in); err != nil {
		t.Fatalf("%v\n%s", err, ui.Text())
	}
	if says := "SSM parameter " + param + " in eu-west-1 is already " + fl.new; !ui.Contains(says) {
		t.Errorf("UI does not say %q:\n%s", says, ui.Text())
	}
	if pm, _ := fl.f.Parameter("eu-west-1", param); fmt.Sprint(pm) != fmt.Sprint(before) {
		t.Errorf("eu-west-1 parameter %+v, want it untouched: %+v", pm, before)
	}
	if pm, ok := fl.f.Parameter("us-east-1", param); !ok || pm.Value != east {
		t.Errorf("us-east-1 parameter %+v (exists %v), want %s", pm, ok, east)
	}
}
