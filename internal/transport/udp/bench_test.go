package udp_test

import (
	"io"
	"net"
	"testing"

	"github.com/lightpath/lightpath/internal/transport"
)

// BenchmarkThroughput: memory to memory over loopback, one stream, the
// UDP transport's rate controls beside TCP. Quoted in docs/udp.md.
func BenchmarkThroughput(b *testing.B) {
	for _, tc := range []struct {
		name string
		tr   func(testing.TB) transport.Transport
		o    transport.Options
	}{
		{"udp-fast", udpTransport, transport.Options{DSCP: -1}},
		{"udp-fixed-unpaced", udpTransport, transport.Options{DSCP: -1, CC: "fixed"}},
		{"udp-fixed-4Gbps", udpTransport, transport.Options{DSCP: -1, CC: "fixed", PacingRate: 500e6}},
		{"udp-aimd", udpTransport, transport.Options{DSCP: -1, CC: "aimd"}},
		{"tcp", func(testing.TB) transport.Transport { return transport.TCP }, transport.Options{DSCP: -1}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tr := tc.tr(b)
			ln, err := tr.Listen(b.Context(), "127.0.0.1:0", transport.Options{DSCP: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			acc := make(chan net.Conn, 1)
			go func() { c, _ := ln.Accept(); acc <- c }()
			c, err := tr.Dial(b.Context(), ln.Addr().String(), tc.o)
			if err != nil {
				b.Fatal(err)
			}
			s := <-acc
			done := make(chan int64)
			go func() {
				n, _ := io.Copy(io.Discard, s)
				done <- n
			}()
			buf := make([]byte, 1<<20)
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			c.(interface{ CloseWrite() error }).CloseWrite()
			<-done
			if st, err := c.Stats(); err == nil && tc.name != "tcp" {
				b.ReportMetric(float64(st.Datagrams)/float64(max(st.SendCalls, 1)), "dgrams/call")
				b.ReportMetric(float64(st.BytesRetrans)/float64(max(st.BytesSent, 1))*100, "%resent")
			}
			c.Close()
			s.Close()
		})
	}
}

func udpTransport(t testing.TB) transport.Transport {
	tr, _ := newSession(t)
	return tr
}
