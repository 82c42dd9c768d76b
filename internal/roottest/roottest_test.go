package roottest

import (
	"os"
	"testing"
)

// TestRequire checks the gate against the real euid: as root the test goes
// on, otherwise it is skipped (and never reaches the failure below).
func TestRequire(t *testing.T) {
	ran := false
	t.Run("gated", func(t *testing.T) {
		Require(t, "checks the gate")
		ran = true
	})
	if ran != (os.Geteuid() == 0) {
		t.Fatalf("gate let the test run = %v, euid %d", ran, os.Geteuid())
	}
}
