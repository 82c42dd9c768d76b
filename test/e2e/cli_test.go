//go:build linux

package e2e

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestUsageErrors checks mistakes on the command line fail at once, with one
// error line naming the mistake.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	dir := scratchDir(t)
	file := filepath.Join(dir, "f.txt")
	writeFile(t, file, "x\n", 0o644)
	closed := "127.0.0.1:" + strconv.Itoa(freePort(t, "127.0.0.1")) // nothing listens there
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"cp without arguments", []string{"cp"}, []string{"SRC"}},
		{"cp without a remote", []string{"cp", file, filepath.Join(dir, "g")}, []string{"remote"}},
		{"cp between two servers", []string{"cp", "lp://127.0.0.1:1/a", "lp://127.0.0.1:2/b"}, []string{"not supported"}},
		{"cp with a bad port", []string{"cp", file, "lp://127.0.0.1:99999/x"}, []string{"99999"}},
		{"cp with IPv6 not in brackets", []string{"cp", file, "lp://::1:7070/x"}, []string{"brackets"}},
		{"cp with a bad rate", []string{"cp", "--rate", "fast", file, "lp://" + closed + "/x"}, []string{"--rate"}},
		{"cp with a tiny block size", []string{"cp", "--block-size", "1KiB", file, "lp://" + closed + "/x"}, []string{"--block-size"}},
		{"cp with too many streams", []string{"cp", "-P", "1000", file, "lp://" + closed + "/x"}, []string{"-P"}},
		{"cp with an unknown congestion control", []string{"cp", "--cc", "vegas", file, "lp://" + closed + "/x"}, []string{"vegas"}},
		{"cp with an unknown flag", []string{"cp", "--frobnicate", file, "lp://" + closed + "/x"}, []string{"--frobnicate"}},
		{"cp of a dir without -r", []string{"cp", dir, "lp://" + closed + "/x"}, []string{"-r"}},
		{"cp to a server that is not there", []string{"cp", file, "lp://" + closed + "/x"}, []string{closed, "refused"}},
		{"bench to a server that is not there", []string{"bench", "-t", "1s", "lp://" + closed}, []string{closed, "refused"}},
		{"bench for no time", []string{"bench", "-t", "0s", "lp://" + closed}, []string{"-t"}},
		{"serve without flags", []string{"serve"}, []string{"--listen", "--root"}},
		{"serve a missing root", []string{"serve", "--listen", closed, "--root", filepath.Join(dir, "none")}, []string{"no such file"}},
		{"serve a file", []string{"serve", "--listen", closed, "--root", file}, []string{"not a directory"}},
		{"serve with half the TLS flags", []string{"serve", "--listen", closed, "--root", dir, "--tls-cert", file}, []string{"--tls-key"}},
		{"serve with a bad token file", []string{"serve", "--listen", closed, "--root", dir, "--token-file", filepath.Join(dir, "none")}, []string{"token"}},
		{"unknown command", []string{"frobnicate"}, []string{"frobnicate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runLP(t, runOpts{timeout: 2 * time.Minute}, tc.args...)
			checkFailure(t, "lightpath "+strings.Join(tc.args, " "), r, tc.want...)
		})
	}
}

// TestUnknownVerbs checks a misspelt verb fails at every level (it used to
// print the group's help and exit 0), naming the verb and the nearest real
// one, and that help references name real commands.
func TestUnknownVerbs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"testbed upp", []string{"testbed", "upp"}, []string{`unknown command "upp" for "lightpath testbed"; did you mean "up"?`}},
		{"testbed stauts", []string{"testbed", "stauts"}, []string{`unknown command "stauts" for "lightpath testbed"; did you mean "status"?`}},
		{"link sett blames the verb, not the flag", []string{"testbed", "link", "sett", "wan", "--delay", "1ms"},
			[]string{`unknown command "sett" for "lightpath testbed link"; did you mean "set"?`, "'lightpath testbed link --help'"}},
		{"an unknown flag names the whole command", []string{"testbed", "link", "set", "wan", "--dealy", "1ms"},
			[]string{"testbed link set: unknown flag: --dealy", "'lightpath testbed link set --help'"}},
		{"a misspelt top command", []string{"reserv", "list"}, []string{`unknown command "reserv" for "lightpath"; did you mean "reserve"?`}},
		{"a misspelt verb of reserve", []string{"reserve", "lst"}, []string{`unknown command "lst" for "lightpath reserve"; did you mean "list"?`}},
		{"two levels down", []string{"user", "token", "crate"}, []string{`unknown command "crate" for "lightpath user token"; did you mean "create"?`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runLP(t, runOpts{timeout: 2 * time.Minute}, tc.args...)
			checkFailure(t, "lightpath "+strings.Join(tc.args, " "), r, tc.want...)
			if r.stdout != "" {
				t.Errorf("stdout is not empty (help printed?):\n%s", r.stdout)
			}
		})
	}
	// A group run alone still prints its help and succeeds.
	r := runLP(t, runOpts{timeout: 2 * time.Minute}, "testbed", "link")
	if r.code != 0 || !strings.Contains(r.stdout, "lightpath testbed link [command]") {
		t.Errorf("lightpath testbed link: exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}
