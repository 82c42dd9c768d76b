package mover

import (
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/wire"
)

func TestDestTarget(t *testing.T) {
	for _, tc := range []struct {
		name string
		dest Dest
		in   string
		want string
		err  bool
	}{
		{"plain", Dest{Base: "."}, "a/b", "a/b", false},
		{"under base", Dest{Base: "in"}, "a/b c", "in/a/b c", false},
		{"renamed top", Dest{Base: "x", Rename: "new"}, "old/f", "x/new/f", false},
		{"unicode", Dest{Base: "."}, "größe/ä", "größe/ä", false},
		{"dotdot", Dest{Base: "."}, "a/../../etc", "", true},
		{"absolute", Dest{Base: "."}, "/etc/passwd", "", true},
		{"empty component", Dest{Base: "."}, "a//b", "", true},
		{"dot", Dest{Base: "."}, "./a", "", true},
		{"empty", Dest{Base: "."}, "", "", true},
		{"nul", Dest{Base: "."}, "a\x00b", "", true},
		{"work file", Dest{Base: "."}, "a/.x.lightpath-part", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.dest.target(tc.in)
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("target(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
			}
		})
	}
}

func TestClientPath(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{"", ".", false},
		{"/", ".", false},
		{"a/b", "a/b", false},
		{"//etc/passwd", "etc/passwd", false},
		{"a/./b/", "a/b", false},
		{"../x", "", true},
		{"a/../../x", "", true},
		{"a/..", "", true},
		{"a\x00", "", true},
	} {
		got, err := clientPath(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("clientPath(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestJudge(t *testing.T) {
	sec := int64(time.Second)
	stream := func(rwnd, sndbuf int64) []wire.StreamStats {
		return []wire.StreamStats{{RwndLimited: rwnd, SndbufLimited: sndbuf}}
	}
	for _, tc := range []struct {
		name     string
		snd, rcv wire.Stats
		rate     float64
		achieved float64
		want     string
	}{
		{"rate cap", wire.Stats{Elapsed: sec, Streams: stream(0, 0)}, wire.Stats{Elapsed: sec}, 1e9, 0.95e9, "rate-limit"},
		{"receiver disk", wire.Stats{Elapsed: sec, Streams: stream(sec/2, 0)}, wire.Stats{Elapsed: sec, IOWait: sec * 7 / 10}, 0, 1e9, "receiver-disk"},
		{"sender disk", wire.Stats{Elapsed: sec, IOWait: sec * 8 / 10, Streams: stream(0, 0)}, wire.Stats{Elapsed: sec, NetWait: sec}, 0, 1e9, "sender-disk"},
		{"receive window", wire.Stats{Elapsed: sec, NetWait: sec, Streams: stream(sec/2, 0)}, wire.Stats{Elapsed: sec}, 0, 1e9, "receive-window"},
		{"send buffer", wire.Stats{Elapsed: sec, NetWait: sec, Streams: stream(0, sec/2)}, wire.Stats{Elapsed: sec}, 0, 1e9, "send-buffer"},
		{"network", wire.Stats{Elapsed: sec, NetWait: sec * 9 / 10, Streams: stream(0, 0)}, wire.Stats{Elapsed: sec, NetWait: sec * 9 / 10}, 0, 1e9, "network"},
		{"sender cpu", wire.Stats{Elapsed: sec, NetWait: sec / 10, Streams: stream(0, 0)}, wire.Stats{Elapsed: sec, NetWait: sec * 8 / 10}, 0, 1e9, "sender"},
		{"receiver cpu", wire.Stats{Elapsed: sec, NetWait: sec / 10, Streams: stream(0, 0)}, wire.Stats{Elapsed: sec, NetWait: sec / 10}, 0, 1e9, "receiver"},
		{"rate not reached", wire.Stats{Elapsed: sec, NetWait: sec * 9 / 10, Streams: stream(0, 0)}, wire.Stats{Elapsed: sec}, 10e9, 1e9, "network"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Judge(tc.snd, tc.rcv, tc.rate, tc.achieved); got.What != tc.want {
				t.Fatalf("Judge = %+v, want %s", got, tc.want)
			}
		})
	}
}
