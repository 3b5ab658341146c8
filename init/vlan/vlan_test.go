package vlan

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/boot"
)

type fakeNL struct {
	parent map[string]string
	id     map[string]int
	up     map[string]bool
}

// AddVLAN leaves an existing name as it is, and sets it up, as Kernel's.
func (f *fakeNL) AddVLAN(name, parent string, id int) error {
	if parent == "" {
		return errors.New("no parent")
	}
	if _, ok := f.parent[name]; !ok {
		f.parent[name], f.id[name] = parent, id
	}
	f.up[name] = true
	return nil
}

func (f *fakeNL) VLAN(name string) (string, int, bool, error) {
	p, ok := f.parent[name]
	if !ok {
		return "", 0, false, errors.New("no such device")
	}
	return p, f.id[name], f.up[name], nil
}

func TestVLAN(t *testing.T) {
	for _, tc := range []struct {
		v    VLAN
		name string
	}{
		{VLAN{Parent: "bond0", ID: 100}, "bond0.100"},
		{VLAN{Parent: "enp59s0f0np0", ID: 4000}, "vlan4000"},      // enp59s0f0np0.4000 is over 15 characters
		{VLAN{Parent: "enp59s0f0np0", ID: 100}, "vlan100"},        // 16: one too many for IFNAMSIZ (16 with the NUL)
		{VLAN{Parent: "enp59s0f0np", ID: 100}, "enp59s0f0np.100"}, // 15: fits
	} {
		if n := tc.v.Name(); n != tc.name {
			t.Errorf("Name() = %q, want %q", n, tc.name)
		}
	}
	f := &fakeNL{map[string]string{}, map[string]int{}, map[string]bool{}}
	v := VLAN{Parent: "bond0", ID: 100, NL: f}
	if r := boot.RunOne(context.Background(), v.Step()); r.Status != "applied" || r.Detail["name"] != "bond0.100" {
		t.Errorf("vlan: %+v", r)
	}
	f.up["bond0.100"] = false
	if r := boot.RunOne(context.Background(), v.Step()); r.Status != "applied" {
		t.Errorf("vlan again: %+v", r) // AddVLAN sets it up again
	}
	// A bond0.100 that is already another tag (left by whoever made it)
	// is found out by the verify.
	f.id["bond0.100"] = 200
	if r := boot.RunOne(context.Background(), v.Step()); r.Status != "failed" || !strings.Contains(r.Error, "is vlan 200 on bond0") {
		t.Errorf("vlan with the wrong tag: %+v", r)
	}
}
