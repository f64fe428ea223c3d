package main

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/uploadedfile/uploadedfile/internal/storage"
	"github.com/uploadedfile/uploadedfile/internal/storage/storeopen"
	"github.com/uploadedfile/uploadedfile/service"
)

// openStore opens the store scfg configures and instruments it with reg
// and tracer (either may be nil: that instrument is left off). The
// service it is given to owns it; a configuration error names its option.
func openStore(ctx context.Context, scfg service.Config, reg prometheus.Registerer, tracer trace.TracerProvider) (storage.Store, error) {
	settings, err := service.StoreSettings(scfg)
	if err != nil {
		return nil, err
	}
	st, err := storeopen.Open(ctx, settings)
	if err != nil {
		return nil, fmt.Errorf("uploadedfile config: %w", err)
	}
	return storeopen.Instrument(st, reg, tracer), nil
}
