package agent

import (
	"context"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// carrierDown returns the devices among devs that are up but have lost
// their carrier, or are down: a reserved hop out of one of them is dead.
// A device that does not exist is not counted (the plan cannot use it).
func carrierDown(nsFd int, devs []string) ([]string, error) {
	h, err := netlink.NewHandleAt(netns.NsHandle(nsFd))
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	var down []string
	for _, d := range devs {
		l, err := h.LinkByName(d)
		if err != nil {
			continue
		}
		a := l.Attrs()
		if a.Flags&net.FlagUp == 0 || a.RawFlags&unix.IFF_LOWER_UP == 0 {
			down = append(down, d)
		}
	}
	return down, nil
}

// watchLinks signals changed whenever a device of the namespace changes
// (a carrier lost or back), so the agent reacts at once rather than at its
// next round.
func watchLinks(ctx context.Context, nsFd int, changed chan<- struct{}) error {
	updates := make(chan netlink.LinkUpdate, 16)
	if err := netlink.LinkSubscribeAt(netns.NsHandle(nsFd), updates, ctx.Done()); err != nil {
		return fmt.Errorf("subscribe to link changes: %w", err)
	}
	go func() {
		for range updates {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}()
	return nil
}
