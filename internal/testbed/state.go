package testbed

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/lightpath/lightpath/internal/topology"
)

// RunDir holds one directory per testbed that is up (or half made): its
// topology, its state, and the emulator's pid, log and control socket. It
// is a variable so that tests may move it.
var RunDir = "/run/lightpath"

// Files under a testbed's directory.
const (
	topologyFile = "topology.yaml" // a copy of the file it was built from
	stateFile    = "state.json"
	pidFile      = "emulator.pid"
	logFile      = "emulator.log"
	sockFile     = "emulator.sock"
)

// Phases of a testbed's state.
const (
	PhaseBuilding = "building" // up has started; down cleans up after a crash
	PhaseUp       = "up"
)

// State is what `up` records about a testbed; `down`, `status`, `exec` and
// `link set` read it.
type State struct {
	Name    string    `json:"name"`
	File    string    `json:"file"` // the topology file as given to up
	Created time.Time `json:"created"`
	Phase   string    `json:"phase"`
	// RaisedHost lists host-wide settings that up raised (net.core.*),
	// which down leaves as they are: other users of the host may rely on
	// them by then.
	RaisedHost []string `json:"raised_host,omitempty"`
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// CheckName refuses testbed names that would not make good namespace or
// directory names.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("testbed name %q: use 1 to 32 of a-z, 0-9 and '-', starting with a letter or digit", name)
	}
	return nil
}

// DefaultName is the testbed name for a topology file: its base name
// without the extension ("examples/two-site.yaml" gives "two-site").
func DefaultName(file string) string {
	base := filepath.Base(file)
	return strings.TrimSuffix(base, filepath.Ext(base))
}

// Dir is a testbed's state directory. Others may put things there too
// (a controller's unix socket, which agents in the namespaces reach as a
// file): up works beside them, and down removes only what up made.
func Dir(name string) string { return filepath.Join(RunDir, name) }

// AgentLogPath is where the agent of a node started by testbed up --agents
// writes its log.
func AgentLogPath(name, node string) string {
	return filepath.Join(Dir(name), "agent-"+node+".log")
}

// SpoolDir is the spool of the agent of a node started by testbed up
// --agents.
func SpoolDir(name, node string) string { return filepath.Join(Dir(name), "spool", node) }

// madeByUp reports whether an entry of a state directory is one that up
// (or the agents it starts) made, which down removes.
func madeByUp(entry string) bool {
	switch entry {
	case topologyFile, stateFile, stateFile + ".tmp", pidFile, logFile, sockFile, "spool":
		return true
	}
	return strings.HasPrefix(entry, "agent-") && strings.HasSuffix(entry, ".log")
}

// hasState reports whether a testbed's directory holds what up makes
// first (an up that began, finished or not), as opposed to being absent
// or holding only what others put there.
func hasState(name string) bool {
	for _, f := range []string{topologyFile, stateFile, pidFile} {
		if _, err := os.Lstat(filepath.Join(Dir(name), f)); err == nil {
			return true
		}
	}
	return false
}

// removeMade removes what up made in a testbed's directory, then the
// directory if nothing else is left in it; it returns the names of what
// it left.
func removeMade(name string) (kept []string, err error) {
	ents, err := os.ReadDir(Dir(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if !madeByUp(e.Name()) {
			kept = append(kept, e.Name())
			continue
		}
		if err := os.RemoveAll(filepath.Join(Dir(name), e.Name())); err != nil {
			return kept, err
		}
	}
	if len(kept) > 0 {
		return kept, nil
	}
	if err := os.Remove(Dir(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return nil, nil
}

// SocketPath is the emulator's control socket of a testbed.
func SocketPath(name string) string { return filepath.Join(Dir(name), sockFile) }

// LogPath is the emulator's log of a testbed.
func LogPath(name string) string { return filepath.Join(Dir(name), logFile) }

// NamespaceName is the network namespace of a node: lp-<testbed>-<node>.
func NamespaceName(testbed, node string) string { return "lp-" + testbed + "-" + node }

// NamespacePath is where a node's namespace is mounted (as `ip netns`
// does), so that `ip netns exec` works on it too.
func NamespacePath(testbed, node string) string {
	return filepath.Join("/run/netns", NamespaceName(testbed, node))
}

// ErrNotFound says a testbed does not exist.
var ErrNotFound = errors.New("no such testbed")

// Open reads a testbed's state and its topology.
func Open(name string) (*State, *topology.Topology, error) {
	if err := CheckName(name); err != nil {
		return nil, nil, err
	}
	b, err := os.ReadFile(filepath.Join(Dir(name), stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("testbed %q: %w (lightpath testbed up FILE --name %s)", name, ErrNotFound, name)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read state: %w", err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, nil, fmt.Errorf("read state %s: %w", filepath.Join(Dir(name), stateFile), err)
	}
	t, err := loadCopy(name)
	if err != nil {
		return &st, nil, err
	}
	return &st, t, nil
}

// loadCopy parses the copy of the topology kept in the state directory.
func loadCopy(name string) (*topology.Topology, error) {
	p := filepath.Join(Dir(name), topologyFile)
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read topology: %w", err)
	}
	t, err := topology.Parse(p, data)
	if err != nil {
		return nil, fmt.Errorf("topology kept in %s: %w", p, err)
	}
	return t, nil
}

func writeState(st *State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(Dir(st.Name), stateFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return os.Rename(tmp, filepath.Join(Dir(st.Name), stateFile))
}

// List names the testbeds that have a state directory.
func List() ([]string, error) {
	ents, err := os.ReadDir(RunDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() && nameRE.MatchString(e.Name()) {
			if _, err := os.Stat(filepath.Join(RunDir, e.Name(), topologyFile)); err == nil {
				names = append(names, e.Name())
			}
		}
	}
	return names, nil
}
