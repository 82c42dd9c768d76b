package udp_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"testing"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

	"github.com/lightpath/lightpath/internal/netns"
	"github.com/lightpath/lightpath/internal/roottest"
	"github.com/lightpath/lightpath/internal/transport"
)

// vethPair makes two namespaces joined by a veth pair of the given MTU,
// 198.19.9.1 and 198.19.9.2, and returns their paths.
func vethPair(b testing.TB, mtu int) (a, z string) {
	b.Helper()
	var paths []string
	for range 2 {
		name := fmt.Sprintf("lpudp-%06x", rand.IntN(1<<24))
		if err := netns.Create(name); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { netns.Delete(name) })
		paths = append(paths, netns.Path(name))
	}
	ha, err := netns.Handle(paths[0])
	if err != nil {
		b.Fatal(err)
	}
	defer ha.Close()
	hz, err := netns.Handle(paths[1])
	if err != nil {
		b.Fatal(err)
	}
	defer hz.Close()
	nsz, err := vnetns.GetFromPath(paths[1])
	if err != nil {
		b.Fatal(err)
	}
	defer nsz.Close()
	if err := ha.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "va", MTU: mtu}, PeerName: "vz", PeerNamespace: netlink.NsFd(nsz)}); err != nil {
		b.Fatal(err)
	}
	for i, x := range []struct {
		h   *netlink.Handle
		dev string
	}{{ha, "va"}, {hz, "vz"}} {
		l, err := x.h.LinkByName(x.dev)
		if err != nil {
			b.Fatal(err)
		}
		x.h.LinkSetMTU(l, mtu)
		addr, _ := netlink.ParseAddr("198.19.9." + strconv.Itoa(i+1) + "/24")
		if err := x.h.AddrAdd(l, addr); err != nil {
			b.Fatal(err)
		}
		if err := x.h.LinkSetUp(l); err != nil {
			b.Fatal(err)
		}
	}
	return paths[0], paths[1]
}

// BenchmarkVeth: one stream between two namespaces over a veth pair at
// MTU 1500 and 9000, memory to memory (the figures docs/udp.md sets beside
// iperf3 -u's).
func BenchmarkVeth(b *testing.B) {
	roottest.Require(b, "network namespaces joined by a veth pair")
	for _, mtu := range []int{1500, 9000} {
		for _, cc := range []string{"fast", "fixed"} {
			b.Run(fmt.Sprintf("mtu%d-%s", mtu, cc), func(b *testing.B) {
				nsA, nsZ := vethPair(b, mtu)
				tr, _ := newSession(b)
				var ln net.Listener
				err := netns.Do(nsZ, func() (err error) {
					ln, err = tr.Listen(b.Context(), "198.19.9.2:0", transport.Options{DSCP: -1})
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				defer ln.Close()
				acc := make(chan net.Conn, 1)
				go func() { s, _ := ln.Accept(); acc <- s }()
				var c transport.Conn
				o := transport.Options{DSCP: -1, CC: cc}
				if cc == "fixed" {
					o.PacingRate = 1 << 30 // 8.6 Gbit/s: above what the veth carries here
				}
				err = netns.Do(nsA, func() (err error) {
					c, err = tr.Dial(b.Context(), ln.Addr().String(), o)
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				s := <-acc
				done := make(chan struct{})
				go func() { io.Copy(io.Discard, s); close(done) }()
				buf := make([]byte, 1<<20)
				b.SetBytes(int64(len(buf)))
				for b.Loop() {
					if _, err := c.Write(buf); err != nil {
						b.Fatal(err)
					}
				}
				c.CloseWrite()
				<-done
				if st, err := c.Stats(); err == nil {
					b.ReportMetric(float64(st.Datagrams)/float64(max(st.SendCalls, 1)), "dgrams/call")
					b.ReportMetric(float64(st.BytesRetrans)/float64(max(st.BytesSent, 1))*100, "%resent")
					b.ReportMetric(float64(st.MSS), "payload")
				}
				c.Close()
				s.Close()
			})
		}
	}
}
