package mover

import "golang.org/x/sys/unix"

// directFlag is the open flag that reads a file around the page cache,
// straight from the disk (O_DIRECT).
func directFlag() (int, error) { return unix.O_DIRECT, nil }
