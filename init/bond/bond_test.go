package bond

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/config"
)

// fakeKernel keeps the bond as the bonding driver's sysfs shows it
// (drivers/net/bonding/bond_sysfs.c, bond_sysfs_slave.c): bonding/mode
// "active-backup 1", bonding/slaves, bonding/active_slave, and each
// member's bonding_slave/mii_status and state. It refuses a member that
// is up, as bond_enslave does.
type fakeKernel struct {
	t   *testing.T
	sys string
	up  map[string]bool
}

// write replaces p's content at once (a new file renamed over it), as a
// read of a sysfs attribute sees either value and never an empty file:
// TestBond changes a member's state from a goroutine while bond-up reads.
func (k *fakeKernel) write(p, v string) {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		k.t.Error(err)
		return
	}
	tmp := p + ".new"
	if err := os.WriteFile(tmp, []byte(v+"\n"), 0o644); err != nil {
		k.t.Error(err)
		return
	}
	if err := os.Rename(tmp, p); err != nil {
		k.t.Error(err)
	}
}

func (k *fakeKernel) AddBond(name string, mode config.BondMode, ms int) error {
	num := map[config.BondMode]string{config.BondActiveBackup: "1", config.Bond8023ad: "4"}[mode]
	k.write(filepath.Join(k.sys, "class/net", name, "bonding/mode"), string(mode)+" "+num)
	k.write(filepath.Join(k.sys, "class/net", name, "bonding/slaves"), "")
	return nil
}

func (k *fakeKernel) Enslave(member, bond string) error {
	if k.up[member] {
		return os.ErrPermission // EPERM: "Device can not be enslaved while up"
	}
	p := filepath.Join(k.sys, "class/net", bond, "bonding/slaves")
	b, _ := os.ReadFile(p)
	k.write(p, strings.TrimSpace(strings.TrimSpace(string(b))+" "+member))
	return nil
}

func (k *fakeKernel) SetUp(name string) error { k.up[name] = true; return nil }

func (k *fakeKernel) member(name, mii, state string) {
	k.write(filepath.Join(k.sys, "class/net", name, "bonding_slave/mii_status"), mii)
	k.write(filepath.Join(k.sys, "class/net", name, "bonding_slave/state"), state)
}

func TestBond(t *testing.T) {
	k := &fakeKernel{t: t, sys: t.TempDir(), up: map[string]bool{}}
	b := &Bond{Name: Name, Mode: config.BondActiveBackup, Miimon: 10 * time.Millisecond,
		Members: []string{"eth0", "eth1"}, SysRoot: k.sys, NL: k}
	if r := boot.RunOne(context.Background(), b.CreateStep()); r.Status != "applied" {
		t.Fatalf("bond-create: %+v", r)
	}
	k.member("eth0", "up", "active")
	k.member("eth1", "down", "backup")
	k.write(filepath.Join(k.sys, "class/net/bond0/bonding/active_slave"), "eth0")
	r := boot.RunOne(context.Background(), b.UpStep())
	if r.Status != "applied" || r.Detail["members"] != "eth0:up:active,eth1:down:backup" || r.Detail["active"] != "eth0" {
		t.Errorf("bond-up: %+v", r)
	}
	// A member whose link the driver sees a few polls later is waited
	// for: the report says both are up.
	k.member("eth1", "down", "backup")
	go func() { time.Sleep(50 * time.Millisecond); k.member("eth1", "up", "backup") }()
	if r := boot.RunOne(context.Background(), b.UpStep()); r.Status != "applied" || r.Detail["members"] != "eth0:up:active,eth1:up:backup" {
		t.Errorf("bond-up with eth1 coming up: %+v", r)
	}
	// No member with link: the bond carries nothing, and says so.
	k.member("eth0", "down", "active")
	k.member("eth1", "down", "backup")
	if r := boot.RunOne(context.Background(), b.UpStep()); r.Status != "failed" || !strings.Contains(r.Error, "no member has link") {
		t.Errorf("bond-up without link: %+v", r)
	}
}

func TestBondMemberUp(t *testing.T) {
	k := &fakeKernel{t: t, sys: t.TempDir(), up: map[string]bool{"eth1": true}}
	b := &Bond{Name: Name, Mode: config.Bond8023ad, Miimon: 100 * time.Millisecond,
		Members: []string{"eth0", "eth1"}, SysRoot: k.sys, NL: k}
	r := boot.RunOne(context.Background(), b.CreateStep())
	if r.Status != "failed" || !strings.Contains(r.Error, "enslave eth1") {
		t.Errorf("bond-create with a member up: %+v, want failed naming eth1", r)
	}
}
