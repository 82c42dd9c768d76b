package platform

import (
	"errors"
	"fmt"
	"testing"
)

// TestErrUnsupported: a wrapped ErrUnsupported is found by errors.Is both
// as this sentinel and as the standard library's, and says what is needed.
func TestErrUnsupported(t *testing.T) {
	err := fmt.Errorf("create tun lp0: %w", ErrUnsupported)
	if !errors.Is(err, ErrUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("errors.Is does not see the sentinel in %v", err)
	}
	if errors.Is(errors.New("other"), ErrUnsupported) {
		t.Fatal("an unrelated error matched")
	}
	if got := err.Error(); got != "create tun lp0: needs Linux" {
		t.Fatalf("message %q", got)
	}
}
