package cli

import (
	"testing"
	"time"
)

func TestParseRemote(t *testing.T) {
	for _, tc := range []struct {
		in       string
		isRemote bool
		addr     string
		path     string
		err      bool
	}{
		{"/local/file", false, "", "", false},
		{"lp://host:7000/a/b c", true, "host:7000", "a/b c", false},
		{"lp://host/a", true, "host:7070", "a", false},
		{"lp://host:7000", true, "host:7000", "", false},
		{"lp://[::1]:7000/x%20y", true, "[::1]:7000", "x%20y", false},
		{"lp://[::1]/x", true, "[::1]:7070", "x", false},
		{"lp://::1:7000/x", true, "", "", true},
		{"lp://[::1/x", true, "", "", true},
		{"lp://host:0/x", true, "", "", true},
		{"lp://host:99999/x", true, "", "", true},
		{"lp://host:port/x", true, "", "", true},
		{"lp://:7000/x", true, "", "", true},
	} {
		r, ok, err := parseRemote(tc.in)
		if ok != tc.isRemote || (err != nil) != tc.err || (err == nil && (r.Addr != tc.addr || r.Path != tc.path)) {
			t.Errorf("parseRemote(%q) = %+v, %v, %v", tc.in, r, ok, err)
		}
	}
}

func TestDurationFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"10", 10 * time.Second, false},
		{"2.5", 2500 * time.Millisecond, false},
		{"1m30s", 90 * time.Second, false},
		{"5s", 5 * time.Second, false},
		{"ten", 0, true},
	} {
		var d time.Duration
		err := durationFlag{&d}.Set(tc.in)
		if (err != nil) != tc.err || d != tc.want {
			t.Errorf("Set(%q) = %v, %v; want %v, error %v", tc.in, d, err, tc.want, tc.err)
		}
	}
}
