package cli

import (
	"strings"
	"testing"
	"time"
)

func TestRunFlagsCheck(t *testing.T) {
	ok := runFlags{rate: "300M", from: "a1", to: "b1"}
	for _, tc := range []struct {
		name string
		edit func(*runFlags)
		bw   uint64
		err  string
	}{
		{name: "rate", bw: 300_000_000},
		{name: "auto", edit: func(f *runFlags) { f.rate = "auto" }},
		{name: "no rate", edit: func(f *runFlags) { f.rate = "" }, err: "--reserve RATE|auto is required"},
		{name: "bad rate", edit: func(f *runFlags) { f.rate = "fast" }, err: "(or --reserve auto)"},
		{name: "no from", edit: func(f *runFlags) { f.from = "" }, err: "--from NODE is required"},
		{name: "no to", edit: func(f *runFlags) { f.to = "" }, err: "--to NODE is required"},
		{name: "negative duration", edit: func(f *runFlags) { f.duration = -time.Second }, err: "--reserve-duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := ok
			if tc.edit != nil {
				tc.edit(&f)
			}
			bw, err := f.check()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || bw != tc.bw {
				t.Errorf("got %d, %v; want %d", bw, err, tc.bw)
			}
		})
	}
}
