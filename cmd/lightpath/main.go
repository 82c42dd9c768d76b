// Command lightpath moves scientific datasets between sites at the speed of
// the network. Each role is a subcommand; this file only wires them.
package main

import (
	"os"

	"github.com/lightpath/lightpath/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
