// Package storeopen assembles the object store a process runs on: it opens
// the configured driver and wraps it with the process's metrics and
// tracing. It is the one place a store is built; the service takes the
// result as it is.
package storeopen

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/uploadedfile/uploadedfile/internal/storage"
	"github.com/uploadedfile/uploadedfile/internal/storage/local"
	s3store "github.com/uploadedfile/uploadedfile/internal/storage/s3"
	"github.com/uploadedfile/uploadedfile/internal/storage/storagemetrics"
	"github.com/uploadedfile/uploadedfile/internal/storage/storagetrace"
)

// Settings says which store to open and how: Kind picks the driver, and
// only that driver's settings are read.
type Settings struct {
	Kind  storage.Kind
	Local local.Config
	S3    s3store.Config
}

// Open opens the store s describes. A setting the driver refuses (a
// missing bucket, a root that cannot be made) is an error that names the
// setting's group, "localRoot" or "s3"; an unknown kind is an error too.
// Open does not reach the store: a store that is down is found by Ping.
func Open(ctx context.Context, s Settings) (storage.Store, error) {
	switch s.Kind {
	case storage.KindLocal:
		st, err := local.New(s.Local)
		if err != nil {
			return nil, fmt.Errorf("localRoot: %w", err)
		}
		return st, nil
	case storage.KindS3:
		st, err := s3store.New(ctx, s.S3)
		if err != nil {
			return nil, fmt.Errorf("s3: %w", err)
		}
		return st, nil
	default:
		return nil, fmt.Errorf("driver: %q: want %s or %s", s.Kind, storage.KindLocal, storage.KindS3)
	}
}

// Instrument wraps st so that every call is counted into reg (requests,
// errors, bytes; skipped when reg is nil) and, outside that, traced as a
// span of tp (skipped when tp is nil): a span covers the measured call.
func Instrument(st storage.Store, reg prometheus.Registerer, tp trace.TracerProvider) storage.Store {
	if reg != nil {
		st = storagemetrics.Wrap(st, reg)
	}
	if tp != nil {
		st = storagetrace.Wrap(st, tp)
	}
	return st
}
