package storagemetrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/uploadedfile/uploadedfile/internal/storage"
	"github.com/uploadedfile/uploadedfile/internal/testkit/storagetest"
)

func newLocal(t *testing.T) storage.Store { return storagetest.Local(t) }

// TestConformance: the wrapped store is still a conforming store.
func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store { return Wrap(newLocal(t), prometheus.NewRegistry()) })
}

// TestEveryMethodIsCounted: each storage request is counted under its
// operation (the readiness ping, Kind and Close are not requests).
func TestEveryMethodIsCounted(t *testing.T) {
	w := Wrap(newLocal(t), prometheus.NewRegistry())
	counted := func(op string) bool {
		n := 0.0
		for _, outcome := range []string{"ok", "not_found", "exists", "precondition", "no_space", "read_only", "io_error", "unavailable", "error"} {
			n += testutil.ToFloat64(w.requests.WithLabelValues(op, outcome))
		}
		return n > 0
	}
	storagetest.EveryMethod(t, w, counted, "Kind", "Ping", "Close")
}
