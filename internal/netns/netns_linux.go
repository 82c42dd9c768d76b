//go:build linux

package netns

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Do runs fn on an OS thread switched into the network namespace at path,
// so that the sockets and devices fn opens belong to it; they keep their
// namespace after Do returns. The empty path runs fn as it is.
//
// fn runs on a goroutine of its own, locked to its thread, so the caller's
// goroutine never changes namespace, and goroutines fn starts do not
// inherit it. If the thread cannot switch back, it is left locked: the Go
// runtime then retires it with the goroutine instead of running other
// code in the wrong namespace (the pattern of containernetworking/plugins
// pkg/ns).
func Do(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	target, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer unix.Close(target)
	return onThread(path, func() error {
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("enter network namespace %s: %w", path, err)
		}
		return fn()
	})
}

// Create makes the named network namespace, mounted at Path(name) as
// `ip netns add` does. Making one moves a thread into it; that happens on
// a thread of its own, as in Do, never the caller's.
func Create(name string) error {
	return onThread(Path(name), func() error {
		ns, err := vnetns.NewNamed(name)
		if err != nil {
			return fmt.Errorf("create network namespace %s: %w", name, err)
		}
		return ns.Close()
	})
}

// Delete unmounts and removes the named network namespace.
func Delete(name string) error {
	if err := vnetns.DeleteNamed(name); err != nil {
		return fmt.Errorf("delete network namespace %s: %w", name, err)
	}
	return nil
}

// Handle opens a netlink handle bound to the network namespace at path
// ("" is the caller's own). Name the netlink families the handle is for
// when it is not only NETLINK_ROUTE: a handle without a socket for a
// family falls back to one of the calling thread's namespace. The caller
// closes the handle.
func Handle(path string, families ...int) (*netlink.Handle, error) {
	if path == "" {
		return netlink.NewHandle(families...)
	}
	ns, err := vnetns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, families...)
	if err != nil {
		return nil, fmt.Errorf("netlink in network namespace %s: %w", path, err)
	}
	return h, nil
}

// onThread runs fn, which may move its thread into another network
// namespace, on a new goroutine locked to its OS thread, and moves the
// thread back afterwards. The thread is unlocked (returned to the pool)
// only once it is back in its original namespace; otherwise it stays
// locked and exits with the goroutine.
func onThread(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open the thread's network namespace: %w", err)
			return
		}
		defer unix.Close(orig)
		ferr := fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			// Still locked: the thread dies with this goroutine.
			errc <- errors.Join(ferr, fmt.Errorf("leave network namespace %s: %w", path, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
