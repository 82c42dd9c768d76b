//go:build !linux

package testbed

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/lightpath/lightpath/internal/platform"
)

var errLinux = fmt.Errorf("the testbed (network namespaces, TUN devices, htb): %w", platform.ErrUnsupported)

// Up needs Linux.
func Up(context.Context, UpOptions) (*UpResult, error) { return nil, errLinux }

// Down needs Linux.
func Down(string, func(string, ...any)) (*DownResult, error) { return nil, errLinux }

// Status needs Linux.
func Status(string) (*StatusReport, error) { return nil, errLinux }

// LinkSet needs Linux.
func LinkSet(string, string, LinkChange) error { return errLinux }

// Exec needs Linux.
func Exec(string, string, []string) error { return errLinux }

// RunEmulator needs Linux.
func RunEmulator(context.Context, string, *slog.Logger) error { return errLinux }
