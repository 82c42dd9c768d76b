package retry

import (
	"errors"
	"fmt"
	"testing"
)

type busy struct{}

func (busy) Error() string     { return "busy" }
func (busy) RetryClass() Class { return TransientClass }

func TestClassification(t *testing.T) {
	errAuth := Permanent(errors.New("authentication failed"))
	wrapped := fmt.Errorf("handshake with h:1: %w", errAuth)
	if !IsPermanent(wrapped) || IsTransient(wrapped) || !errors.Is(wrapped, errAuth) {
		t.Fatalf("a wrapped permanent sentinel: permanent %v transient %v", IsPermanent(wrapped), IsTransient(wrapped))
	}
	if wrapped.Error() != "handshake with h:1: authentication failed" {
		t.Fatalf("message %q", wrapped)
	}
	tr := fmt.Errorf("push: %w", busy{})
	if !IsTransient(tr) || IsPermanent(tr) {
		t.Fatal("a classifier type in the chain is not seen")
	}
	// The outermost classifier decides: a transient error marked permanent
	// by a caller that knows better is permanent.
	if p := Permanent(tr); !IsPermanent(p) || IsTransient(p) {
		t.Fatal("the outer mark does not decide")
	}
	plain := errors.New("disk full")
	if Of(plain) != Unknown || IsPermanent(plain) || IsTransient(plain) || Of(nil) != Unknown {
		t.Fatal("an unclassified error has a class")
	}
	if Permanent(nil) != nil || Transient(nil) != nil {
		t.Fatal("marking nil is not nil")
	}
}
