package netconf

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/report"
)

// A hosting provider's static address: a /32 with a gateway outside it
// (Hetzner's and OVH's routed setups), which needs a link route to the
// gateway before the default route can use it.
const (
	static32Addr    = "203.0.113.10/32"
	static32Gateway = "203.0.113.1"
)

func TestStaticOffLinkGateway(t *testing.T) {
	srvNS, cliNS, srvIf, cliIf := netnsPair(t)
	run(t, "ip", "-n", srvNS, "addr", "add", static32Gateway+"/24", "dev", srvIf)
	run(t, "ip", "-n", srvNS, "link", "set", srvIf, "up")
	res, _ := runChild(t, cliNS, "static32", cliIf)
	if res.Step.Status != report.Applied {
		t.Fatalf("static step: %+v", res.Step)
	}
	checkInstalled(t, cliNS, cliIf, static32Addr, static32Gateway, 1500)
	// The kernel routes a far address through the gateway on the link.
	out, err := exec.Command("ip", "-n", cliNS, "route", "get", "198.51.100.7").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "via "+static32Gateway+" dev "+cliIf) {
		t.Errorf("ip route get 198.51.100.7: %s %v; want via %s dev %s", out, err, static32Gateway, cliIf)
	}
}
