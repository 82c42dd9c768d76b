package transfer

import "testing"

func TestCheckCC(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"", true},
		{"bbr", true},
		{"fast", true},
		{"bpf_cubic", true},
		{"my-cc2", true},
		{"fifteen-bytes-x", true},
		{"sixteen-bytes-xx", false},
		{"FAST", false},
		{"fast tcp", false},
		{"fast\n", false},
		{"../x", false},
		{"fäst", false},
	} {
		if err := CheckCC(tc.name); (err == nil) != tc.ok {
			t.Errorf("CheckCC(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
