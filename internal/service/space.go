package service

import (
	"context"
)

// FreeBytes is the free space of endpoint's storage as its live data
// nodes last reported it in their heartbeats (the statfs of each node's
// root): the largest of their latest reports, since the nodes of an
// endpoint serve one directory and a smaller figure is only an older one.
// known is false when no live node of the endpoint reports one (none is
// alive, or they front a storage system, which has no root of theirs to
// measure). It reads the store only, under no lock of the service's.
func (s *Service) FreeBytes(ctx context.Context, endpoint string) (free int64, known bool, err error) {
	_, live, err := s.liveNodes(ctx, s.st, s.now())
	if err != nil {
		return 0, false, err
	}
	for _, n := range live[endpoint] {
		if n.FreeBytesAt.IsZero() {
			continue
		}
		if !known || n.FreeBytes > free {
			free, known = n.FreeBytes, true
		}
	}
	return free, known, nil
}
