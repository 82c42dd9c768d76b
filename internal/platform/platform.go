// Package platform holds the one error of a feature this operating system
// lacks. Kernel features (network namespaces, TUN devices, htb, netlink,
// nftables, TCP_INFO, hole punching) live in _linux.go files; their
// portable stubs return ErrUnsupported, wrapped with what was asked for,
// so callers test for it with errors.Is whatever the feature.
package platform

import "errors"

// ErrUnsupported is returned by a feature that needs Linux on another
// operating system. It reads "needs Linux" and also matches the standard
// library's errors.ErrUnsupported.
var ErrUnsupported error = unsupported{}

type unsupported struct{}

func (unsupported) Error() string { return "needs Linux" }

// Is makes errors.Is(err, errors.ErrUnsupported) hold too.
func (unsupported) Is(target error) bool { return target == errors.ErrUnsupported }
