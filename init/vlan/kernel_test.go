package vlan

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/internal/nlcapture"
)

// From include/uapi/linux/rtnetlink.h and if_link.h.
const (
	rtmNewlink       = 16
	iflaIfname       = 3
	iflaLink         = 5
	iflaLinkinfo     = 18
	iflaInfoKind     = 1
	iflaInfoData     = 2
	iflaVlanID       = 1
	iflaVlanProtocol = 5
	ethP8021Q        = 0x8100 // include/uapi/linux/if_ether.h, big-endian on the wire
)

// TestKernelAddVLANRequest: the RTM_NEWLINK that Kernel.AddVLAN sends, as
// the kernel receives it (see nlcapture): the name, the link (the
// parent's index), the kind "vlan", the tag and the protocol 802.1Q. The
// test kernel has no 8021q, so its answer must be that the kind is
// unknown (EOPNOTSUPP), given only after it has accepted the generic
// attributes (a name over 15 characters is refused before, with ERANGE).
// In the child's namespace only lo exists, so lo is the parent; Name's
// cut to 15 characters is TestVLAN's.
func TestKernelAddVLANRequest(t *testing.T) {
	v := VLAN{Parent: "lo", ID: 1000}
	if nlcapture.Child() {
		nlcapture.Report(Kernel{}.AddVLAN(v.Name(), v.Parent, v.ID))
	}
	msgs, result := nlcapture.Run(t)
	if !strings.Contains(result, "not supported") {
		t.Errorf("the kernel answered %q, want operation not supported (no 8021q here): it refused the request before the kind", result)
	}
	var req *nlcapture.Message
	for i := range msgs {
		if msgs[i].Type == rtmNewlink {
			req = &msgs[i]
		}
	}
	if req == nil || len(req.Body) < 16 {
		t.Fatalf("no RTM_NEWLINK among %d messages sent", len(msgs))
	}
	a := nlcapture.Attrs(req.Body[16:]) // after struct ifinfomsg
	if name := strings.TrimRight(string(a[iflaIfname]), "\x00"); name != "lo.1000" {
		t.Errorf("IFLA_IFNAME %q, want lo.1000", name)
	}
	if l := a[iflaLink]; len(l) != 4 || binary.LittleEndian.Uint32(l) != 1 {
		t.Errorf("IFLA_LINK %x, want lo's index 1", l)
	}
	info := nlcapture.Attrs(a[iflaLinkinfo])
	if kind := strings.TrimRight(string(info[iflaInfoKind]), "\x00"); kind != "vlan" {
		t.Errorf("IFLA_INFO_KIND %q, want vlan", kind)
	}
	data := nlcapture.Attrs(info[iflaInfoData])
	if id := data[iflaVlanID]; len(id) != 2 || binary.LittleEndian.Uint16(id) != 1000 {
		t.Errorf("IFLA_VLAN_ID %x, want 1000 as a host-order u16", id)
	}
	if p := data[iflaVlanProtocol]; len(p) != 2 || binary.BigEndian.Uint16(p) != ethP8021Q {
		t.Errorf("IFLA_VLAN_PROTOCOL %x, want 802.1Q (0x8100, big-endian)", p)
	}
}
