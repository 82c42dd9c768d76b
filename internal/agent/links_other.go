//go:build !linux

package agent

import "context"

func carrierDown(int, []string) ([]string, error) { return nil, errLinux }

func watchLinks(context.Context, int, chan<- struct{}) error { return errLinux }
