//go:build !linux

package udp

import (
	"net/netip"
	"os"
	"syscall"
)

// Elsewhere the socket is left as the system makes it: no DF bit, no TOS
// read back, the default payload size.

func setupSocket(rc syscall.RawConn, v6 bool, tos int) error { return nil }

// reusePort: a listener's streams share its socket elsewhere (BSD's
// SO_REUSEPORT does not prefer connected sockets).
func reusePort(rc syscall.RawConn) error { return syscall.ENOPROTOOPT }

func setTOS(rc syscall.RawConn, v6 bool, tos int) error { return nil }

func pathMTU(rc syscall.RawConn, v6 bool) int { return 0 }

func tosOOB(dst []byte, v4 bool, tos int) []byte { return dst }

func enablePktinfo(rc syscall.RawConn, v6 bool) {}

func dstOf(oob []byte) netip.Addr { return netip.Addr{} }

func srcOOB(dst []byte, src netip.Addr) []byte { return dst }

var oobSize = 64

func tosOf(oob []byte) (byte, bool) { return 0, false }

func isMsgSize(err error) bool { return errorsIs(err, syscall.EMSGSIZE) }

func isRefused(err error) bool { return errorsIs(err, syscall.ECONNREFUSED) }

func enableGRO(rc syscall.RawConn) bool { return false }

func segmentOOB(dst []byte, size int) []byte { return dst }

func groSize(oob []byte) int { return 0 }

func gsoRefused(err error) bool { return true }

func threadInProcessNetns() bool { return true }

// batchedReads: readBatch reads one datagram a call here.
const batchedReads = false

// readAtv reads f from off into bufs, one after the other, until they are
// full or the file ends (io.EOF with what it read).
func readAtv(f *os.File, bufs [][]byte, off int64) (int, error) {
	total := 0
	for _, p := range bufs {
		n, err := f.ReadAt(p, off)
		total, off = total+n, off+int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
