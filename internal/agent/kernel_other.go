//go:build !linux

package agent

import (
	"fmt"

	"github.com/lightpath/lightpath/internal/platform"
)

var errLinux = fmt.Errorf("provisioning (netlink and nftables): %w", platform.ErrUnsupported)

// Fetch needs Linux.
func Fetch(int, []string) (Plan, error) { return Plan{}, errLinux }

// Apply needs Linux.
func Apply(int, Changes) error { return errLinux }

// WithCgroups needs Linux: a rule marking by cgroup is left out and its
// reservation told why.
func WithCgroups(want Plan) (Plan, map[uint8]error) {
	var errs map[uint8]error
	out := want
	out.Nft = nil
	for _, r := range want.Nft {
		if r.Flow.Cgroup == "" {
			out.Nft = append(out.Nft, r)
			continue
		}
		if errs == nil {
			errs = map[uint8]error{}
		}
		errs[r.SetDSCP] = fmt.Errorf("flow %q: marking by cgroup: %w", r.Flow, errLinux)
	}
	out.NftTable = len(out.Nft) > 0
	return out, errs
}
