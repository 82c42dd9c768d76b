package agent

import (
	"net/netip"
	"testing"
)

func TestWithoutDown(t *testing.T) {
	want := Plan{
		Routes: []Route{
			{Table: 108, Dst: netip.MustParsePrefix("198.18.2.1/32"), Dev: "dedicated"},
			{Table: 108, Dst: netip.MustParsePrefix("198.18.1.1/32"), Dev: "a1-ra"},
			{Table: 110, Dst: netip.MustParsePrefix("198.18.2.2/32"), Dev: "dedicated"},
		},
		Rules:   []IPRule{{Priority: 10008, Mark: 0x108, Table: 108}, {Priority: 10010, Mark: 0x10a, Table: 110}},
		Classes: []Class{{Dev: "dedicated", Minor: 0x108}},
	}
	if got := WithoutDown(want, nil); len(got.Routes) != 3 || len(got.Rules) != 2 {
		t.Errorf("nothing down: %+v", got)
	}
	got := WithoutDown(want, []string{"dedicated"})
	if len(got.Routes) != 1 || got.Routes[0].Dev != "a1-ra" {
		t.Errorf("routes %+v: want only the one out of a1-ra", got.Routes)
	}
	if len(got.Rules) != 1 || got.Rules[0].Table != 108 {
		t.Errorf("rules %+v: want table 110's gone with its last route", got.Rules)
	}
	if len(got.Classes) != 1 {
		t.Errorf("classes %+v: they stay", got.Classes)
	}
	if len(want.Routes) != 3 {
		t.Errorf("WithoutDown changed its argument")
	}
}
