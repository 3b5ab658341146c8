package rollout

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/packer/internal/uitest"
)

// TestRolloutAlarmRollsBack: the refresh watches the alarms named in
// alarms; when one goes into ALARM half-way, Auto Scaling rolls the
// refresh back, the other group's refresh is rolled back too, the
// parameter and the default version come back, and the report names the
// alarm and what each group runs.
func TestRolloutAlarmRollsBack(t *testing.T) {
	fl := newFleet(t)
	fl.f.AddAlarm("eu-west-1", "hotpath-unhealthy-hosts")
	fl.f.AddAlarm("eu-west-1", "hotpath-resets")
	fl.f.FireAlarm("eu-west-1", "hotpath-unhealthy-hosts", 50, "UnHealthyHostCount >= 1 for 2 datapoints")
	ui := new(uitest.UI)
	_, _, _, err := fl.pp(t, map[string]interface{}{"alarms": []string{"hotpath-unhealthy-hosts", "hotpath-resets"}}).
		PostProcess(context.Background(), ui, fl.input())
	t.Logf("UI:\n%s", ui.Text())
	if err == nil {
		t.Fatal("the roll-out succeeded")
	}
	for _, s := range []string{
		"RollbackSuccessful: Instance refresh failed: alarm in ALARM state: hotpath-unhealthy-hosts (UnHealthyHostCount >= 1 for 2 datapoints)",
		"group web-a in eu-west-1 was rolled back: every instance runs its previous configuration",
		"group web-b in eu-west-1 was rolled back: every instance runs its previous configuration",
	} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error does not say %q: %v", s, err)
		}
	}
	if !ui.Contains("alarms hotpath-unhealthy-hosts, hotpath-resets") {
		t.Error("the start line does not name the alarms")
	}
	for _, g := range []string{"web-a", "web-b"} {
		gs := fl.f.GroupState("eu-west-1", g)
		if rf := gs.Refreshes[0]; gs.Version != "1" || rf.Status != "RollbackSuccessful" || !slices.Equal(rf.Alarms, []string{"hotpath-unhealthy-hosts", "hotpath-resets"}) {
			t.Errorf("group %s: version %s, refresh %s watching %v", g, gs.Version, rf.Status, rf.Alarms)
		}
	}
	if a := fl.f.AlarmState("eu-west-1", "hotpath-unhealthy-hosts"); a.State != "ALARM" {
		t.Errorf("alarm %+v", a)
	}
	if pm, _ := fl.f.Parameter("eu-west-1", param); pm.Value != fl.old {
		t.Errorf("parameter %s, want the old AMI back", pm.Value)
	}
	if lt := fl.f.LaunchTemplates()[fl.lt]; lt.Default != 1 {
		t.Errorf("default version %d, want 1 back", lt.Default)
	}
}

// TestPrepareAlarms: at most 10, each 1..255 characters, no name twice;
// without auto_rollback a warning.
func TestPrepareAlarms(t *testing.T) {
	eleven := make([]string, 11)
	for i := range eleven {
		eleven[i] = fmt.Sprintf("a%d", i)
	}
	for _, tc := range []struct {
		alarms []string
		want   string
	}{
		{eleven[:10], ""},
		{eleven, "alarms: 11 names, Auto Scaling watches at most 10"},
		{[]string{"a", ""}, `alarms: "" is not an alarm name`},
		{[]string{strings.Repeat("x", 256)}, "is not an alarm name"},
		{[]string{"a", "b", "a"}, "alarms: a is listed twice"},
	} {
		var c Config
		_, err := c.Prepare(map[string]interface{}{"region": "eu-west-1", "ssm_parameter": param, "alarms": tc.alarms})
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("alarms %d: err %v, want %q", len(tc.alarms), err, tc.want)
		}
	}
	var c Config
	w, err := c.Prepare(map[string]interface{}{"region": "eu-west-1", "ssm_parameter": param, "alarms": []string{"a"}, "auto_rollback": false})
	if err != nil || len(w) != 1 || !strings.Contains(w[0], "alarms without auto_rollback") {
		t.Errorf("warnings %v, err %v", w, err)
	}
}
