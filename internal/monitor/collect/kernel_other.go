//go:build !linux

package collect

import (
	"context"

	"github.com/lightpath/lightpath/internal/monitor"
)

func (*interfacesCollector) Collect(context.Context, func(monitor.Point)) error {
	return ErrNotImplemented
}

func (*htbCollector) Collect(context.Context, func(monitor.Point)) error { return ErrNotImplemented }

func (*tcpCollector) Collect(context.Context, func(monitor.Point)) error { return ErrNotImplemented }
