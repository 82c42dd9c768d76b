package topology

import "testing"

// TestNumbering checks that the ranges numbered from a DSCP do not run
// into each other or into the testbed's own htb classes.
func TestNumbering(t *testing.T) {
	if HTBFirstRes&0xffff != ClassBase || HTBFirstRes&^0xffff != HTBRoot {
		t.Errorf("first reservation class %#x is not 1:%x", HTBFirstRes, ClassBase)
	}
	for _, h := range []int{HTBLink, HTBDefault} {
		if h >= HTBFirstRes {
			t.Errorf("testbed class %#x inside the agent's range from %#x", h, HTBFirstRes)
		}
	}
	if ClassBase+MaxDSCP > 0xffff {
		t.Errorf("class minors reach %#x, beyond 16 bits", ClassBase+MaxDSCP)
	}
	if FilterPrio4+MaxDSCP >= FilterPrio6 || FilterPrio6+MaxDSCP > 0xffff {
		t.Errorf("filter priorities overlap or overflow: v4 %#x, v6 %#x", FilterPrio4, FilterPrio6)
	}
	if TableBase <= 0 || TableBase+MaxDSCP >= 253 {
		t.Errorf("routing tables %d-%d run into the kernel's (253 default, 254 main, 255 local)", TableBase, TableBase+MaxDSCP)
	}
}
