package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is the build's version, set by the Makefile from git describe
// (-ldflags "-X github.com/lightpath/lightpath/internal/cli.version=...").
var version string

// Version is the program's version: the one the build was given, else
// what the Go toolchain recorded of the module or its commit, else
// "devel". The controller reports it in GET /api/v1/health.
var Version = buildVersion()

func buildVersion() string {
	if version != "" {
		return version
	}
	return fromBuildInfo(debug.ReadBuildInfo())
}

// fromBuildInfo reads a version from what the toolchain recorded: the
// module's version when it was built from a tagged module (go install
// ...@v1.2.3), else the commit it was built from (with "-dirty" when the
// tree had changes), else "devel".
func fromBuildInfo(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := "devel-" + rev
	if modified == "true" {
		v += "-dirty"
	}
	return v
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this build",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "lightpath %s\n", Version)
			return nil
		},
	}
}
