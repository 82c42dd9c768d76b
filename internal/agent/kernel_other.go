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
// reservation told why (see withCgroups).
func WithCgroups(want Plan) (Plan, map[uint8]error) {
	return withCgroups(want, func(string) (uint64, error) {
		return 0, fmt.Errorf("marking by cgroup: %w", errLinux)
	})
}
