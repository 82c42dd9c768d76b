// Package docs runs the examples of the user documentation (docs/*.md and
// README.md) through the real binary, so that every example runs as written
// on a fresh host.
//
// The convention, for whoever writes a page:
//
//   - A fenced block with the info string "sh" is a script: every line runs.
//   - A fenced block with the info string "console" is a terminal session:
//     the lines starting with "$ " (or "# ", a root prompt) are commands,
//     with the lines after a trailing backslash belonging to them; every
//     other line is output, shown to the reader and not compared. A command
//     whose output has a line starting with "lightpath: " (an error line) is
//     expected to fail: the test checks that it exits non-zero.
//   - Every other block (no info string, "text", "yaml", "json", ...) is
//     not run: usage synopses, sample output, benchmarks' results, and the
//     examples that need the internet or hardware this host does not have
//     (the page says why).
//
// The runnable blocks of one page, in order, form one bash script run with
// "set -euo pipefail" from the top of the repository, with the freshly built
// lightpath first on PATH and TMPDIR pointing at a directory of the test's.
// A page writes only in a directory of its own (its first block makes one
// with mktemp -d, copies examples/ into it and changes into it) and ends what
// it starts: background processes are
// killed by the page, testbeds are taken down by the page. Pages run one
// after another; the test kills the script's process group at the end and
// takes down (and reports) any testbed a page left up.
package docs
