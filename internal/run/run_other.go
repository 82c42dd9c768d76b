//go:build !linux

package run

import (
	"fmt"
	"io"
	"net/netip"

	"github.com/lightpath/lightpath/internal/platform"
)

// Cgroup is a run's own cgroup; it needs Linux's cgroup2.
type Cgroup struct {
	Mount, Path string
	ID          uint64
}

// NewCgroup needs Linux.
func NewCgroup() (*Cgroup, error) {
	return nil, fmt.Errorf("%w: %w", ErrNoCgroup2, platform.ErrUnsupported)
}

// MarkSockets needs Linux.
func (c *Cgroup) MarkSockets(mark uint32) error {
	return fmt.Errorf("mark the command's sockets: %w", platform.ErrUnsupported)
}

// Exec needs Linux.
func (c *Cgroup) Exec(argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	return 126, fmt.Errorf("run in a cgroup: %w", platform.ErrUnsupported)
}

// Remove needs Linux.
func (c *Cgroup) Remove() error { return nil }

// LocalAddrs needs Linux here.
func LocalAddrs() ([]netip.Addr, error) {
	return nil, fmt.Errorf("list this host's addresses: %w", platform.ErrUnsupported)
}

// Conns needs Linux's sock_diag.
func (c *Cgroup) Conns() ([]Conn, error) {
	return nil, fmt.Errorf("read the command's connections: %w", platform.ErrUnsupported)
}
