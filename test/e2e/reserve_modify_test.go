//go:build linux

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestReserveModifyFlowSpec: lightpath reserve modify --flow-spec replaces
// a reservation's flow spec at a real controller (--flow, as create spells
// it, too), keeping its DSCP; a spec that does not parse is refused before
// anything is sent, one with a flow outside the nodes' addresses by the
// controller, and a reservation booked without a flow spec has none to
// change. Each a one-line error, the reservation left as it was.
func TestReserveModifyFlowSpec(t *testing.T) {
	t.Parallel()
	c := startCLICtl(t)
	adm := c.adminTok
	type flowResv struct {
		ID       string `json:"id"`
		Version  uint64 `json:"version"`
		DSCP     int    `json:"dscp"`
		FlowSpec string `json:"flow_spec"`
	}
	read := func(id string) flowResv {
		t.Helper()
		var f flowResv
		if err := json.Unmarshal([]byte(c.ok(adm, "reserve", "show", id, "--json").stdout), &f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	r := c.ok(adm, "reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "100M", "--start", "+1h", "--duration", "1h",
		"--flow", "tcp 198.18.1.1 > 198.18.2.1:7070", "--json")
	booked := oneJSON[flowResv](t, r.stdout)
	if booked.DSCP == 0 || booked.FlowSpec != "tcp 198.18.1.1 > 198.18.2.1:7070" {
		t.Fatalf("create --flow: %+v", booked)
	}

	r = c.ok(adm, "reserve", "modify", booked.ID, "--flow-spec", "TCP 198.18.1.1 > 198.18.2.1:7070-7071 , udp 198.18.1.1:5000 > 198.18.2.1 cgroup /lightpath/x")
	if !strings.HasPrefix(r.stdout, "modified "+booked.ID) || !strings.Contains(r.stdout, "(version 2)") {
		t.Errorf("modify --flow-spec said:\n%s", r.stdout)
	}
	got := read(booked.ID)
	if want := "tcp 198.18.1.1 > 198.18.2.1:7070-7071, udp 198.18.1.1:5000 > 198.18.2.1 cgroup lightpath/x"; got.FlowSpec != want || got.DSCP != booked.DSCP || got.Version != 2 {
		t.Errorf("after modify --flow-spec: %+v; want flow spec %q, DSCP %d, version 2", got, want, booked.DSCP)
	}
	r = c.ok(adm, "reserve", "modify", booked.ID, "--flow", "any 2001:2:0:1::1 > 2001:2:0:2::1", "--json")
	if m := oneJSON[flowResv](t, r.stdout); m.FlowSpec != "any 2001:2:0:1::1 > 2001:2:0:2::1" || m.Version != 3 {
		t.Errorf("modify --flow --json: %+v", m)
	}

	plain := oneJSON[flowResv](t, c.ok(adm, "reserve", "create", "--from", "a1", "--to", "b1", "--bandwidth", "100M", "--start", "+3h", "--duration", "1h", "--json").stdout)
	for _, tc := range []struct {
		name, id, spec string
		want           []string
	}{
		{"a spec that does not parse", booked.ID, "tcp 198.18.1.1 > ", []string{"reserve modify: --flow-spec", "column"}},
		{"a flow from another node", booked.ID, "tcp 198.18.2.2 > 198.18.2.1:7070", []string{"reserve modify", "198.18.2.2", "from node"}},
		{"a reservation without flows", plain.ID, "tcp 198.18.1.1 > 198.18.2.1:7070", []string{"reserve modify", "steers no flows"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkFailure(t, "reserve modify --flow-spec "+tc.spec, c.lp(adm, "reserve", "modify", tc.id, "--flow-spec", tc.spec), tc.want...)
		})
	}
	if got := read(booked.ID); got.FlowSpec != "any 2001:2:0:1::1 > 2001:2:0:2::1" || got.Version != 3 {
		t.Errorf("after the refusals: %+v", got)
	}
	if got := read(plain.ID); got.FlowSpec != "" || got.Version != 1 {
		t.Errorf("the reservation without flows after the refusal: %+v", got)
	}
}
