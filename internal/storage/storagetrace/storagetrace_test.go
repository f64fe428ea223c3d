package storagetrace

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/uploadedfile/uploadedfile/internal/storage"
	"github.com/uploadedfile/uploadedfile/internal/testkit/storagetest"
)

func newLocal(t *testing.T) storage.Store { return storagetest.Local(t) }

// TestConformance: the wrapped store is still a conforming store.
func TestConformance(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	storagetest.Run(t, func(t *testing.T) storage.Store { return Wrap(newLocal(t), tp) })
}

// TestEveryMethodIsTraced: each storage call is a span named for its
// operation (Kind and Close are not calls to the store).
func TestEveryMethodIsTraced(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	w := Wrap(newLocal(t), sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	traced := func(op string) bool {
		for _, s := range rec.Ended() {
			if s.Name() == "storage."+op {
				return true
			}
		}
		return false
	}
	storagetest.EveryMethod(t, w, traced, "Kind", "Close")
}
