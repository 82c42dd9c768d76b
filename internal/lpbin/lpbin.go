// Package lpbin builds the lightpath binary for tests that run it as a user
// would (test/e2e, test/docs): one build per test binary, in a directory of
// its own. The binary the tests run is built with the race detector, so the
// controller, agents, data nodes and movers they start are checked as the
// unit tests are; the testbed's emulator daemon, the harness that carries
// every packet, runs from a plain build beside it.
package lpbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// EmulatorEnv names the variable through which `lightpath testbed up` is told
// to run the emulator daemon from another binary.
const EmulatorEnv = "LIGHTPATH_TESTBED_EMULATOR"

// Built is what Build made.
type Built struct {
	// Dir holds the binaries (mode 0755, so that a test may run them as
	// another user). RemoveAll removes it.
	Dir string
	// Bin is lightpath built with -race: the binary the tests run.
	Bin string
	// Plain is lightpath built without it: the emulator daemon's.
	Plain string
	// Races is the directory where every race-built process writes its
	// reports (GORACE log_path), once Setenv has run.
	Races string
}

// Build compiles cmd/lightpath twice into a new temporary directory named
// after prefix: with the race detector (Bin) and without (Plain).
func Build(prefix string) (*Built, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	b := &Built{Dir: dir, Bin: filepath.Join(dir, "lightpath"), Plain: filepath.Join(dir, "plain", "lightpath"),
		Races: filepath.Join(dir, "races")}
	for _, d := range []string{filepath.Dir(b.Plain), b.Races} {
		if err := os.Mkdir(d, 0o777); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	// Processes run as another user write their reports here too.
	if err := os.Chmod(b.Races, 0o1777); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	for _, args := range [][]string{{"-race", "-o", b.Bin}, {"-o", b.Plain}} {
		build := exec.Command("go", append(append([]string{"build"}, args...), "github.com/lightpath/lightpath/cmd/lightpath")...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("build lightpath %s: %w", strings.Join(args[:len(args)-2], " "), err)
		}
	}
	return b, nil
}

// Setenv sets, in this process and so in every process the tests start,
// the emulator's binary and where race reports go. Tests that build their
// own environment must keep GORACE and EmulatorEnv.
func (b *Built) Setenv() error {
	if err := os.Setenv(EmulatorEnv, b.Plain); err != nil {
		return err
	}
	// Reports go to files (log_path.PID) rather than to stderr: many of
	// the processes are daemons whose stderr nobody reads.
	return os.Setenv("GORACE", "log_path="+filepath.Join(b.Races, "race")+" history_size=2")
}

// Reports returns the race reports the processes wrote, each headed by its
// file's name; "" when there are none.
func (b *Built) Reports() (string, error) {
	names, err := filepath.Glob(filepath.Join(b.Races, "race*"))
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	var out strings.Builder
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			return "", err
		}
		if len(strings.TrimSpace(string(data))) == 0 {
			continue
		}
		fmt.Fprintf(&out, "--- %s\n%s\n", filepath.Base(n), data)
	}
	return out.String(), nil
}

// RemoveAll removes the binaries and the reports.
func (b *Built) RemoveAll() { os.RemoveAll(b.Dir) }
