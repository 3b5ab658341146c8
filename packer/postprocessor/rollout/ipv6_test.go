package rollout

import (
	"context"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/packer/internal/fakeaws"
	"github.com/hotpath-dev/hotpath/packer/internal/uitest"
)

// TestRolloutIPv6Options: a target with http_protocol_ipv6 and
// ipv6_address_count makes a version whose metadata options enable the
// IMDS IPv6 endpoint (IMDSv2 still required) and whose primary interface
// asks for the addresses, as the fake EC2 recorded them; a target without
// them leaves both alone.
func TestRolloutIPv6Options(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra map[string]interface{}
		want  fakeaws.VersionOptions
	}{
		{"ipv6", map[string]interface{}{"http_protocol_ipv6": true, "ipv6_address_count": 1},
			fakeaws.VersionOptions{HTTPEndpoint: "enabled", HTTPTokens: "required", HTTPProtocolIPv6: "enabled", IPv6AddressCount: 1, Interface: true}},
		{"metadata only", map[string]interface{}{"http_protocol_ipv6": true},
			fakeaws.VersionOptions{HTTPEndpoint: "enabled", HTTPTokens: "required", HTTPProtocolIPv6: "enabled"}},
		{"default", nil, fakeaws.VersionOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fl := newFleet(t)
			target := map[string]interface{}{"launch_template_name": "hotpath", "set_default_version": true, "auto_scaling_groups": []string{"web-a"}}
			for k, v := range tc.extra {
				target[k] = v
			}
			ui := new(uitest.UI)
			_, _, _, err := fl.pp(t, map[string]interface{}{"target": []map[string]interface{}{target}}).PostProcess(context.Background(), ui, fl.input())
			if err != nil {
				t.Fatalf("%v\nUI:\n%s", err, ui.Text())
			}
			lt := fl.f.LaunchTemplates()[fl.lt]
			if len(lt.Options) != 2 || lt.Options[1] != tc.want {
				t.Errorf("version options %+v, want %+v for version 2", lt.Options, tc.want)
			}
		})
	}
}

// TestPrepareIPv6AddressCount: the count is bounded.
func TestPrepareIPv6AddressCount(t *testing.T) {
	var c Config
	_, err := c.Prepare(map[string]interface{}{"region": "eu-west-1",
		"target": []map[string]interface{}{{"launch_template_name": "hotpath", "ipv6_address_count": -1, "set_default_version": true}}})
	if err == nil || !strings.Contains(err.Error(), "ipv6_address_count -1") {
		t.Errorf("Prepare: %v", err)
	}
}
