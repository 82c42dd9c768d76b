package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/lightpath/lightpath/internal/testbed"
)

// agentLog is where the agent of a node started by testbed up --agents
// writes its log.
func agentLog(name, node string) string {
	return filepath.Join(testbed.Dir(name), "agent-"+node+".log")
}

// startAgents starts one agent per node of testbed name, each inside its
// node's namespace and in a session of its own, so it outlives the
// command that started it; testbed down stops them with every other
// process in the namespaces.
func startAgents(name, controller, tokenFile string) ([]string, error) {
	if controller == "" || tokenFile == "" {
		return nil, errors.New("--agents needs --controller URL and --controller-token-file F (a token of role agent)")
	}
	tokenFile, err := filepath.Abs(tokenFile)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(tokenFile); err != nil {
		return nil, fmt.Errorf("--controller-token-file: %w", unwrapPath(err))
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this program: %w", err)
	}
	_, topo, err := testbed.Open(name)
	if err != nil {
		return nil, err
	}
	var started []string
	for _, n := range topo.Nodes {
		log, err := os.OpenFile(agentLog(name, n.Name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return started, fmt.Errorf("agent of %s: %w", n.Name, err)
		}
		cmd := exec.Command(self, "testbed", "exec", "--name", name, n.Name, "--",
			self, "agent", "--node", n.Name, "--controller", controller, "--controller-token-file", tokenFile,
			"--testbed", name, "--spool", filepath.Join(testbed.Dir(name), "spool", n.Name))
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = cmd.Start()
		log.Close()
		if err != nil {
			return started, fmt.Errorf("start the agent of %s: %w", n.Name, err)
		}
		cmd.Process.Release()
		started = append(started, n.Name)
	}
	return started, nil
}
