// Package cc brings congestion controls the kernel does not ship into it as
// BPF programs (struct_ops tcp_congestion_ops), so that any TCP socket on the
// host can choose them by name: today FAST TCP, as `fast`.
//
// Install loads the compiled program (fast_bpfel.o, built from bpf/fast.c by
// `make bpf`; a plain go build needs no clang), registers it through a BPF
// link pinned under /sys/fs/bpf/lightpath so that the registration outlives
// the command, and adds its name to net.ipv4.tcp_allowed_congestion_control.
// Remove undoes all of it. The window equation is in package fast as well
// as in the BPF program, in the same integer arithmetic, so that it can be
// table tested, used by user-space transports, and each of the program's
// decisions (Trace) checked against it.
package cc

import (
	"path/filepath"

	"github.com/lightpath/lightpath/internal/cc/fast"
)

// Names lists the congestion controls this package can install.
var Names = []string{"fast"}

// PinDir is where the registrations and their maps are pinned.
const PinDir = "/sys/fs/bpf/lightpath"

// LinkPin is the path of the pinned BPF link that keeps name registered.
func LinkPin(name string) string { return filepath.Join(PinDir, "cc-"+name) }

// ParamsPin and TracePin are the pinned parameter and trace maps of name
// (the BPF file system refuses names with a dot).
func ParamsPin(name string) string { return LinkPin(name) + "-params" }
func TracePin(name string) string  { return LinkPin(name) + "-trace" }

// Action is what Install did.
type Action string

const (
	Installed Action = "installed" // registered afresh
	Retuned   Action = "retuned"   // its parameters set in place
	Replaced  Action = "replaced"  // another build's program, or a broken pin, replaced
	Allowed   Action = "allowed"   // only put back in the allowed list
	Unchanged Action = "unchanged" // already so
)

// Loaded is a congestion control the kernel offers.
type Loaded struct {
	Name    string       `json:"name"`
	Source  string       `json:"source"`  // "kernel" (built in) or "lightpath" (BPF, pinned)
	Allowed bool         `json:"allowed"` // in net.ipv4.tcp_allowed_congestion_control
	Default bool         `json:"default"` // net.ipv4.tcp_congestion_control of this namespace
	Params  *fast.Params `json:"params,omitempty"`
	Pinned  string       `json:"pinned,omitempty"`
}
