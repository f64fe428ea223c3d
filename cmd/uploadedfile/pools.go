package main

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/tracing"
	"github.com/uploadedfile/uploadedfile/service"
)

// databaseConfig is the database section: the bounds of every wait on
// PostgreSQL, for the requests' pool and the sweeps' (docs/configuration.md,
// "Database"). Zero: the defaults of db.RequestLimits and db.SweepLimits.
type databaseConfig struct {
	ConnectTimeout   time.Duration `koanf:"connectTimeout"`
	StatementTimeout time.Duration `koanf:"statementTimeout"`
	LockTimeout      time.Duration `koanf:"lockTimeout"`
	CallTimeout      time.Duration `koanf:"callTimeout"`
	MaxConnections   int32         `koanf:"maxConnections"`
	// MaxConnectionsPerTenant: the requests' connections one tenant may
	// hold at once (0: three quarters of the pool).
	MaxConnectionsPerTenant int32 `koanf:"maxConnectionsPerTenant"`
	Sweeps                  struct {
		StatementTimeout time.Duration `koanf:"statementTimeout"`
		LockTimeout      time.Duration `koanf:"lockTimeout"`
		CallTimeout      time.Duration `koanf:"callTimeout"`
		MaxConnections   int32         `koanf:"maxConnections"`
	} `koanf:"sweeps"`
}

// maintenanceLimits bound an operator command's statements: long (a
// recount, a reconcile page over a large table), never unbounded.
var maintenanceLimits = db.Limits{StatementTimeout: 10 * time.Minute, LockTimeout: 30 * time.Second, CallTimeout: 11 * time.Minute, MaxConns: 8, CustomPlans: true}

// requests is the requests' limits; their statements keep their generic
// plans (no sweep runs on the requests' pool).
func (c databaseConfig) requests() db.Limits {
	return db.Limits{ConnectTimeout: c.ConnectTimeout, StatementTimeout: c.StatementTimeout, LockTimeout: c.LockTimeout,
		CallTimeout: c.CallTimeout, MaxConns: c.MaxConnections, GenericPlans: true}.WithDefaults(db.RequestLimits)
}

// sweeps is the sweeps' limits.
func (c databaseConfig) sweeps() db.Limits {
	return db.Limits{ConnectTimeout: c.ConnectTimeout, StatementTimeout: c.Sweeps.StatementTimeout, LockTimeout: c.Sweeps.LockTimeout,
		CallTimeout: c.Sweeps.CallTimeout, MaxConns: c.Sweeps.MaxConnections, CustomPlans: true}.WithDefaults(db.SweepLimits)
}

// servePools are serve's connections to PostgreSQL: the requests' pool and
// the sweeps' -- the tracks, the event relay and the replica heartbeat --
// so that no sweep ever waits for, or takes, a connection a request needs.
type servePools struct {
	requests, sweeps           *db.Pool
	requestLimits, sweepLimits db.Limits
	perTenant                  int
}

// openServePools opens both pools with their limits.
func openServePools(ctx context.Context, databaseURL string, tp trace.TracerProvider, c databaseConfig) (servePools, error) {
	p := servePools{requestLimits: c.requests(), sweepLimits: c.sweeps()}
	p.perTenant = int(c.MaxConnectionsPerTenant)
	if p.perTenant <= 0 {
		p.perTenant = max(1, int(p.requestLimits.MaxConns)*3/4)
	}
	var err error
	if p.requests, err = openPool(ctx, databaseURL, tp, p.requestLimits); err != nil {
		return p, err
	}
	if p.sweeps, err = openPool(ctx, databaseURL, tp, p.sweepLimits); err != nil {
		p.requests.Close()
		return p, err
	}
	return p, nil
}

// conn is what the service runs on: each call on the requests' pool, or
// on the sweeps' when its context is the sweeps' (db.ForSweeps), bounded
// from the client's side by that pool's call timeout. A request's calls
// hold at most perTenant of the requests' connections per tenant
// (db.Shared, keyed by the request's trusted tenant): one tenant waiting
// on its own locks leaves the others their connections.
func (p servePools) conn() db.Conn {
	requests := db.Shared(p.requests, p.perTenant, requestTenant)
	return db.Route(db.Bounded(requests, p.requestLimits.CallTimeout), db.Bounded(p.sweeps, p.sweepLimits.CallTimeout))
}

// requestTenant is the tenant of the request ctx serves ("" when none: an
// operator's or a sweep's call).
func requestTenant(ctx context.Context) string {
	rc, ok := service.RequestContextFrom(ctx)
	if !ok {
		return ""
	}
	return rc.Tenant
}

// Close closes both pools.
func (p servePools) Close() {
	p.requests.Close()
	p.sweeps.Close()
}

// openPool opens a pool with limits (tracing each statement with tp when
// set).
func openPool(ctx context.Context, databaseURL string, tp trace.TracerProvider, limits db.Limits) (*db.Pool, error) {
	var tracer db.QueryTracer
	if tp != nil {
		tracer = tracing.NewPGX(tp) // a span per statement, named after its query
	}
	pool, err := db.OpenPoolFor(ctx, databaseURL, tracer, limits)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	return pool, nil
}
