package reserve

import (
	"errors"
	"fmt"
)

// ErrNoTopology is a request that needs a topology when none was given.
// It is the controller's and the transfer service's alike, so the API
// maps both the same way (a conflict: it may succeed once one is loaded).
var ErrNoTopology = fmt.Errorf("%w: the controller has no topology yet: start it with --topology FILE or PUT /api/v1/topology", ErrConflict)

// ErrLimit is a request refused because a per-user limit is reached
// (429): it may succeed once the user has less.
var ErrLimit = errors.New("limit reached")

// LimitError says which limit a request would pass, its value and the
// flag or policy field that sets it. The controller's limits and the
// transfer service's job limits both refuse with it.
type LimitError struct {
	Limit   string // e.g. "max-tokens-per-user"
	Max     int
	Message string
}

func (e *LimitError) Error() string { return e.Message }

// Unwrap makes a LimitError match ErrLimit.
func (e *LimitError) Unwrap() error { return ErrLimit }
