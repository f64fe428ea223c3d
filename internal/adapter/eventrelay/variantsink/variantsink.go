// Package variantsink is an events relay sink that generates the eager
// image variant presets of every file.ready, off the upload's request
// path: an adapter from the relay (internal/adapter/eventrelay) to the service.
package variantsink

import (
	"context"

	"github.com/google/uuid"

	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay"
)

// Name is the sink's progress row in the database.
const Name = "uploadedfile-eager-variants"

// Generator generates a file's eager presets (service.Service).
type Generator interface {
	UnsafeSystemGenerateEagerVariants(ctx context.Context, tenant string, id uuid.UUID) error
}

// Sink generates the eager variants of each event's file, in order.
type Sink struct {
	Generator Generator
}

// Config is the relay sink configuration: file.ready only.
func Config(g Generator) eventrelay.SinkConfig {
	return eventrelay.SinkConfig{Name: Name, Types: []string{"file.ready"}, Sink: Sink{Generator: g}}
}

// Deliver implements eventrelay.Sink: an event is acknowledged once its
// variants exist (or cannot exist); a failure stops the batch there and
// the relay retries it with backoff.
func (s Sink) Deliver(ctx context.Context, events []eventrelay.Event) (int, error) {
	for i, e := range events {
		id, err := uuid.Parse(e.FileID)
		if err != nil {
			continue // not a file id: nothing to generate
		}
		if err := s.Generator.UnsafeSystemGenerateEagerVariants(ctx, e.Tenant, id); err != nil {
			return i, err
		}
	}
	return len(events), nil
}
