//go:build !linux

package agent

import "errors"

var errLinux = errors.New("provisioning needs Linux (netlink and nftables)")

// Fetch needs Linux.
func Fetch(int, []string) (Plan, error) { return Plan{}, errLinux }

// Apply needs Linux.
func Apply(int, Changes) error { return errLinux }
