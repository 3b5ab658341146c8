package nic

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/config"
)

func TestSelect(t *testing.T) {
	ft := newTree(t)
	for i, n := range []struct{ name, bdf, drv, mac string }{
		{"eth0", "0000:00:02.0", "e1000e", "52:54:00:12:34:56"},
		{"eth1", "0000:3b:00.0", "mlx5_core", "0c:42:a1:00:00:01"},
		{"eth2", "0000:3b:00.1", "mlx5_core", "0c:42:a1:00:00:02"},
		{"eth3", "0000:01:00.0", "igb", "a0:36:9f:00:00:03"},
	} {
		ft.addPCI(t, n.name, n.bdf, "", n.drv)
		ft.write(t, filepath.Join(ft.sys, "class/net", n.name, "address"), n.mac+"\n")
		ft.write(t, filepath.Join(ft.sys, "class/net", n.name, "ifindex"), string(rune('2'+i))+"\n")
	}
	ft.addNIC(t, "veth0", 9, "", "", 1, false) // no device: never a candidate
	names := func(ls []Link) string {
		var s []string
		for _, l := range ls {
			s = append(s, l.Name)
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		match, sel, others, err string
	}{
		{match: "mlx5_core", sel: "eth1,eth2", others: "eth0,eth3"},
		{match: "A0:36:9F:00:00:03,0000:3b:00.1", sel: "eth3,eth2", others: "eth0,eth1"},
		{match: "0000:3b:00.1,mlx5_core", sel: "eth2,eth1", others: "eth0,eth3"},
		{match: "", sel: "eth0,eth1,eth2,eth3"},
		{match: "ixgbe", others: "eth0,eth1,eth2,eth3", err: "selects none of the NICs"},
	} {
		ms, err := config.ParseMatch(tc.match)
		if err != nil {
			t.Fatal(err)
		}
		sel, others, err := Select(ft.sys, ms)
		if names(sel) != tc.sel || names(others) != tc.others || (err != nil) != (tc.err != "") ||
			err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Select(%q) = %s / %s, %v; want %s / %s, %q", tc.match, names(sel), names(others), err, tc.sel, tc.others, tc.err)
		}
	}
}
