// Package roottest is the one root gate of the tests: a test that needs
// root (namespaces, devices, mounts, other users) calls Require first and is
// skipped, with the reason, when it does not run as root.
package roottest

import (
	"os"
	"testing"
)

// Require skips t unless the process runs as root (effective uid 0); why
// says what the test does that needs root, and is the skip's reason.
func Require(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: " + why)
	}
}
