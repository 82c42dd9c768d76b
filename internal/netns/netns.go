// Package netns is the one way lightpath works inside a network namespace
// other than its own: a netlink handle bound to the namespace for netlink
// work (no thread switches), and Do, which runs a function on an OS thread
// switched into the namespace for what only a thread can do (open sockets
// or TUN devices, write /proc/sys/net). The testbed, the emulator and the
// collectors use it.
//
// Namespaces are named by path, such as /run/netns/lp-two-site-a1; the
// empty path is the caller's own namespace. Outside Linux everything but
// the caller's own namespace returns platform.ErrUnsupported.
package netns

// Dir is where named namespaces are mounted (as by `ip netns add`).
const Dir = "/run/netns"

// Path is the path of the named namespace name.
func Path(name string) string { return Dir + "/" + name }
