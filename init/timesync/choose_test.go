package timesync_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/timesync"
	"github.com/hotpath-dev/hotpath/tests/vm"
)

// TestChoose: IPv4 first when it answers, the IPv6 server when the IPv4
// one does not (an IPv6-only instance), an error naming both when none
// answers.
func TestChoose(t *testing.T) {
	v4 := server(t, 0)
	v6, err := vm.ListenNTP6("[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer v6.Close()
	// A UDP port nobody listens on: the query gets ICMP port unreachable.
	dead, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.LocalAddr().String()
	dead.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		servers []string
		want    string
	}{
		{[]string{v4.Addr(), v6.Addr()}, v4.Addr()},
		{[]string{deadAddr, v6.Addr()}, v6.Addr()},
		{[]string{v6.Addr()}, v6.Addr()},
	} {
		got, err := timesync.Choose(ctx, tc.servers, 300*time.Millisecond)
		if err != nil || got != tc.want {
			t.Errorf("Choose(%v) = %q, %v; want %q", tc.servers, got, err, tc.want)
		}
	}
	if _, err := timesync.Choose(ctx, []string{deadAddr, deadAddr}, 300*time.Millisecond); err == nil || !strings.Contains(err.Error(), deadAddr) {
		t.Errorf("no server answering: %v", err)
	}
}
