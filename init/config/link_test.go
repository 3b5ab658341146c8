package config

import (
	"strings"
	"testing"
)

func TestLinkKeys(t *testing.T) {
	for _, tc := range []struct {
		in      string
		match   string // Map()'s nic.match after parsing
		bond    BondMode
		vlan    int
		wantErr string
	}{
		{in: "", match: "", bond: BondNone},
		{in: "nic.match=52:54:00:12:34:56, 0000:3B:00.1 ,igb\nbond.mode=active-backup\nvlan.id=100",
			match: "52:54:00:12:34:56,0000:3b:00.1,igb", bond: BondActiveBackup, vlan: 100},
		{in: "nic.match=mlx5_core\nbond.mode=802.3ad", match: "mlx5_core", bond: Bond8023ad},
		{in: "nic.match=00:11:22", wantErr: "not a MAC address, a PCI address"},
		{in: "nic.match=eth0/1", wantErr: "not a MAC address"},
		{in: "bond.mode=balance-rr", wantErr: "want one of off, active-backup, 802.3ad"},
		{in: "vlan.id=4095", wantErr: "out of range"},
		{in: "bond.mode=active-backup\nbond.miimon=0s", bond: BondActiveBackup, wantErr: "bond.miimon of at least 1ms"},
	} {
		c, err := Parse(strings.NewReader(tc.in))
		if err == nil {
			err = c.Validate()
		}
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if m := c.Map()["nic.match"]; m != tc.match || c.Link.Bond != tc.bond || c.Link.VLAN != tc.vlan {
			t.Errorf("%q: match %q bond %q vlan %d, want %q %q %d", tc.in, m, c.Link.Bond, c.Link.VLAN, tc.match, tc.bond, tc.vlan)
		}
	}
}

// The bond and VLAN carry the network user-data comes over: user-data
// cannot change them.
func TestLinkKeysNotFromUserData(t *testing.T) {
	for _, k := range []string{"bond.mode", "bond.miimon", "vlan.id", "nic.match"} {
		if refusedKey(k) == "" {
			t.Errorf("user-data may set %s", k)
		}
	}
}
