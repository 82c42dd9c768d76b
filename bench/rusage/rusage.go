// Package rusage reads what the benchmark programs report of their own
// process: CPU time used and peak resident memory (getrusage(2)).
package rusage

import (
	"syscall"
	"time"
)

// CPU is the user and system CPU time the process has used.
func CPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// MaxRSS is the process's peak resident set size in bytes.
func MaxRSS() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Maxrss << 10
}
