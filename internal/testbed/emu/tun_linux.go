//go:build linux

package emu

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lightpath/lightpath/internal/netns"
)

// TUN offload flags (include/uapi/linux/if_tun.h), missing from x/sys.
// TUN_F_USO4 and TUN_F_USO6 (Linux 6.2; the kernel wants both) let UDP
// GSO batches (UDP_SEGMENT) through whole; an older kernel refuses them
// with EINVAL and the emulator goes on with TSO alone, UDP then arriving
// one datagram at a time. No TUN_F_UFO: that is IP fragmentation.
const (
	tunFCsum   = 0x01
	tunFTSO4   = 0x02
	tunFTSO6   = 0x04
	tunFTSOECN = 0x08
	tunFUSO4   = 0x20
	tunFUSO6   = 0x40

	tunOffloads = tunFCsum | tunFTSO4 | tunFTSO6 | tunFTSOECN
	tunUSO      = tunFUSO4 | tunFUSO6
	tunFlags    = unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_VNET_HDR

	// txQueueLen sizes the ring of packets a TUN device holds for its
	// reader (its tx_queue_len; the default is 500). The kernel drops,
	// rather than pushes back, when it is full, so it must absorb the
	// emulator's scheduling hiccups at full rate.
	txQueueLen = 1000
)

// CreateTun creates a persistent TUN device (layer 3, no packet
// information, with virtio headers) named name in the network namespace
// at nsPath, with the given MTU and a transmit queue long enough for the
// emulator, and leaves it down: the caller gives it addresses and brings
// it up, and the emulator attaches to it. An existing TUN device of that
// name is reused.
func CreateTun(nsPath, name string, mtu int) error {
	if err := checkDevName(name); err != nil {
		return fmt.Errorf("create tun %s: %w", name, err)
	}
	err := netns.Do(nsPath, func() error {
		fd, err := tunAttach(name)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.IoctlSetInt(fd, unix.TUNSETPERSIST, 1); err != nil {
			return fmt.Errorf("make persistent: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create tun %s in %s: %w", name, nsPath, err)
	}
	h, link, err := linkAt(nsPath, name)
	if err != nil {
		return fmt.Errorf("create tun %s in %s: %w", name, nsPath, err)
	}
	defer h.Close()
	if mtu > 0 {
		if err := h.LinkSetMTU(link, mtu); err != nil {
			return fmt.Errorf("create tun %s in %s: set mtu %d: %w", name, nsPath, mtu, err)
		}
	}
	if err := h.LinkSetTxQLen(link, txQueueLen); err != nil {
		return fmt.Errorf("create tun %s in %s: set txqueuelen: %w", name, nsPath, err)
	}
	return nil
}

// DeleteTun deletes the TUN device name in the namespace at nsPath. A
// missing device, or a missing namespace (which took its devices with
// it), is not an error; a device of that name that is not a TUN device is.
func DeleteTun(nsPath, name string) error {
	h, link, err := linkAt(nsPath, name)
	var notFound netlink.LinkNotFoundError
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.As(err, &notFound):
		return nil
	case err != nil:
		return fmt.Errorf("delete tun %s in %s: %w", name, nsPath, err)
	}
	defer h.Close()
	if t := link.Type(); t != "tuntap" {
		return fmt.Errorf("delete tun %s in %s: a %s device, not a TUN device", name, nsPath, t)
	}
	if err := h.LinkDel(link); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("delete tun %s in %s: %w", name, nsPath, err)
	}
	return nil
}

// linkAt looks name up in the namespace at nsPath through a netlink
// handle bound to it, so no thread has to switch. The caller closes the
// handle.
func linkAt(nsPath, name string) (*netlink.Handle, netlink.Link, error) {
	h, err := netns.Handle(nsPath)
	if err != nil {
		return nil, nil, err
	}
	link, err := h.LinkByName(name)
	if err != nil {
		h.Close()
		return nil, nil, fmt.Errorf("find device %s: %w", name, err)
	}
	return h, link, nil
}

func checkDevName(name string) error {
	if name == "" || len(name) >= unix.IFNAMSIZ {
		return fmt.Errorf("device name %q: want 1 to %d bytes", name, unix.IFNAMSIZ-1)
	}
	return nil
}

// tunAttach opens /dev/net/tun and attaches it to the TUN device name in
// the calling thread's namespace, creating the device if it does not
// exist.
func tunAttach(name string) (int, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	ifr.SetUint16(tunFlags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("attach to %s (TUNSETIFF): %w", name, err)
	}
	return fd, nil
}

// openTun attaches to the existing persistent TUN device name in the
// namespace at nsPath and sets it up for the emulator: virtio headers,
// checksum, TSO and (where the kernel has it) USO offloads, so that TCP
// and UDP GSO arrive in 64 KiB super-packets, and leave in them;
// non-blocking. It returns the file descriptor and whether USO is on.
func openTun(nsPath, name string) (int, bool, error) {
	// TUNSETIFF would create a missing device, and a non-persistent one at
	// that: make sure it exists first.
	h, link, err := linkAt(nsPath, name)
	if err != nil {
		return -1, false, fmt.Errorf("open tun %s in %s: %w", name, nsPath, err)
	}
	h.Close()
	if t := link.Type(); t != "tuntap" {
		return -1, false, fmt.Errorf("open tun %s in %s: a %s device, not a TUN device", name, nsPath, t)
	}
	fd := -1
	err = netns.Do(nsPath, func() error {
		var err error
		fd, err = tunAttach(name)
		return err
	})
	if err != nil {
		return -1, false, fmt.Errorf("open tun %s in %s: %w", name, nsPath, err)
	}
	uso, err := setupTun(fd, tunUSO)
	if err != nil {
		unix.Close(fd)
		return -1, false, fmt.Errorf("open tun %s in %s: %w", name, nsPath, err)
	}
	return fd, uso, nil
}

// setupTun sets the device up with tunOffloads and, if the kernel takes
// them, the optional offloads (USO); it says whether it took them.
func setupTun(fd, optional int) (bool, error) {
	if err := unix.IoctlSetPointerInt(fd, unix.TUNSETVNETHDRSZ, vnetHdrLen); err != nil {
		return false, fmt.Errorf("set vnet header size: %w", err)
	}
	// The header is in native byte order unless told otherwise; asking for
	// little-endian makes it the same everywhere. Only a big-endian kernel
	// without CONFIG_TUN_VNET_CROSS_LE could refuse, and there the native
	// order is the wrong one for gso.go.
	if err := unix.IoctlSetPointerInt(fd, unix.TUNSETVNETLE, 1); err != nil {
		return false, fmt.Errorf("set little-endian vnet header: %w", err)
	}
	took := optional != 0
	err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, tunOffloads|optional)
	if err == unix.EINVAL && took {
		// The kernel does not know one of them (USO before 6.2): go on
		// without them.
		took = false
		err = unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, tunOffloads)
	}
	if err != nil {
		return false, fmt.Errorf("set offloads: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		return false, fmt.Errorf("set non-blocking: %w", err)
	}
	return took, nil
}
