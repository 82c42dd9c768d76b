// Package testbed builds emulated wide-area sites on one Linux host: a
// network namespace per node, TUN devices for the two ends of each link,
// an htb tree on every egress device for the link's rate, and a user-space
// emulator daemon (package emu) for delay, jitter and loss.
//
// The model it builds from (a parsed and resolved topology file, its
// addresses, routes and htb numbering) is package topology's; this package
// plans the kernel objects for it (plan.go, pure) and applies them, keeps
// the state of running testbeds under RunDir, and talks to the emulator.
// The kernel side lives in the _linux.go files.
package testbed
