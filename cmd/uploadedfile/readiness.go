package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/db/migrations"
	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
	"github.com/uploadedfile/uploadedfile/internal/clamd"
	"github.com/uploadedfile/uploadedfile/internal/storage"
	"github.com/uploadedfile/uploadedfile/service"
)

// checkSchema compares the database's schema with the binary's window:
// outside --dev a schema the binary cannot serve on refuses the start (it
// names both versions and the fix); in --dev it is logged, and /readyz
// says it. A later schema whose migrations declare this binary compatible,
// and a migration that is running, start normally.
func checkSchema(ctx context.Context, g *globals, pool *db.Pool, dev bool) error {
	err := migrations.Check(ctx, pool)
	var se *migrations.SchemaError
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &se):
		return g.databaseError(err)
	case dev:
		g.logger.Error("schema", "error", err.Error())
		return nil
	}
	return fmt.Errorf("serve: %w", err)
}

// readiness is what /readyz checks. Its gates are particular to this
// replica: the schema within this binary's window, the key set loaded once
// (a JWKS URL), its storage settings (the bucket exists, the credentials
// are accepted), and not draining. Its shared dependencies -- the database,
// the store (bucket and credentials, on S3) and clamd when the scan gate
// is on -- are reported, never gating (httpapi.Health). Each cause names
// no host or credential.
func readiness(cfg fileConfig, pool *db.Pool, svc *service.Service, guard *httpapi.Guard, draining *atomic.Bool) *httpapi.Health {
	store := &storeProbe{svc: svc}
	gates := map[string]httpapi.Pinger{
		"schema": httpapi.PingFunc(func(ctx context.Context) error {
			err := migrations.Check(ctx, pool)
			var se *migrations.SchemaError
			if errors.As(err, &se) {
				return &httpapi.NotReady{Cause: se.Error()}
			}
			// Any other error is the database not answering: a shared
			// outage, reported under "database"; the schema it had
			// still stands.
			return nil
		}),
		"keys": httpapi.PingFunc(guard.Ready),
		// This replica's storage settings: a bucket that does not exist or
		// credentials the store refuses (an outage is "storage", below).
		"storage configuration": httpapi.PingFunc(func(ctx context.Context) error {
			err := store.ping(ctx)
			switch {
			case errors.Is(err, storage.ErrBucketMissing):
				return &httpapi.NotReady{Cause: "the bucket does not exist", Err: err}
			case errors.Is(err, storage.ErrCredentialsRefused):
				return &httpapi.NotReady{Cause: "the storage credentials were refused", Err: err}
			}
			return nil
		}),
		"draining": httpapi.PingFunc(func(context.Context) error {
			if draining.Load() {
				return &httpapi.NotReady{Cause: "this replica is shutting down"}
			}
			return nil
		}),
	}
	deps := map[string]httpapi.Pinger{
		"database": pool,
		"storage": httpapi.PingFunc(func(ctx context.Context) error {
			err := store.ping(ctx)
			switch {
			case err == nil, errors.Is(err, storage.ErrBucketMissing), errors.Is(err, storage.ErrCredentialsRefused):
				return nil // this replica's configuration: its gate says it
			}
			return &httpapi.NotReady{Cause: storeCause(err), Err: err}
		}),
	}
	if cfg.Scan.Mode == service.ScanGate {
		if c, err := clamd.New(cfg.Scan.Clamd, cfg.Scan.Timeout); err == nil {
			deps["scanner"] = httpapi.PingFunc(func(ctx context.Context) error {
				if err := c.Ping(ctx); err != nil {
					return &httpapi.NotReady{Cause: "clamd did not answer", Err: err}
				}
				return nil
			})
		}
	}
	return &httpapi.Health{Gates: gates, Dependencies: deps, Facts: []string{"image engine: " + svc.ImageEngine()}}
}

// storeCause is the readiness line of a store that failed: what the store
// said of itself (no space, read-only, an I/O error), else that it did
// not answer.
func storeCause(err error) string {
	switch storage.FaultKind(err) {
	case "no_space":
		return "no space left"
	case "read_only":
		return "read-only"
	case "io_error":
		return "I/O error"
	}
	return "the object store did not answer"
}

// storeProbeReuse is how long one ping of the store answers both checks
// that read it: a probe runs them at once.
const storeProbeReuse = 250 * time.Millisecond

// storeProbe is the store's ping shared by the storage configuration gate
// and the storage dependency, so a readiness probe asks the store once
// (a HEAD of the bucket on S3), not twice: the second check waits for the
// first's answer and reuses it.
type storeProbe struct {
	svc *service.Service
	mu  sync.Mutex
	at  time.Time
	err error
}

func (p *storeProbe) ping(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.at.IsZero() && time.Since(p.at) < storeProbeReuse {
		return p.err
	}
	p.err, p.at = p.svc.Ping(ctx), time.Now()
	return p.err
}

// replicaHeartbeat is how often a replica renews its row in
// uploaded_file_replica (migrations.ReplicaAlive is four of them).
const replicaHeartbeat = 15 * time.Second

// heartbeat registers this replica -- a fresh id and the schema version
// its binary embeds -- and renews it every replicaHeartbeat until ctx
// ends, then removes it: what `migrate up` reads to refuse a contract
// migration while an older binary runs. It never stops the server: a
// heartbeat the database refuses is logged once per episode and tried
// again.
func heartbeat(ctx context.Context, log *slog.Logger, pool *db.Pool) error {
	q, conn := db.New(), db.Wrap(pool)
	id := uuid.New()
	failing := false
	beat := func() {
		bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		err := q.ReplicaHeartbeat(bctx, conn, db.ReplicaHeartbeatParams{ID: id, BinaryVersion: int64(migrations.Latest())})
		if err == nil {
			_, err = q.ReplicaPrune(bctx, conn, 10*migrations.ReplicaAlive)
		}
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			log.Warn("replica heartbeat failed; trying again", "error", err.Error())
		case err == nil && failing:
			log.Info("replica heartbeat recorded again")
		}
		failing = err != nil
	}
	beat()
	t := time.NewTicker(replicaHeartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_ = q.ReplicaForget(fctx, conn, id)
			return nil
		case <-t.C:
			beat()
		}
	}
}
