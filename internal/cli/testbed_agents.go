package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lightpath/lightpath/internal/agent"
	"github.com/lightpath/lightpath/internal/client"
	"github.com/lightpath/lightpath/internal/testbed"
	"github.com/lightpath/lightpath/internal/textsafe"
)

// agentsWait is how long testbed up --agents waits by default for every
// agent to register with the controller.
const agentsWait = 30 * time.Second

// checkAgentsController makes sure, before anything is built, that the
// agents of testbed name will be able to reach the controller: a URL the
// node namespaces can reach (not this host's loopback, which inside a node
// is the node's own), a controller that answers there, and a token of
// role agent. It returns a client for the host to follow registration with.
func checkAgentsController(ctx context.Context, name, controller, tokenFile string) (*client.Client, error) {
	sock := "unix:" + filepath.Join(testbed.Dir(name), "controller.sock")
	if u, err := url.Parse(controller); err == nil && (u.Scheme == "http" || u.Scheme == "https") && isLoopback(u.Hostname()) {
		return nil, fmt.Errorf("--controller %s: the agents run inside the node namespaces, where %s is the node's own loopback: "+
			"give the controller a unix socket the nodes reach as a file (lightpath controller ... --listen %s) and pass --controller %s",
			controller, u.Hostname(), sock, sock)
	}
	if _, err := os.Stat(tokenFile); err != nil {
		return nil, fmt.Errorf("--controller-token-file: %w", unwrapPath(err))
	}
	c, err := (&ctlFlags{url: controller, tokenFile: tokenFile, timeout: 10 * time.Second}).client()
	if err != nil {
		return nil, err
	}
	who, err := c.Whoami(ctx)
	if err != nil {
		hint := ""
		if strings.HasPrefix(controller, "unix:") {
			hint = fmt.Sprintf(" (start the controller first, with --listen %s)", controller)
		}
		return nil, fmt.Errorf("--controller %s: %s%s", controller, textsafe.OneLine(err.Error()), hint)
	}
	if who.Role != "agent" && who.Role != "admin" {
		return nil, fmt.Errorf("--controller-token-file: a token of %s (role %s): agents need a token of role agent "+
			"(lightpath user add agents --role agent; lightpath user token create agents --out agent.token)", who.User, who.Role)
	}
	return c, nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// startedAgent is an agent testbed up --agents started: its node, and
// exited, closed with the process's end (the agent replaces the testbed
// exec that started it, so the process is the agent).
type startedAgent struct {
	node   string
	exited chan error
}

// startAgents starts one agent per node of testbed name, each inside its
// node's namespace and in a session of its own, so it outlives the
// command that started it; testbed down stops them with every other
// process in the namespaces.
func startAgents(name, controller, tokenFile string) ([]startedAgent, error) {
	tokenFile, err := filepath.Abs(tokenFile)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this program: %w", err)
	}
	_, topo, err := testbed.Open(name)
	if err != nil {
		return nil, err
	}
	var started []startedAgent
	for _, n := range topo.Nodes {
		log, err := os.OpenFile(testbed.AgentLogPath(name, n.Name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return started, fmt.Errorf("agent of %s: %w", n.Name, err)
		}
		cmd := exec.Command(self, "testbed", "exec", "--name", name, n.Name, "--",
			self, "agent", "--node", n.Name, "--controller", controller, "--controller-token-file", tokenFile,
			"--testbed", name, "--spool", testbed.SpoolDir(name, n.Name))
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = cmd.Start()
		log.Close()
		if err != nil {
			return started, fmt.Errorf("start the agent of %s: %w", n.Name, err)
		}
		a := startedAgent{node: n.Name, exited: make(chan error, 1)}
		go func() { a.exited <- cmd.Wait() }()
		started = append(started, a)
	}
	return started, nil
}

// waitAgents waits until every agent started has registered with the
// controller (a heartbeat of its node since since, as GET /api/v1/agents
// shows it), for at most wait. Its error names the nodes whose agents did
// not, each with why: the agent exited, or the last line of its log (the
// dial or token error it keeps retrying).
func waitAgents(ctx context.Context, c *client.Client, name string, agents []startedAgent, since time.Time, wait time.Duration) error {
	// A heartbeat renews the lease to its time plus the lease: one that
	// ends later than since plus the lease was sent after since. The API
	// may show whole seconds.
	after := since.Truncate(time.Second).Add(agent.DefaultLease)
	pending := map[string]bool{}
	for _, a := range agents {
		pending[a.node] = true
	}
	gone := map[string]string{}
	deadline := time.Now().Add(wait)
	var lastErr error
	for {
		for _, a := range agents {
			select {
			case err := <-a.exited:
				why := "exited"
				if err != nil {
					why = "exited (" + err.Error() + ")"
				}
				gone[a.node] = why
			default:
			}
		}
		if list, err := c.Agents(ctx); err == nil {
			lastErr = nil
			for _, ag := range list {
				if pending[ag.Node] && ag.Alive && !ag.LeaseExpires.Before(after) {
					delete(pending, ag.Node)
				}
			}
		} else {
			lastErr = err
		}
		if len(pending) == 0 {
			return nil
		}
		allGone := true
		for n := range pending {
			if _, ok := gone[n]; !ok {
				allGone = false
			}
		}
		if allGone || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	var nodes []string
	for n := range pending {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	var whys []string
	for _, n := range nodes {
		why := "not registered"
		if g := gone[n]; g != "" {
			why += ", " + g
		}
		if l := lastLogLine(testbed.AgentLogPath(name, n)); l != "" {
			why += ": " + l
		}
		whys = append(whys, n+" "+why)
	}
	msg := fmt.Sprintf("the agents of %d of %d nodes did not register with the controller within %s: %s (logs: %s)",
		len(nodes), len(agents), wait, strings.Join(whys, "; "), testbed.AgentLogPath(name, "NODE"))
	if lastErr != nil {
		msg += "; the controller did not answer: " + textsafe.OneLine(lastErr.Error())
	}
	return errors.New(msg)
}

// lastLogLine is the last non-empty line of a log, made safe to print:
// of a structured line (the agent logs with slog), its error alone.
func lastLogLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	line := lines[len(lines)-1]
	if i := strings.Index(line, " err="); i >= 0 {
		v := line[i+len(" err="):]
		if s, err := strconv.QuotedPrefix(v); err == nil {
			v, _ = strconv.Unquote(s)
		} else if j := strings.IndexByte(v, ' '); j >= 0 {
			v = v[:j]
		}
		line = v
	}
	return textsafe.Sanitize(textsafe.OneLine(line))
}
