package db

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Limits bound every wait of one kind of work on PostgreSQL: opening a
// connection, a statement, a lock, a transaction left idle, and -- from the
// client's side, whatever the network does -- the whole of one call,
// waiting for a pool connection included. Zero fields take the defaults of
// RequestLimits.
type Limits struct {
	// ConnectTimeout bounds opening a connection (resolve, TCP, TLS,
	// startup).
	ConnectTimeout time.Duration
	// StatementTimeout is the server's statement_timeout of every
	// statement.
	StatementTimeout time.Duration
	// LockTimeout is the server's lock_timeout: how long a statement waits
	// for a row or table lock before it gives up (SQLSTATE 55P03, an
	// outage to the caller), so one long lock never holds every
	// connection.
	LockTimeout time.Duration
	// CallTimeout bounds one call from the client's side -- waiting for a
	// connection of the pool, sending, the server's work, reading the
	// answer -- even when the server or the network in between stops
	// answering without closing the connection (a black hole): the
	// connection is then closed and the call fails as an outage.
	CallTimeout time.Duration
	// MaxConns is the pool's size (a URL's pool_max_conns wins).
	MaxConns int32
	// CustomPlans plans every statement with its arguments
	// (plan_cache_mode = force_custom_plan) instead of switching to a
	// generic plan after five runs: for work that runs a few statements a
	// minute over a backlog, where a plan made without the arguments can
	// read the whole backlog (the sweeps, operator commands).
	CustomPlans bool
	// GenericPlans plans every statement once, without its arguments
	// (plan_cache_mode = force_generic_plan), and keeps that plan: for the
	// requests, whose statements run thousands of times a second and
	// whose generic plans the plan test holds to their indexes. Left to
	// choose (auto), PostgreSQL plans a statement with its arguments on
	// every run for as long as its generic plan's estimate looks dearer
	// than the custom plans' -- as a list page's does on a table of
	// millions, where planning was a third of the page's cost.
	// CustomPlans wins when both are set.
	GenericPlans bool
}

// RequestLimits are the defaults for the requests' pool: a request whose
// database hangs is answered 503 within CallTimeout.
var RequestLimits = Limits{
	ConnectTimeout:   5 * time.Second,
	StatementTimeout: 5 * time.Second,
	LockTimeout:      2 * time.Second,
	CallTimeout:      8 * time.Second,
	MaxConns:         32,
}

// SweepLimits are the defaults for the sweeps' and the relay's own pool:
// longer statements (a batch of a sweep, a reconcile page), a few
// connections, never the requests'.
var SweepLimits = Limits{
	ConnectTimeout:   5 * time.Second,
	StatementTimeout: time.Minute,
	LockTimeout:      10 * time.Second,
	CallTimeout:      75 * time.Second,
	MaxConns:         6,
	CustomPlans:      true,
}

// WithDefaults is l with each zero field taken from def.
func (l Limits) WithDefaults(def Limits) Limits {
	if l.ConnectTimeout <= 0 {
		l.ConnectTimeout = def.ConnectTimeout
	}
	if l.StatementTimeout <= 0 {
		l.StatementTimeout = def.StatementTimeout
	}
	if l.LockTimeout <= 0 {
		l.LockTimeout = def.LockTimeout
	}
	if l.CallTimeout <= 0 {
		l.CallTimeout = def.CallTimeout
	}
	if l.MaxConns <= 0 {
		l.MaxConns = def.MaxConns
	}
	return l
}

// apply sets l on a pool's configuration: the server's timeouts (unless the
// URL set them), the connect timeout, TCP keepalives that find a peer gone
// within seconds, and the size (unless the URL set it).
func (l Limits) apply(cfg *pgxpool.Config, urlSetsMaxConns bool) {
	params := cfg.ConnConfig.RuntimeParams
	setMS := func(name string, d time.Duration) {
		if _, ok := params[name]; !ok {
			params[name] = strconv.FormatInt(d.Milliseconds(), 10)
		}
	}
	setMS("statement_timeout", l.StatementTimeout)
	setMS("lock_timeout", l.LockTimeout)
	setMS("idle_in_transaction_session_timeout", l.CallTimeout)
	if _, ok := params["plan_cache_mode"]; !ok {
		switch {
		case l.CustomPlans:
			params["plan_cache_mode"] = "force_custom_plan"
		case l.GenericPlans:
			params["plan_cache_mode"] = "force_generic_plan"
		}
	}
	if cfg.ConnConfig.ConnectTimeout <= 0 || cfg.ConnConfig.ConnectTimeout > l.ConnectTimeout {
		cfg.ConnConfig.ConnectTimeout = l.ConnectTimeout
	}
	d := &net.Dialer{
		Timeout:         l.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 2 * time.Second, Count: 3},
		Control:         tcpUserTimeout(l.CallTimeout),
	}
	cfg.ConnConfig.DialFunc = d.DialContext
	if !urlSetsMaxConns {
		cfg.MaxConns = l.MaxConns
	}
}

// Work names the kind of work a statement serves: each has its own pool
// (Route) and its own limits.
type Work int

// The kinds of work.
const (
	// WorkRequests: what a request to the API does (the default).
	WorkRequests Work = iota
	// WorkSweeps: the maintenance tracks and the event relay inside serve.
	WorkSweeps
)

type workKey struct{}

// ForSweeps marks ctx as the sweeps' work: a Route runs its statements on
// the sweeps' pool.
func ForSweeps(ctx context.Context) context.Context {
	return context.WithValue(ctx, workKey{}, WorkSweeps)
}

// WorkOf is the kind of work ctx carries (WorkRequests unless ForSweeps).
func WorkOf(ctx context.Context) Work {
	w, _ := ctx.Value(workKey{}).(Work)
	return w
}

// Bounded is c with every call bounded by timeout from the client's side
// (Limits.CallTimeout): the call's context gets that deadline unless it
// has an earlier one, and keeps it until its rows or batch are closed.
func Bounded(c Conn, timeout time.Duration) Conn {
	if timeout <= 0 {
		return c
	}
	return boundedDB{Conn: c, timeout: timeout}
}

// boundedDB is Bounded's Conn.
type boundedDB struct {
	Conn
	timeout time.Duration
}

// rewrap implements around.
func (b boundedDB) rewrap(f func(Conn) Conn) Conn {
	return boundedDB{Conn: f(b.Conn), timeout: b.timeout}
}

// bound is ctx with the call's deadline, unless an earlier one is set.
func (b boundedDB) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= b.timeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, b.timeout)
}

// Exec implements DBTX.
func (b boundedDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.Conn.Exec(ctx, sql, args...)
}

// Query implements DBTX; the deadline holds until the rows are closed.
func (b boundedDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	ctx, cancel := b.bound(ctx)
	rows, err := b.Conn.Query(ctx, sql, args...)
	if err != nil {
		cancel()
		return rows, err
	}
	return boundedRows{Rows: rows, cancel: cancel}, nil
}

// QueryRow implements DBTX; the deadline holds until Scan.
func (b boundedDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	ctx, cancel := b.bound(ctx)
	return boundedRow{Row: b.Conn.QueryRow(ctx, sql, args...), cancel: cancel}
}

// SendBatch implements DBTX; the deadline holds until the batch is closed.
func (b boundedDB) SendBatch(ctx context.Context, batch *pgx.Batch) pgx.BatchResults {
	ctx, cancel := b.bound(ctx)
	return boundedBatch{BatchResults: b.Conn.SendBatch(ctx, batch), cancel: cancel}
}

// Begin implements Conn: the BEGIN (and the wait for a connection) is
// bounded; each statement of the transaction is bounded by the server's
// statement_timeout and its own context.
func (b boundedDB) Begin(ctx context.Context) (pgx.Tx, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.Conn.Begin(ctx)
}

type boundedRows struct {
	pgx.Rows
	cancel context.CancelFunc
}

func (r boundedRows) Close() { r.Rows.Close(); r.cancel() }

type boundedRow struct {
	pgx.Row
	cancel context.CancelFunc
}

func (r boundedRow) Scan(dest ...any) error {
	defer r.cancel()
	return r.Row.Scan(dest...)
}

type boundedBatch struct {
	pgx.BatchResults
	cancel context.CancelFunc
}

func (b boundedBatch) Close() error {
	defer b.cancel()
	return b.BatchResults.Close()
}

// Route is a Conn that runs each call on requests or on sweeps by the work
// its context carries (ForSweeps): the sweeps and the relay never wait
// for, or take, a connection the requests need.
func Route(requests, sweeps Conn) Conn { return routedDB{requests: requests, sweeps: sweeps} }

// routedDB is Route's Conn.
type routedDB struct{ requests, sweeps Conn }

// rewrap implements around.
func (r routedDB) rewrap(f func(Conn) Conn) Conn {
	return routedDB{requests: f(r.requests), sweeps: f(r.sweeps)}
}

func (r routedDB) pick(ctx context.Context) Conn {
	if WorkOf(ctx) == WorkSweeps {
		return r.sweeps
	}
	return r.requests
}

// Exec implements DBTX.
func (r routedDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return r.pick(ctx).Exec(ctx, sql, args...)
}

// Query implements DBTX.
func (r routedDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return r.pick(ctx).Query(ctx, sql, args...)
}

// QueryRow implements DBTX.
func (r routedDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return r.pick(ctx).QueryRow(ctx, sql, args...)
}

// SendBatch implements DBTX.
func (r routedDB) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return r.pick(ctx).SendBatch(ctx, b)
}

// Begin implements Conn.
func (r routedDB) Begin(ctx context.Context) (pgx.Tx, error) { return r.pick(ctx).Begin(ctx) }
