package nic

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hotpath-dev/hotpath/init/boot"
	"golang.org/x/sys/unix"
)

// Clock is the time nic-link-up waits in; nil in a Tuner is the real one.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx is done.
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *Tuner) clock() Clock {
	if t.Clock == nil {
		return realClock{}
	}
	return t.Clock
}

// carrierPoll is how often nic-link-up reads the carrier while it waits.
// Polling the sysfs attribute costs one read per 20 ms for a few seconds
// at most, and at most 20 ms of boot time after the link comes: not worth
// a netlink subscription, which the Netlink surface would have to grow.
const carrierPoll = 20 * time.Millisecond

// carrier reads sysfs class/net/IF/carrier. The kernel answers EINVAL
// while the interface is not running (net/core/net-sysfs.c carrier_show:
// netif_running), which is no carrier yet.
func (t *Tuner) carrier() (bool, error) {
	b, err := t.files().ReadFile(filepath.Join(t.SysRoot, "class/net", t.Link.Name, "carrier"))
	if errors.Is(err, unix.EINVAL) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(string(b)) == "1", nil
}

// waitCarrier waits, at most nic.carrier_wait, for the link's carrier,
// then reports its speed and duplex. A link without carrier is an error
// naming it, so that the report blames the cable or the switch port at
// this step instead of the DHCP client 25 s later.
func (t *Tuner) waitCarrier(ctx context.Context, d boot.Detail) error {
	wait := t.Opt.CarrierWait
	if wait <= 0 {
		d["carrier"] = "not waited for (nic.carrier_wait=0s)"
		return nil
	}
	clk := t.clock()
	start := clk.Now()
	for {
		up, err := t.carrier()
		if err != nil {
			return fmt.Errorf("carrier of %s: %w", t.Link.Name, err)
		}
		waited := clk.Now().Sub(start)
		if up {
			d["carrier"] = "up"
			d["carrier_after"] = waited.Round(time.Millisecond).String()
			break
		}
		if waited >= wait {
			d["carrier"] = "down"
			return fmt.Errorf("no carrier on %s after %v: the link is dead (cable, switch port, SFP or the peer's autonegotiation); "+
				"the network configuration will find no peer", t.Link.Name, wait)
		}
		if err := clk.Sleep(ctx, min(carrierPoll, wait-waited)); err != nil {
			return fmt.Errorf("waiting for the carrier of %s: %w", t.Link.Name, err)
		}
	}
	d["speed"], d["duplex"] = t.speedDuplex()
	return nil
}

// speedDuplex reads the negotiated speed and duplex. The sysfs speed and
// duplex attributes are the driver's ethtool link settings
// (net/core/net-sysfs.c speed_show and duplex_show call
// __ethtool_get_link_ksettings), the same values `ethtool IF` prints,
// without a second ethtool surface in the Tuner. A virtual NIC may not
// know its speed (virtio-net without VIRTIO_NET_F_SPEED_DUPLEX prints -1
// and "unknown").
func (t *Tuner) speedDuplex() (speed, duplex string) {
	dir := filepath.Join(t.SysRoot, "class/net", t.Link.Name)
	speed, duplex = "unknown", "unknown"
	if b, err := t.files().ReadFile(filepath.Join(dir, "speed")); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 && n != int(^uint32(0)) {
			speed = strconv.Itoa(n) + "Mb/s"
		}
	}
	if b, err := t.files().ReadFile(filepath.Join(dir, "duplex")); err == nil {
		if v := strings.TrimSpace(string(b)); v == "full" || v == "half" {
			duplex = v
		}
	}
	return speed, duplex
}
