// Package e2e runs the real lightpath binary end to end, as a user would:
// a server on loopback with a scratch root, cp and bench against it, and the
// faults a data mover meets in the field injected around them (servers
// killed mid-transfer, bytes damaged in flight, full disks, clients that stop
// reading, hostile peers). The tests only use loopback; those that need root
// (mounts, other users) skip with a reason elsewhere.
package e2e
