// Package httpapi is the HTTP surface of the service: the strict-server
// implementation of api/openapi.yaml, the authentication guard, problem
// responses, and the health endpoints.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// Pinger is something the service needs to be reachable to be ready: the
// database pool, the object store.
type Pinger interface {
	Ping(ctx context.Context) error
}

// PingFunc is a Pinger of a function.
type PingFunc func(ctx context.Context) error

// Ping implements Pinger.
func (f PingFunc) Ping(ctx context.Context) error { return f(ctx) }

// NotReady is a dependency's failed check with a cause that may be shown
// on /readyz (it names no host, credential or driver detail): "the database
// schema is at version X, behind this binary's Y", "the bucket does not
// exist". Any other error is shown as "did not answer".
type NotReady struct {
	Cause string
	Err   error // the detail, for the log only
}

func (e *NotReady) Error() string {
	if e.Err != nil {
		return e.Cause + ": " + e.Err.Error()
	}
	return e.Cause
}

func (e *NotReady) Unwrap() error { return e.Err }

// Health serves /healthz (the process answers) and /readyz (every
// dependency answered its check within a second). Each failing dependency
// is named with its cause when the check gave one (NotReady), never with
// a driver's error text; the full error goes to the log, once per change.
type Health struct {
	// Dependencies maps a name ("database", "schema", "storage", "keys",
	// "scanner") to its check.
	Dependencies map[string]Pinger
	// Logger receives a line when a dependency stops or starts answering
	// (nil: none).
	Logger *slog.Logger
	// Facts are lines /readyz adds after its verdict, ready or not
	// ("image engine: vips libvips 8.14.1"): what an operator checks a
	// replica runs, never a secret or an address.
	Facts []string

	state *healthState
}

// healthState is what the log has said of each dependency.
type healthState struct {
	mu     sync.Mutex
	failed map[string]bool
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

// Check runs every dependency's check within timeout and returns the
// causes of those that failed, by name, in name order (none: ready).
func (h Health) Check(ctx context.Context, timeout time.Duration) []string {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	names := make([]string, 0, len(h.Dependencies))
	for name := range h.Dependencies {
		names = append(names, name)
	}
	sort.Strings(names)
	var causes []string
	for _, name := range names {
		err := h.Dependencies[name].Ping(ctx)
		h.logChange(ctx, name, err)
		if err == nil {
			continue
		}
		cause := "did not answer"
		var nr *NotReady
		if errors.As(err, &nr) {
			cause = nr.Cause
		}
		causes = append(causes, name+" not ready: "+cause)
	}
	return causes
}

// logChange logs a dependency that starts failing (WARN, with its error)
// or answers again (INFO) -- once per change, however often /readyz is
// polled.
func (h Health) logChange(ctx context.Context, name string, err error) {
	if h.Logger == nil || h.state == nil {
		return
	}
	h.state.mu.Lock()
	was := h.state.failed[name]
	h.state.failed[name] = err != nil
	h.state.mu.Unlock()
	switch {
	case err != nil && !was:
		h.Logger.WarnContext(ctx, "not ready", "dependency", name, "error", err.Error())
	case err == nil && was:
		h.Logger.InfoContext(ctx, "ready again", "dependency", name)
	}
}

// WithLog returns h logging each dependency's changes to log.
func (h Health) WithLog(log *slog.Logger) Health {
	h.Logger = log
	h.state = &healthState{failed: map[string]bool{}}
	return h
}

// check is Check as /readyz answers it: "ready", or one line per cause;
// then the facts, a line each.
func (h Health) check(ctx context.Context) (string, bool) {
	causes := h.Check(ctx, time.Second)
	facts := ""
	for _, f := range h.Facts {
		facts += f + "\n"
	}
	if len(causes) > 0 {
		return strings.Join(causes, "\n") + "\n" + facts, false
	}
	return "ready\n" + facts, true
}
