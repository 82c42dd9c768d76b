// Command testreport reads `go test -json` on stdin and prints what a
// person needs from a long run: a line per package as it ends, the whole
// output of every test that failed (and of a package that failed outside
// its tests: a panic, a timeout, a build error, TestMain's own checks),
// then the failures again in one list, the slowest tests and each
// package's time, so that growth is seen. It exits 1 when anything failed.
//
//	go test -json ./... | go run ./scripts/testreport [-slowest N]
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Time        time.Time
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string // build-output, build-fail
	FailedBuild string
}

type key struct{ pkg, test string }

type result struct {
	key
	action  string
	elapsed float64
}

type report struct {
	w        io.Writer
	out      map[string][]line // per package: its output so far, in order
	open     map[key]bool      // tests started and not ended
	build    map[string]*strings.Builder
	tests    []result // top-level tests that ended
	packages []result
	failed   []result // tests and packages that failed
	skipped  map[string]int
	builds   []string // packages whose build failed
}

func newReport(w io.Writer) *report {
	return &report{w: w, out: map[string][]line{}, open: map[key]bool{},
		build: map[string]*strings.Builder{}, skipped: map[string]int{}}
}

// line is one output line and the test ("" for the package) it belongs to.
type line struct{ test, text string }

// of says whether the line belongs to test or one of its subtests.
func (l line) of(test string) bool {
	return l.test == test || test != "" && strings.HasPrefix(l.test, test+"/")
}

func (r *report) add(e event) {
	switch e.Action {
	case "build-output":
		b := r.build[e.ImportPath]
		if b == nil {
			b = &strings.Builder{}
			r.build[e.ImportPath] = b
		}
		b.WriteString(e.Output)
		return
	case "build-fail":
		r.builds = append(r.builds, e.ImportPath)
		fmt.Fprintf(r.w, "BUILD FAILED %s\n%s", e.ImportPath, r.build[e.ImportPath])
		return
	}
	k := key{e.Package, e.Test}
	switch e.Action {
	case "run":
		r.open[k] = true
	case "output":
		r.out[k.pkg] = append(r.out[k.pkg], line{k.test, e.Output})
	case "pass", "fail", "skip":
		delete(r.open, k)
		res := result{key: k, action: e.Action, elapsed: e.Elapsed}
		if e.Test == "" {
			r.endPackage(res)
			return
		}
		if !strings.Contains(e.Test, "/") {
			r.tests = append(r.tests, res)
		}
		switch e.Action {
		case "skip":
			r.skipped[e.Package]++
		case "fail":
			r.failed = append(r.failed, res)
			// A subtest's lines are printed with its top-level test's,
			// which fails with it.
			if !strings.Contains(e.Test, "/") {
				fmt.Fprintf(r.w, "--- FAIL %s %s (%.2fs)\n%s", e.Package, e.Test, e.Elapsed, indent(r.testOutput(k)))
			}
		}
		// A subtest's lines are kept until its top-level test ends.
		if !strings.Contains(e.Test, "/") {
			r.dropTest(k)
		}
	}
}

// testOutput is a test's own output and its subtests', in order.
func (r *report) testOutput(k key) string {
	var s strings.Builder
	for _, l := range r.out[k.pkg] {
		if l.of(k.test) {
			s.WriteString(l.text)
		}
	}
	return s.String()
}

func (r *report) dropTest(k key) {
	kept := r.out[k.pkg][:0]
	for _, l := range r.out[k.pkg] {
		if !l.of(k.test) {
			kept = append(kept, l)
		}
	}
	r.out[k.pkg] = kept
}

func (r *report) endPackage(res result) {
	r.packages = append(r.packages, res)
	extra := ""
	if n := r.skipped[res.pkg]; n > 0 {
		extra = fmt.Sprintf(" (%d skipped)", n)
	}
	switch res.action {
	case "fail":
		r.failed = append(r.failed, res)
		fmt.Fprintf(r.w, "FAIL %s %.1fs%s\n", res.pkg, res.elapsed, extra)
		// What the package printed outside its tests (TestMain, a panic,
		// the timeout's dump) and the tests still running when it died.
		if out := r.testOutput(key{res.pkg, ""}); strings.TrimSpace(out) != "" {
			fmt.Fprintf(r.w, "%s", indent(lastLines(out, 200)))
		}
		for k := range r.open {
			if k.pkg == res.pkg && !strings.Contains(k.test, "/") {
				r.failed = append(r.failed, result{key: k, action: "fail (unfinished)"})
				fmt.Fprintf(r.w, "--- UNFINISHED %s %s\n%s", k.pkg, k.test, indent(lastLines(r.testOutput(k), 200)))
			}
		}
	case "skip":
		fmt.Fprintf(r.w, "?    %s [no test files]\n", res.pkg)
	default:
		fmt.Fprintf(r.w, "ok   %s %.1fs%s\n", res.pkg, res.elapsed, extra)
	}
	delete(r.out, res.pkg)
	for k := range r.open {
		if k.pkg == res.pkg {
			delete(r.open, k)
		}
	}
}

func (r *report) summary(slowest int, wall time.Duration) bool {
	w := r.w
	ok := len(r.failed) == 0 && len(r.builds) == 0 && len(r.packages) > 0
	fmt.Fprintf(w, "\n== slowest %d tests\n", slowest)
	sort.SliceStable(r.tests, func(i, j int) bool { return r.tests[i].elapsed > r.tests[j].elapsed })
	for i, t := range r.tests {
		if i == slowest {
			break
		}
		fmt.Fprintf(w, "%8.1fs  %s %s\n", t.elapsed, short(t.pkg), t.test)
	}
	fmt.Fprintf(w, "\n== packages by time\n")
	sort.SliceStable(r.packages, func(i, j int) bool { return r.packages[i].elapsed > r.packages[j].elapsed })
	var sum float64
	for _, p := range r.packages {
		if p.action == "skip" {
			continue
		}
		sum += p.elapsed
		fmt.Fprintf(w, "%8.1fs  %s %s\n", p.elapsed, p.action, short(p.pkg))
	}
	fmt.Fprintf(w, "%8.1fs  in all packages; %s from the first event to the last\n", sum, wall.Round(time.Second))
	if !ok {
		fmt.Fprintf(w, "\n== FAILED\n")
		for _, b := range r.builds {
			fmt.Fprintf(w, "build  %s\n", b)
		}
		for _, f := range r.failed {
			fmt.Fprintf(w, "%s  %s %s\n", f.action, f.pkg, f.test)
		}
		if len(r.packages) == 0 && len(r.builds) == 0 {
			fmt.Fprintf(w, "no package reported a result\n")
		}
	}
	return ok
}

func short(pkg string) string {
	return strings.TrimPrefix(pkg, "github.com/lightpath/lightpath/")
}

func lastLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("[%d lines before]\n", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "")
}

func indent(s string) string {
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s
}

func main() {
	slowest := flag.Int("slowest", 20, "how many of the slowest tests to list")
	flag.Parse()
	r := newReport(os.Stdout)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var first, last time.Time
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// Not an event: the go command's own words (a vet or setup
			// failure). Pass them on.
			fmt.Printf("%s\n", line)
			continue
		}
		if !e.Time.IsZero() {
			if first.IsZero() {
				first = e.Time
			}
			last = e.Time
		}
		r.add(e)
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "testreport: read: %v\n", err)
		os.Exit(1)
	}
	if !r.summary(*slowest, last.Sub(first)) {
		os.Exit(1)
	}
}
