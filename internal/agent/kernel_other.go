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
