package udp_test

import (
	"io"
	"net"
	"testing"
	"time"

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

// BenchmarkBottleneck: one stream through a relay that is a 25 MB/s link
// (200 Mbit/s) with a 1 MB drop-tail queue (40 ms of it): fast should fill
// it with little loss, fixed below the link rate should hold its rate
// without loss, and fixed above it should find the delay and come down.
// Reported: goodput, bytes sent again, the rate the stream paced at last.
func BenchmarkBottleneck(b *testing.B) {
	const link = 25e6
	for _, tc := range []struct {
		name string
		o    transport.Options
	}{
		{"fast", transport.Options{DSCP: -1}},
		{"aimd", transport.Options{DSCP: -1, CC: "aimd"}},
		{"fixed-at-0.8", transport.Options{DSCP: -1, CC: "fixed", PacingRate: link * 8 / 10}},
		{"fixed-at-1.5", transport.Options{DSCP: -1, CC: "fixed", PacingRate: link * 15 / 10}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c, s, _, r := viaRelay(b, tc.o, 11)
			r.bottleneck(link, 1<<20)
			done := make(chan struct{})
			go func() { io.Copy(io.Discard, s); close(done) }()
			buf := make([]byte, 1<<20)
			b.SetBytes(int64(len(buf)))
			start, n := time.Now(), 0
			for b.Loop() {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
				n++
			}
			c.CloseWrite()
			<-done
			// the goodput to the last byte (the buffers hold the last
			// writes' bytes after the loop ends)
			b.ReportMetric(float64(n*len(buf))/time.Since(start).Seconds()/1e6, "goodMB/s")
			if st, err := c.Stats(); err == nil {
				b.ReportMetric(float64(st.BytesRetrans)/float64(max(st.BytesSent, 1))*100, "%resent")
				b.ReportMetric(float64(st.PacingRate)/1e6, "paceMB/s")
				b.ReportMetric(float64(st.RTT.Microseconds())/1000, "rtt-ms")
			}
		})
	}
}
