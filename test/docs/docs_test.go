//go:build linux

package docs

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lightpath/lightpath/internal/cc/cctest"
	"github.com/lightpath/lightpath/internal/lpbin"
	"github.com/lightpath/lightpath/internal/roottest"
)

// lpBin is the lightpath binary built once for the package, in binDir.
var lpBin, binDir string

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	built, err := lpbin.Build("lightpath-docs-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "docs: %v\n", err)
		return 1
	}
	defer built.RemoveAll()
	if err := built.Setenv(); err != nil {
		fmt.Fprintf(os.Stderr, "docs: %v\n", err)
		return 1
	}
	binDir, lpBin = built.Dir, built.Bin
	code := m.Run()
	if reports, err := built.Reports(); err != nil || reports != "" {
		fmt.Fprintf(os.Stderr, "docs: the lightpath processes the examples ran found data races (%v):\n%s", err, reports)
		code = 1
	}
	return code
}

// pageTimeout bounds one page's examples.
const pageTimeout = 3 * time.Minute

// repoRoot is the top of the repository, where a reader runs the examples.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// pages lists the documentation: README.md and docs/*.md.
func pages(t *testing.T) []string {
	t.Helper()
	root := repoRoot(t)
	ps, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(ps)
	return append([]string{filepath.Join(root, "README.md")}, ps...)
}

// TestDocsExamples runs every page's runnable examples (doc.go says which
// those are) as one script per page, pages one after another.
func TestDocsExamples(t *testing.T) {
	roottest.Require(t, "the examples bring up testbeds (namespaces, devices)")
	// What the examples use besides lightpath (scripts/deps.sh installs them).
	for _, tool := range []string{"bash", "jq", "curl", "ip", "tc", "ss", "ping"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the examples need %s, which is not installed (make deps installs it)", tool)
		}
	}
	root := repoRoot(t)
	for _, path := range pages(t) {
		rel, _ := filepath.Rel(root, path)
		blocks, err := extract(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(blocks) == 0 {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(path), ".md")
		t.Run(name, func(t *testing.T) { runPage(t, root, rel, blocks) })
	}
}

// runPage runs one page's script and reports where it failed.
func runPage(t *testing.T, root, rel string, blocks []block) {
	// The examples listen on the ports a reader would use.
	for _, addr := range []string{"127.0.0.1:8080", "127.0.0.1:7070"} {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Fatalf("%s: another process listens on %s, which the examples use: stop it and run again", rel, addr)
		}
	}
	if strings.Contains(script(blocks), "lightpath cc ") {
		// The page installs or removes a congestion control, which is
		// global to the host: one such test at a time, the host put back.
		cctest.Lock(t, "fast")
	}
	tmp := t.TempDir()
	at := filepath.Join(tmp, "at")
	scriptPath := filepath.Join(tmp, "page.sh")
	text := script(blocks)
	if err := os.WriteFile(scriptPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(tmp, "tmp")
	if err := os.Mkdir(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(tmp, "output"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()

	testbedsBefore := entries("/run/lightpath")
	rootBefore, docsBefore := entries(root), entries(filepath.Join(root, "docs"))
	ctx, cancel := context.WithTimeout(context.Background(), pageTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", scriptPath)
	cmd.Dir = root
	cmd.Env = append(cleanEnv(), "PATH="+binDir+":"+os.Getenv("PATH"), "TMPDIR="+scratch, "LPDOC_AT="+at)
	// A file, not a pipe: a background process of the page that holds the
	// output open must not keep Wait waiting.
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	runErr := cmd.Run()
	if cmd.Process != nil {
		// Whatever the page left running in its process group.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	t.Logf("%s: %d runnable blocks in %.1f s", rel, len(blocks), time.Since(start).Seconds())
	if testing.Verbose() {
		b, _ := os.ReadFile(filepath.Join(tmp, "output"))
		t.Logf("%s: the output:\n%s", rel, b)
	}

	// Testbeds the page brought up and left: taken down, and a failure.
	// Only those the page names (other tests may bring up testbeds of their
	// own meanwhile, which are theirs to take down).
	for name := range entries("/run/lightpath") {
		if testbedsBefore[name] || !namesTestbed(text, name) {
			continue
		}
		if runErr == nil {
			t.Errorf("%s: the examples left testbed %s up: end the page with lightpath testbed down", rel, name)
		}
		if o, err := exec.Command(lpBin, "testbed", "down", "--name", name).CombinedOutput(); err != nil {
			t.Errorf("testbed down --name %s: %v\n%s", name, err, o)
		}
	}
	// A page writes in its scratch directory, never in the repository.
	for dir, before := range map[string]map[string]bool{root: rootBefore, filepath.Join(root, "docs"): docsBefore} {
		for name := range entries(dir) {
			if !before[name] {
				t.Errorf("%s: the examples left %s in %s: a page works in a directory of its own (mktemp -d)", rel, name, dir)
			}
		}
	}
	if runErr == nil {
		return
	}
	line := "?"
	if b, err := os.ReadFile(at); err == nil {
		line = strings.TrimSpace(string(b))
	}
	why := runErr.Error()
	if ctx.Err() != nil {
		why = fmt.Sprintf("did not finish within %s", pageTimeout)
	}
	t.Errorf("%s:%s: the example failed (%s); the last lines of the page's output:\n%s", rel, line, why, tail(filepath.Join(tmp, "output"), 40))
}

// namesTestbed says whether a page's script names testbed name: by --name
// or by a topology file of that base name.
func namesTestbed(script, name string) bool {
	q := regexp.QuoteMeta(name)
	return regexp.MustCompile(`--name[ =]` + q + `([^A-Za-z0-9-]|$)|/` + q + `\.yaml`).MatchString(script)
}

// entries names what dir holds (nothing if it does not exist).
func entries(dir string) map[string]bool {
	es, _ := os.ReadDir(dir)
	m := make(map[string]bool, len(es))
	for _, e := range es {
		m[e.Name()] = true
	}
	return m
}

// cleanEnv is the test's environment without any LIGHTPATH_ variable, as
// on a fresh host, but the emulator's binary (lpbin.Setenv).
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, lpbin.EmulatorEnv+"=") ||
			!strings.HasPrefix(kv, "LIGHTPATH_") && !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "TMPDIR=") {
			env = append(env, kv)
		}
	}
	return env
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// A block is one runnable fenced block of a page.
type block struct {
	line    int // of the opening fence
	console bool
	body    string    // an sh block's text
	cmds    []command // a console block's commands
}

// A command is one prompt line of a console block, with its continuations.
type command struct {
	line     int
	text     string
	mustFail bool // its output shows an error line
}

// extract reads a page's runnable blocks.
func extract(path string) ([]block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		blocks []block
		cur    *block
		fence  string
		n      int
		cont   bool // the previous command line ended with a backslash
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence == "" {
			if strings.HasPrefix(trimmed, "```") {
				fence = trimmed[:len(trimmed)-len(strings.TrimLeft(trimmed, "`"))]
				switch strings.TrimSpace(strings.TrimPrefix(trimmed, fence)) {
				case "sh":
					cur = &block{line: n}
				case "console":
					cur = &block{line: n, console: true}
				}
			}
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.TrimSpace(strings.TrimLeft(trimmed, "`")) == "" {
			if cur != nil {
				blocks = append(blocks, *cur)
			}
			cur, fence, cont = nil, "", false
			continue
		}
		switch {
		case cur == nil:
		case !cur.console:
			cur.body += line + "\n"
		case cont:
			c := &cur.cmds[len(cur.cmds)-1]
			c.text += "\n" + line
			cont = strings.HasSuffix(line, "\\")
		case strings.HasPrefix(line, "$ ") || strings.HasPrefix(line, "# "):
			cur.cmds = append(cur.cmds, command{line: n, text: line[2:]})
			cont = strings.HasSuffix(line, "\\")
		case strings.HasPrefix(line, "lightpath: ") && len(cur.cmds) > 0:
			cur.cmds[len(cur.cmds)-1].mustFail = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if fence != "" {
		return nil, fmt.Errorf("%s: a fenced block is not closed", path)
	}
	return blocks, nil
}

// script is a page's runnable blocks as one bash script. Before each block
// (and each console command) it records the page's line in $LPDOC_AT, so a
// failure names where it happened.
func script(blocks []block) string {
	var b strings.Builder
	b.WriteString("set -euo pipefail\n__lpdoc() { printf '%s\\n' \"$1\" >\"$LPDOC_AT\"; }\n")
	for _, bl := range blocks {
		if !bl.console {
			fmt.Fprintf(&b, "__lpdoc %d\n%s", bl.line, bl.body)
			continue
		}
		for _, c := range bl.cmds {
			fmt.Fprintf(&b, "__lpdoc %d\n", c.line)
			if !c.mustFail {
				b.WriteString(c.text + "\n")
				continue
			}
			fmt.Fprintf(&b, "if { %s\n}; then echo \"line %d: the page shows this command failing, but it succeeded\" >&2; false; fi\n", c.text, c.line)
		}
	}
	return b.String()
}

// TestExtract checks the convention on a page of each kind of block.
func TestExtract(t *testing.T) {
	page := "# A page\n\n```\nlightpath serve --listen HOST:PORT\n```\n\n" +
		"```sh\ndir=$(mktemp -d)\ncd \"$dir\"\n```\n\n" +
		"```console\n$ lightpath user add alice \\\n    --role user\nadded alice\n" +
		"$ lightpath reserve show nope\nlightpath: reserve show: not found\n# lightpath testbed status\n```\n\n" +
		"```text\n$ not run\n```\n"
	path := filepath.Join(t.TempDir(), "p.md")
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	blocks, err := extract(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 {
		t.Fatalf("got %d runnable blocks, want 2: %+v", len(blocks), blocks)
	}
	if blocks[0].line != 7 || blocks[0].console || blocks[0].body != "dir=$(mktemp -d)\ncd \"$dir\"\n" {
		t.Errorf("sh block: %+v", blocks[0])
	}
	want := []command{
		{line: 13, text: "lightpath user add alice \\\n    --role user"},
		{line: 16, text: "lightpath reserve show nope", mustFail: true},
		{line: 18, text: "lightpath testbed status"},
	}
	if got := blocks[1].cmds; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("console commands:\n got %+v\nwant %+v", got, want)
	}
	s := script(blocks)
	for _, frag := range []string{"set -euo pipefail", "__lpdoc 7\n", "__lpdoc 16\nif { lightpath reserve show nope\n}; then", "lightpath testbed status\n"} {
		if !strings.Contains(s, frag) {
			t.Errorf("script lacks %q:\n%s", frag, s)
		}
	}
	for _, tc := range []struct {
		script, name string
		want         bool
	}{
		{"lightpath testbed up examples/two-site.yaml", "two-site", true},
		{"lightpath testbed exec --name ring a1 -- true", "ring", true},
		{"lightpath testbed up examples/two-site.yaml", "e2ffbc8", false}, // another test's
		{"lightpath testbed down --name lp2", "lp", false},
	} {
		if got := namesTestbed(tc.script, tc.name); got != tc.want {
			t.Errorf("namesTestbed(%q, %q) = %v, want %v", tc.script, tc.name, got, tc.want)
		}
	}
	// The script runs: the failing command is expected to fail.
	bash := exec.Command("bash", "-c", script([]block{{console: true, cmds: []command{{line: 1, text: "false", mustFail: true}, {line: 2, text: "echo ok"}}}}))
	bash.Env = append(os.Environ(), "LPDOC_AT="+filepath.Join(t.TempDir(), "at"))
	if out, err := bash.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Errorf("expected failure: %v %q", err, out)
	}
	bash = exec.Command("bash", "-c", script([]block{{console: true, cmds: []command{{line: 1, text: "true", mustFail: true}}}}))
	bash.Env = append(os.Environ(), "LPDOC_AT="+filepath.Join(t.TempDir(), "at"))
	if out, err := bash.CombinedOutput(); err == nil || !strings.Contains(string(out), "line 1: the page shows this command failing") {
		t.Errorf("a command shown failing that succeeds must fail the script: %v %q", err, out)
	}
}
