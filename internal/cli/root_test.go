package cli

import (
	"io"
	"strings"
	"testing"
)

// TestUnknownVerbSuggests checks every level refuses a verb it does not
// have, naming the nearest ones, and that a flag error after a misspelt
// verb blames the verb.
func TestUnknownVerbSuggests(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"testbed", "upp"}, `testbed: unknown command "upp" for "lightpath testbed"; did you mean "up"? (see 'lightpath testbed --help')`},
		{[]string{"testbed", "stauts"}, `unknown command "stauts" for "lightpath testbed"; did you mean "status"?`},
		{[]string{"testbed", "link", "sett", "wan", "--delay", "1ms"}, `testbed link: unknown command "sett" for "lightpath testbed link"; did you mean "set"?`},
		{[]string{"testbed", "link", "set", "wan", "--dealy", "1ms"}, `testbed link set: unknown flag: --dealy (see 'lightpath testbed link set --help')`},
		{[]string{"reserve", "crate"}, `unknown command "crate" for "lightpath reserve"; did you mean "create"?`},
		{[]string{"reserve", "frobnicate"}, `reserve: unknown command "frobnicate" for "lightpath reserve" (see 'lightpath reserve --help')`},
	} {
		root := newRoot(io.Discard, io.Discard)
		root.SetArgs(tc.args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("lightpath %s: error %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}
