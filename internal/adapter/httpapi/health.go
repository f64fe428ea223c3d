// Package httpapi is the HTTP surface of the service: the strict-server
// implementation of api/openapi.yaml, the authentication guard, problem
// responses, and the health endpoints.
package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Pinger is something readiness checks: a gate of this replica, or a
// dependency every replica shares.
type Pinger interface {
	Ping(ctx context.Context) error
}

// PingFunc is a Pinger of a function.
type PingFunc func(ctx context.Context) error

// Ping implements Pinger.
func (f PingFunc) Ping(ctx context.Context) error { return f(ctx) }

// NotReady is a failed check with a cause that may be shown on /readyz (it
// names no host, credential or driver detail): "the database schema is at
// version X, behind this binary's Y", "the bucket does not exist". Any
// other error is shown as "did not answer".
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

// checkTimeout bounds each check of a readiness probe. The checks run at
// once, each with its own deadline, so a dependency that hangs is the one
// named, never the one checked after it.
const checkTimeout = time.Second

// Health serves /healthz (the process answers), /readyz (this replica can
// serve) and /dependencies (the state of what every replica shares).
//
// Readiness fails only on what is particular to the replica -- its Gates:
// starting, draining, a schema outside its window, keys never loaded. The
// Dependencies every replica shares (the database, the store, clamd) are
// checked and reported on both pages, counted in
// uploadedfile_dependency_up and logged once per change, but never make
// /readyz fail: an outage of one of them would take every replica out of
// the balancer at once, and the routes that do not need it would go down
// with the ones that do. A request that needs a missing dependency is
// answered by the service's own 503 problem with Retry-After.
type Health struct {
	// Gates maps a name ("schema", "keys", "draining") to a check of this
	// replica; a failure makes /readyz 503.
	Gates map[string]Pinger
	// Dependencies maps a name ("database", "storage", "scanner") to the
	// check of a system every replica shares; reported, never gating.
	Dependencies map[string]Pinger
	// Logger receives a line when a check starts or stops failing (nil:
	// slog.Default()).
	Logger *slog.Logger
	// Registerer, when set, receives uploadedfile_dependency_up{dependency}
	// (1: answered its last check) for every gate and dependency.
	Registerer prometheus.Registerer
	// Facts are lines /readyz adds after its verdict, ready or not
	// ("image engine: vips libvips 8.14.1"): what an operator checks a
	// replica runs, never a secret or an address.
	Facts []string

	once  sync.Once
	state *healthState
}

// healthState is what the log has said of each check, and the gauge.
type healthState struct {
	mu     sync.Mutex
	failed map[string]bool
	up     *prometheus.GaugeVec
	log    *slog.Logger
}

// Register adds the three routes to mux (for a mux without the API).
func (h *Health) Register(mux *http.ServeMux) {
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
	mux.HandleFunc("GET /dependencies", h.ServeDependencies)
}

// result is one check's outcome.
type result struct {
	name  string
	cause string // "": it answered
	err   error
}

// run runs every check of checks at once, each within its own timeout, and
// returns their results in name order.
func (h *Health) run(ctx context.Context, checks map[string]Pinger, timeout time.Duration) []result {
	out := make([]result, 0, len(checks))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, p := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			err := ping(cctx, p, timeout+pingGrace)
			r := result{name: name, err: err}
			if err != nil {
				r.cause = "did not answer"
				var nr *NotReady
				if errors.As(err, &nr) {
					r.cause = nr.Cause
				}
			}
			mu.Lock()
			out = append(out, r)
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	for _, r := range out {
		h.logChange(ctx, r.name, r.err)
	}
	return out
}

// pingGrace is how long past its deadline a check may take to say what
// its deadline meant (the schema gate answers "not mine" for a database
// that did not answer) before it is taken as not answering.
const pingGrace = 250 * time.Millisecond

// ping is p.Ping, taken as not answering when p has not returned within
// limit (a check that ignores its context's deadline).
func ping(ctx context.Context, p Pinger, limit time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- p.Ping(ctx) }()
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return context.DeadlineExceeded
	}
}

// Check runs every gate within timeout and returns the causes of those
// that failed, by name, in name order (none: ready).
func (h *Health) Check(ctx context.Context, timeout time.Duration) []string {
	return h.failed(ctx, h.Gates, timeout, " not ready: ")
}

// Unavailable runs every dependency within timeout and returns a line for
// each that failed ("storage unavailable: the object store did not
// answer"), in name order.
func (h *Health) Unavailable(ctx context.Context, timeout time.Duration) []string {
	return h.failed(ctx, h.Dependencies, timeout, " unavailable: ")
}

// failed runs checks and returns "<name><verb><cause>" for each that failed.
func (h *Health) failed(ctx context.Context, checks map[string]Pinger, timeout time.Duration, verb string) []string {
	var lines []string
	for _, r := range h.run(ctx, checks, timeout) {
		if r.err != nil {
			lines = append(lines, r.name+verb+r.cause)
		}
	}
	return lines
}

// logChange logs a check that starts failing (WARN, with its error) or
// answers again (INFO) -- once per change, however often it is polled --
// and sets its gauge.
func (h *Health) logChange(ctx context.Context, name string, err error) {
	st := h.observed()
	st.mu.Lock()
	was := st.failed[name]
	st.failed[name] = err != nil
	st.mu.Unlock()
	if st.up != nil {
		up := 1.0
		if err != nil {
			up = 0
		}
		st.up.WithLabelValues(name).Set(up)
	}
	switch {
	case err != nil && !was:
		st.log.WarnContext(ctx, "not answering", "check", name, "error", err.Error())
	case err == nil && was:
		st.log.InfoContext(ctx, "answering again", "check", name)
	}
}

// observed is h's log state and gauge, made on first use: a Health is
// shared by pointer, so each change is logged once however many routes
// poll it.
func (h *Health) observed() *healthState {
	h.once.Do(func() {
		h.state = &healthState{failed: map[string]bool{}, log: cmp.Or(h.Logger, slog.Default())}
		if h.Registerer != nil {
			h.state.up = prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Name: "uploadedfile_dependency_up",
				Help: "1 when the check of a dependency or readiness gate answered at its last run, 0 when it failed.",
			}, []string{"dependency"})
			h.Registerer.MustRegister(h.state.up)
		}
	})
	return h.state
}

// check is /readyz's answer: "ready" or one line per failed gate; then a
// line per shared dependency that did not answer (never failing the
// probe); then the facts, a line each.
func (h *Health) check(ctx context.Context) (string, bool) {
	var gates, deps []string
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); gates = h.Check(ctx, checkTimeout) }()
	go func() { defer wg.Done(); deps = h.Unavailable(ctx, checkTimeout) }()
	wg.Wait()
	var b strings.Builder
	if len(gates) == 0 {
		b.WriteString("ready\n")
	}
	for _, l := range append(gates, deps...) {
		b.WriteString(l + "\n")
	}
	for _, f := range h.Facts {
		b.WriteString(f + "\n")
	}
	return b.String(), len(gates) == 0
}

// dependencyState is one entry of /dependencies.
type dependencyState struct {
	Name string `json:"name"`
	// Kind is "gate" (particular to this replica: a failure makes /readyz
	// 503) or "shared" (every replica depends on it: reported only).
	Kind  string `json:"kind"`
	OK    bool   `json:"ok"`
	Cause string `json:"cause,omitempty"`
}

// ServeDependencies answers /dependencies: every gate and shared
// dependency with its state, as JSON, always 200.
func (h *Health) ServeDependencies(w http.ResponseWriter, r *http.Request) {
	out := struct {
		Dependencies []dependencyState `json:"dependencies"`
	}{Dependencies: []dependencyState{}}
	for kind, checks := range map[string]map[string]Pinger{"gate": h.Gates, "shared": h.Dependencies} {
		for _, res := range h.run(r.Context(), checks, checkTimeout) {
			out.Dependencies = append(out.Dependencies, dependencyState{Name: res.name, Kind: kind, OK: res.err == nil, Cause: res.cause})
		}
	}
	sort.Slice(out.Dependencies, func(i, j int) bool { return out.Dependencies[i].Name < out.Dependencies[j].Name })
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(out)
}
