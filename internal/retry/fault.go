package retry

// Faults: what kind of failure an error is, which the transfer service
// decides its retries by (issue 29): a file that is not there, a refusal
// of the filesystem, a full destination, a grant refused for a stale
// attempt, the network, a checksum that did not match, or anything else.
// The fault is found where the error is made, from its type (errors.Is
// and errors.As on the standard library's errors, and the marks callers
// put on theirs with WithFault), never from its words.

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"syscall"
)

// Fault is the class of a failure, as the transfer service's API spells
// it.
type Fault string

// The faults.
const (
	// FaultNotFound: the file (or a directory of its path) is not there.
	FaultNotFound Fault = "not-found"
	// FaultPermission: the filesystem, the server or the grant's scope
	// refused it (a read-only destination, a path outside what may be
	// written, a destination in the way).
	FaultPermission Fault = "permission"
	// FaultNoSpace: the destination has no room for it (or a quota, or
	// a size limit, says so).
	FaultNoSpace Fault = "no-space"
	// FaultGrant: the destination refused the session's grant as stale
	// (its attempt is over or fenced, or the grant expired): the attempt
	// is the controller's to redo, the file did nothing wrong.
	FaultGrant Fault = "refused-by-grant"
	// FaultNetwork: a connection broke, timed out or was refused, or the
	// peer was busy: the same thing may work later.
	FaultNetwork Fault = "network"
	// FaultChecksum: what arrived does not match what was sent.
	FaultChecksum Fault = "checksum"
	// FaultInternal: anything else.
	FaultInternal Fault = "internal"
)

// Faults are every fault, in the order above.
var Faults = []Fault{FaultNotFound, FaultPermission, FaultNoSpace, FaultGrant, FaultNetwork, FaultChecksum, FaultInternal}

// ParseFault reads a fault as the API spells it; anything else (an older
// data node's missing one, or one this code does not know) is internal.
func ParseFault(s string) Fault {
	for _, f := range Faults {
		if string(f) == s {
			return f
		}
	}
	return FaultInternal
}

// Faulter is implemented by errors that know their fault.
type Faulter interface {
	Fault() Fault
}

// WithFault marks err with fault f; nil stays nil. The message is err's,
// and the retry class err's own (a mark says what failed, not whether to
// try again).
func WithFault(err error, f Fault) error {
	if err == nil {
		return nil
	}
	return &faulted{err: err, fault: f}
}

type faulted struct {
	err   error
	fault Fault
}

func (e *faulted) Error() string { return e.err.Error() }
func (e *faulted) Unwrap() error { return e.err }
func (e *faulted) Fault() Fault  { return e.fault }

// FaultOf is err's fault: the first mark in its chain (WithFault, or an
// error type that implements Faulter); else the system's word (no space
// or quota, a read-only filesystem or a refused permission, a missing
// file); else the network (a net.Error, a reset or refused connection, a
// peer gone mid-message, or an error this package calls transient);
// else internal. nil has none ("").
func FaultOf(err error) Fault {
	if err == nil {
		return ""
	}
	var f Faulter
	switch {
	case errors.As(err, &f):
		return f.Fault()
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EFBIG):
		return FaultNoSpace
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return FaultPermission
	case errors.Is(err, fs.ErrNotExist):
		return FaultNotFound
	case isNetwork(err):
		return FaultNetwork
	}
	return FaultInternal
}

// isNetwork reports whether err comes from a connection rather than from
// what travelled on it.
func isNetwork(err error) bool {
	var ne net.Error
	switch {
	case errors.As(err, &ne), IsTransient(err):
		return true
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH), errors.Is(err, net.ErrClosed), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, context.DeadlineExceeded):
		return true
	}
	return false
}
