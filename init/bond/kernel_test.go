package bond

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/internal/nlcapture"
)

// From include/uapi/linux/rtnetlink.h, if_link.h and if_bonding.h.
const (
	rtmNewlink            = 16
	iflaIfname            = 3
	iflaLinkinfo          = 18
	iflaInfoKind          = 1
	iflaInfoData          = 2
	iflaBondMode          = 1
	iflaBondMiimon        = 3
	iflaBondXmitPolicy    = 14
	iflaBondADLACPRate    = 21
	bondModeActiveBackup  = 1 // BOND_MODE_ACTIVEBACKUP
	bondMode8023AD        = 4 // BOND_MODE_8023AD
	bondXmitPolicyLayer34 = 1 // BOND_XMIT_POLICY_LAYER34
	lacpRateFast          = 1 // AD_LACP_FAST
)

// TestKernelAddBondRequest: the RTM_NEWLINK that bond-create sends through
// Kernel, as the kernel receives it (see nlcapture), for each mode: the
// name, the kind "bond", the mode's number, miimon in milliseconds, and
// for 802.3ad the layer3+4 hash and the fast LACP rate (absent for
// active-backup, where the driver refuses neither but they mean nothing).
// The test kernel has no bonding driver: its answer must be that the kind
// is unknown (EOPNOTSUPP), given after the generic attributes passed.
func TestKernelAddBondRequest(t *testing.T) {
	for _, tc := range []struct {
		mode       config.BondMode
		num        byte
		xmit, lacp []byte
	}{
		{config.Bond8023ad, bondMode8023AD, []byte{bondXmitPolicyLayer34}, []byte{lacpRateFast}},
		{config.BondActiveBackup, bondModeActiveBackup, nil, nil},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			b := &Bond{Name: Name, Mode: tc.mode, Miimon: 100 * time.Millisecond, Members: []string{"lo"}, NL: Kernel{}}
			if nlcapture.Child() {
				nlcapture.Report(b.create(context.Background(), boot.Detail{}))
			}
			msgs, result := nlcapture.Run(t)
			if !strings.Contains(result, "not supported") {
				t.Errorf("the kernel answered %q, want operation not supported (no bonding here): it refused the request before the kind", result)
			}
			var req *nlcapture.Message
			for i := range msgs {
				if msgs[i].Type == rtmNewlink {
					req = &msgs[i]
					break
				}
			}
			if req == nil || len(req.Body) < 16 {
				t.Fatalf("no RTM_NEWLINK among %d messages sent", len(msgs))
			}
			a := nlcapture.Attrs(req.Body[16:])
			if name := strings.TrimRight(string(a[iflaIfname]), "\x00"); name != Name {
				t.Errorf("IFLA_IFNAME %q, want %s", name, Name)
			}
			info := nlcapture.Attrs(a[iflaLinkinfo])
			if kind := strings.TrimRight(string(info[iflaInfoKind]), "\x00"); kind != "bond" {
				t.Errorf("IFLA_INFO_KIND %q, want bond", kind)
			}
			data := nlcapture.Attrs(info[iflaInfoData])
			if m := data[iflaBondMode]; len(m) != 1 || m[0] != tc.num {
				t.Errorf("IFLA_BOND_MODE %x, want %d", m, tc.num)
			}
			if m := data[iflaBondMiimon]; len(m) != 4 || binary.LittleEndian.Uint32(m) != 100 {
				t.Errorf("IFLA_BOND_MIIMON %x, want 100 (ms) as a u32", m)
			}
			if x := data[iflaBondXmitPolicy]; string(x) != string(tc.xmit) {
				t.Errorf("IFLA_BOND_XMIT_HASH_POLICY %x, want %x", x, tc.xmit)
			}
			if r := data[iflaBondADLACPRate]; string(r) != string(tc.lacp) {
				t.Errorf("IFLA_BOND_AD_LACP_RATE %x, want %x", r, tc.lacp)
			}
		})
	}
}
