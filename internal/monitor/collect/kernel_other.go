//go:build !linux

package collect

import (
	"context"

	"github.com/lightpath/lightpath/internal/monitor"
	"github.com/lightpath/lightpath/internal/platform"
)

func (*interfacesCollector) Collect(context.Context, func(monitor.Point)) error {
	return platform.ErrUnsupported
}

func (*htbCollector) Collect(context.Context, func(monitor.Point)) error {
	return platform.ErrUnsupported
}

func (*tcpCollector) Collect(context.Context, func(monitor.Point)) error {
	return platform.ErrUnsupported
}
