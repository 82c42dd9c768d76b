// Package retry is the one classification of errors by whether doing the
// same thing again can mend them. An error says so by implementing
// Classifier (the client's unreachable and 5xx errors do) or by being
// wrapped with Transient or Permanent (the mover's authentication and
// refusal sentinels, a metrics batch the controller rejected). Callers ask
// with IsTransient or IsPermanent, which look through wrapping with
// errors.As; the first classifier in the chain decides.
//
// The two questions differ for unclassified errors: a caller that retries
// only what is known to be transient (a request to the controller) asks
// IsTransient; one that retries everything but what is known to be
// permanent (a copy, a spooled batch) asks IsPermanent.
package retry

import "errors"

// Class is what a retry can do for an error.
type Class int

const (
	// Unknown: the error does not say.
	Unknown Class = iota
	// TransientClass: the same request may succeed later (the peer was
	// unreachable or overloaded).
	TransientClass
	// PermanentClass: the same request fails again however often it is
	// sent (refused, unauthenticated, malformed).
	PermanentClass
)

// Classifier is implemented by errors that know their class.
type Classifier interface {
	RetryClass() Class
}

// Of returns the class of the first classifier in err's chain, or Unknown.
func Of(err error) Class {
	var c Classifier
	if errors.As(err, &c) {
		return c.RetryClass()
	}
	return Unknown
}

// IsTransient reports whether err is known to be worth retrying.
func IsTransient(err error) bool { return Of(err) == TransientClass }

// IsPermanent reports whether err is known not to be mended by a retry.
func IsPermanent(err error) bool { return Of(err) == PermanentClass }

// Transient marks err as worth retrying; nil stays nil. The message is
// err's.
func Transient(err error) error { return mark(err, TransientClass) }

// Permanent marks err as one a retry cannot mend; nil stays nil. The
// message is err's.
func Permanent(err error) error { return mark(err, PermanentClass) }

func mark(err error, c Class) error {
	if err == nil {
		return nil
	}
	return &marked{err: err, class: c}
}

type marked struct {
	err   error
	class Class
}

func (m *marked) Error() string     { return m.err.Error() }
func (m *marked) Unwrap() error     { return m.err }
func (m *marked) RetryClass() Class { return m.class }
