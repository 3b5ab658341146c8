package nic

import (
	"context"
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Carrier reports whether a link is administratively up and has carrier
// (IFF_UP and IFF_LOWER_UP): what a device reset or a cable pull takes
// away and gives back.
func Carrier(rawFlags uint32) bool {
	return rawFlags&unix.IFF_UP != 0 && rawFlags&unix.IFF_LOWER_UP != 0
}

// WatchLink calls changed(up) from its own goroutine each time the link
// named name gains or loses carrier, as rtnetlink reports it, until ctx
// ends. An ENA device reset (new interrupt vectors, the driver's own
// moderation back) shows as carrier off, then on. ns is the network
// namespace to watch, nil for the caller's. It returns once subscribed,
// having called changed with the state at that moment.
func WatchLink(ctx context.Context, ns *netns.NsHandle, name string, changed func(up bool), logf func(string, ...any)) error {
	updates := make(chan netlink.LinkUpdate, 64)
	done := make(chan struct{})
	err := netlink.LinkSubscribeWithOptions(updates, done, netlink.LinkSubscribeOptions{
		Namespace:    ns,
		ListExisting: true,
		ErrorCallback: func(err error) {
			if ctx.Err() == nil {
				logf("link watch %s: %v", name, err)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("link watch %s: subscribe: %w", name, err)
	}
	go func() {
		defer close(done)
		known, last := false, false
		for {
			select {
			case <-ctx.Done():
				return
			case u, ok := <-updates:
				if !ok {
					logf("link watch %s: subscription ended", name)
					return
				}
				if u.Link == nil || u.Link.Attrs().Name != name {
					continue
				}
				up := Carrier(u.IfInfomsg.Flags)
				if known && up == last {
					continue
				}
				known, last = true, up
				changed(up)
			}
		}
	}()
	return nil
}
