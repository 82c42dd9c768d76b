//go:build !linux

package cc

import (
	"fmt"
	"time"

	"github.com/lightpath/lightpath/internal/cc/fast"
	"github.com/lightpath/lightpath/internal/platform"
)

// Install needs Linux's BPF congestion control.
func Install(name string, p fast.Params) (Loaded, Action, error) {
	return Loaded{}, "", fmt.Errorf("install %s: %w", name, platform.ErrUnsupported)
}

// Remove needs Linux.
func Remove(name string) (bool, error) {
	return false, fmt.Errorf("remove %s: %w", name, platform.ErrUnsupported)
}

// List needs Linux.
func List() ([]Loaded, error) {
	return nil, fmt.Errorf("list congestion controls: %w", platform.ErrUnsupported)
}

// Tracer needs Linux.
type Tracer struct{}

// OpenTrace needs Linux.
func OpenTrace(name string) (*Tracer, error) {
	return nil, fmt.Errorf("trace %s: %w", name, platform.ErrUnsupported)
}

// Read needs Linux.
func (t *Tracer) Read(deadline time.Time) (fast.Round, error) {
	return fast.Round{}, platform.ErrUnsupported
}

// Close needs Linux.
func (t *Tracer) Close() error { return nil }
