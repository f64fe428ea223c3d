// Package httpapi is the HTTP surface of the service: the strict-server
// implementation of api/openapi.yaml, the authentication guard, problem
// responses, and the health endpoints.
package httpapi

import (
	"context"
	"net/http"
	"time"
)

// Pinger is something the service needs to be reachable to be ready: the
// database pool, the object store.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Health serves /healthz (the process answers) and /readyz (every
// dependency answered a ping within a second). Failures are reported by
// name only, never with the driver's error text.
type Health struct {
	// Dependencies maps a name ("database", "storage") to its pinger.
	Dependencies map[string]Pinger
}

// Register adds the two routes to mux (for a mux without the API).
func (h Health) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		msg, ok := h.check(r.Context())
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write([]byte(msg))
	})
}

// check pings every dependency within a second; it names the first that
// fails, never its error text.
func (h Health) check(ctx context.Context) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for name, p := range h.Dependencies {
		if err := p.Ping(ctx); err != nil {
			return name + " unavailable\n", false
		}
	}
	return "ready\n", true
}
