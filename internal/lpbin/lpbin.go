// Package lpbin builds the lightpath binary for tests that run it as a user
// would (test/e2e, test/docs): one build per test binary, in a directory of
// its own.
package lpbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Build compiles cmd/lightpath into a new temporary directory named after
// prefix (mode 0755, so that a test may run the binary as another user)
// and returns the directory and the binary's path. The caller removes dir.
func Build(prefix string) (dir, bin string, err error) {
	dir, err = os.MkdirTemp("", prefix)
	if err != nil {
		return "", "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return "", "", err
	}
	bin = filepath.Join(dir, "lightpath")
	build := exec.Command("go", "build", "-o", bin, "github.com/lightpath/lightpath/cmd/lightpath")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("build lightpath: %w", err)
	}
	return dir, bin, nil
}
