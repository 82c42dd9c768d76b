package mover

// The class of a failure (retry.Fault), found where the error is made and
// carried across the wire as a code (wire.Fault before a file's failing
// verdict, wire.Error.Fault on a refused request) from protocol version
// wire.VersionFault on, so that the transfer service decides its retries
// by it and never by the words of a reason.

import (
	"errors"

	"github.com/lightpath/lightpath/internal/retry"
	"github.com/lightpath/lightpath/internal/transfer/grant"
	"github.com/lightpath/lightpath/internal/wire"
)

// FaultOf is err's class: the grant's refusals as the mover meets them
// (a stale attempt: fenced, over or expired, is the grant's; a grant that
// does not cover the path or mode, is another node's, or is not the
// controller's is a refused permission), then retry.FaultOf (the marks
// the mover puts on its own errors, the system's errors, the network).
func FaultOf(err error) retry.Fault {
	if err == nil {
		return ""
	}
	var f retry.Faulter
	switch {
	case errors.As(err, &f):
		return f.Fault()
	case errors.Is(err, grant.ErrStale), errors.Is(err, grant.ErrOver), errors.Is(err, grant.ErrExpired):
		return retry.FaultGrant
	case errors.Is(err, ErrAuth):
		return retry.FaultPermission
	case errors.Is(err, grant.ErrNoKey):
		return retry.FaultNetwork // the key comes with the server's next heartbeat
	case errors.Is(err, grant.ErrPath), errors.Is(err, grant.ErrMode), errors.Is(err, grant.ErrWrongNode),
		errors.Is(err, grant.ErrSignature), errors.Is(err, grant.ErrMalformed):
		return retry.FaultPermission
	}
	return retry.FaultOf(err)
}

// faultOrInternal is f, or internal where nothing said.
func faultOrInternal(f retry.Fault) retry.Fault {
	if f == "" {
		return retry.FaultInternal
	}
	return f
}

// sendFault queues the class of file id's failure before its verdict, to
// a peer that reads it.
func (l *link) sendFault(id uint32, f retry.Fault) {
	if l.ctrl.version < wire.VersionFault {
		return
	}
	l.ctrl.queue(&wire.Fault{ID: id, Code: wire.FaultCode(faultOrInternal(f))})
}

// classed is err marked with class f (its message and retry class its
// own): the mover's errors that no type says the class of.
func classed(f retry.Fault, err error) error { return retry.WithFault(err, f) }
