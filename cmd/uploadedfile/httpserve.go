package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay"
	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
	"github.com/uploadedfile/uploadedfile/internal/adapter/tracks"
)

// httpServer is the API's server over handler: bodies under their idle
// deadline, headers bounded in time and size, in-flight requests counted,
// and once draining is set every answer closes its connection.
func httpServer(handler http.Handler, cfg fileConfig, draining *atomic.Bool) (*http.Server, *inflightRequests) {
	inflight := &inflightRequests{draining: draining}
	handler = httpapi.BodyDeadline(handler, cfg.BodyIdleTimeout)
	return &http.Server{Handler: inflight.wrap(handler), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: maxHeaderBytes}, inflight
}

// maxHeaderBytes bounds a request's headers (net/http's default is 1 MiB):
// room for a bearer token of httpapi.MaxTokenBytes and every header a
// browser sends, no more.
const maxHeaderBytes = 64 << 10

// background is what serve runs once everything that can fail at start
// has succeeded: the HTTP server, and the maintenance tracks and the event
// relay when enabled.
type background struct {
	sweeps bool
	runner *tracks.Runner
	relay  *eventrelay.Relay // nil: no relay in this process
	srv    *http.Server
	ln     net.Listener
	drain  time.Duration
	// drainDelay: serve on, not ready, this long before shutting down.
	drainDelay time.Duration
	inflight   *inflightRequests
	// draining turns /readyz 503 once shutdown starts.
	draining *atomic.Bool
	// pool records the replica's heartbeat (uploaded_file_replica).
	pool *db.Pool
}

// runServer runs b's parts under one context of their own: the first that
// fails stops the others and is serve's error (the process exits non-zero
// with it); a signal (ctx done) stops them all, draining in-flight
// requests, and is a clean exit.
func runServer(ctx context.Context, log *slog.Logger, b background) error {
	group, gctx := errgroup.WithContext(ctx)
	if b.sweeps {
		group.Go(func() error {
			if err := b.runner.Schedule(gctx); err != nil {
				return fmt.Errorf("maintenance schedule: %w", err)
			}
			return nil
		})
	}
	if b.relay != nil {
		group.Go(func() error {
			if err := b.relay.Run(gctx); err != nil {
				return fmt.Errorf("event relay: %w", err)
			}
			return nil
		})
	}
	group.Go(func() error { return heartbeat(gctx, log, b.pool) })
	group.Go(func() error { return serveHTTP(gctx, log, b) })
	return group.Wait()
}

// serveHTTP serves b.ln until ctx ends, then shuts the server down: new
// connections are refused and in-flight requests get b.drain to finish;
// those still running then are cut, and their number logged.
func serveHTTP(ctx context.Context, log *slog.Logger, b background) error {
	errc := make(chan error, 1)
	go func() { errc <- b.srv.Serve(b.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// Not ready from now on, and every answer closes its connection
	// (Connection: close): the balancer stops sending new requests and
	// keeps no connection to this replica open, before the listener
	// closes. Idle keep-alive connections stay open through the delay: a
	// balancer that still counts this replica in may be sending a request
	// on one at the very moment it would be closed, and that request
	// would fail with no answer (HAProxy's 502).
	b.draining.Store(true)
	if b.drainDelay > 0 {
		log.Info("draining: not ready, still serving", "delay", b.drainDelay.String())
		time.Sleep(b.drainDelay)
	}
	b.srv.SetKeepAlivesEnabled(false)
	log.Info("shutting down", "drain", b.drain.String(), "in_flight", b.inflight.count())
	shutdownCtx, cancel := context.WithTimeout(context.Background(), b.drain)
	defer cancel()
	if err := b.srv.Shutdown(shutdownCtx); err != nil {
		cut := b.inflight.count()
		_ = b.srv.Close()
		log.Warn("shutdown: drain timeout reached; requests cut", "cut", cut, "drain", b.drain.String())
	}
	return nil
}

// inflightRequests counts the requests being served, for the shutdown's
// log line.
type inflightRequests struct {
	n atomic.Int64
	// draining: answer with Connection: close (nil: never).
	draining *atomic.Bool
}

func (i *inflightRequests) count() int64 { return i.n.Load() }

func (i *inflightRequests) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i.n.Add(1)
		defer i.n.Add(-1)
		if i.draining != nil && i.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}
