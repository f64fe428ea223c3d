// Package eventrelay is an adapter over the service's lifecycle event
// outbox: it reads the events the transitions commit (uploaded_file_event)
// and delivers them, as CloudEvents, to the configured sinks -- signed
// webhooks and NATS JetStream (the subpackages webhook and jetstream).
//
// Delivery is at least once per sink and in outbox order per sink (so in
// transition order per file). A sink is held by one relay at a time through
// a lease in its progress row; replicas running the relay share the sinks.
// A relay that dies mid-batch leaves the lease to run out and the next
// holder delivers again from the sink's cursor, with the same event ids.
// An event a sink refuses MaxAttempts times is parked and the sink moves on;
// `uploadedfile events replay` queues it again.
package eventrelay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/uploadedfile/uploadedfile/db"
)

// Sink delivers events to one destination.
type Sink interface {
	// Deliver sends events in order and reports how many of them, from
	// the first, were acknowledged; err is why events[n] was not (nil
	// when n == len(events)). It stops at ctx's deadline: what is not
	// acknowledged by then is delivered again by a later pass.
	Deliver(ctx context.Context, events []Event) (n int, err error)
}

// SinkConfig is one configured sink.
type SinkConfig struct {
	// Name identifies the sink's progress row: [A-Za-z0-9][A-Za-z0-9_-]{0,62}.
	Name string
	// Types limits the sink to these event types (file.ready, ...); empty
	// delivers every type.
	Types []string
	// Sink delivers.
	Sink Sink
	// MaxAttempts parks an event after this many failed attempts
	// (default 10).
	MaxAttempts int
	// Backoff is the first retry delay, doubled per attempt up to
	// MaxBackoff, with full jitter (defaults 1s and 5m).
	Backoff, MaxBackoff time.Duration
}

// Config configures a Relay.
type Config struct {
	// Source is the CloudEvents source attribute (default /uploadedfile).
	Source string
	// Sinks are the destinations; a relay with none only prunes.
	Sinks []SinkConfig
	// Batch is how many events one pass reads per sink (default 256).
	Batch int
	// Interval is the pause between passes that found nothing to deliver
	// (default 1s).
	Interval time.Duration
	// Lease is how long a relay holds a sink per pass (default 30s, at
	// least 1s): a relay that dies holds its sinks until it runs out. A
	// pass stops delivering when two thirds of it are gone, so the cursor
	// moves while the lease is still its own.
	Lease time.Duration
	// Retention is how long delivered events stay in the outbox (default
	// 7 days); 0 keeps the default, a negative value never prunes.
	Retention time.Duration
	// Logger receives delivery failures (never a URL or a secret); nil:
	// slog.Default().
	Logger *slog.Logger
	// Registerer receives the relay's metrics (deliveries, failures,
	// parked events, each sink's backlog); nil records nothing.
	Registerer prometheus.Registerer
	// Now is the clock the relay's SQL uses (nil: the database clock).
	Now func() *time.Time
}

// Relay delivers the outbox to the sinks.
type Relay struct {
	pool  DB
	q     *db.Queries
	cfg   Config
	sinks map[string]SinkConfig
	names []string

	metrics *metrics // nil: no Registerer

	ensured atomic.Bool
	// statusAt is when the backlog gauges were last refreshed (Unix nanos).
	statusAt atomic.Int64
}

// statusEvery bounds how often a busy relay counts its sinks' backlogs
// for the gauges (a count over the backlog, not a per-batch cost).
const statusEvery = time.Second

// DB is what the relay needs of a pool: pgxpool.Pool satisfies it.
type DB interface {
	db.DBTX
	Begin(ctx context.Context) (db.Tx, error)
}

// ErrConfig reports an invalid relay configuration.
var ErrConfig = errors.New("eventrelay: invalid configuration")

// New checks cfg and returns a relay over pool. Its statements run
// through db.Wrap, as the service's do: a database that does not answer is
// an outage of the database (errors.Is outage.ErrUnavailable), a conflict
// a db.ErrConflict.
func New(pool DB, cfg Config) (*Relay, error) {
	if cfg.Source == "" {
		cfg.Source = "/uploadedfile"
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 256
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.Lease < time.Second {
		return nil, fmt.Errorf("%w: lease %s is shorter than 1s", ErrConfig, cfg.Lease)
	}
	if cfg.Retention == 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = func() *time.Time { return nil }
	}
	r := &Relay{pool: db.Wrap(pool), q: db.New(), cfg: cfg, sinks: map[string]SinkConfig{}}
	if cfg.Registerer != nil {
		r.metrics = newMetrics(cfg.Registerer)
	}
	for _, s := range cfg.Sinks {
		if !validSinkName(s.Name) {
			return nil, fmt.Errorf("%w: sink name %q (want [A-Za-z0-9][A-Za-z0-9_-]{0,62})", ErrConfig, s.Name)
		}
		if _, dup := r.sinks[s.Name]; dup {
			return nil, fmt.Errorf("%w: sink %q configured twice", ErrConfig, s.Name)
		}
		if s.Sink == nil {
			return nil, fmt.Errorf("%w: sink %q has no destination", ErrConfig, s.Name)
		}
		for _, t := range s.Types {
			if !slices.Contains(Types, t) {
				return nil, fmt.Errorf("%w: sink %q: unknown event type %q", ErrConfig, s.Name, t)
			}
		}
		if s.MaxAttempts <= 0 {
			s.MaxAttempts = 10
		}
		if s.Backoff <= 0 {
			s.Backoff = time.Second
		}
		if s.MaxBackoff <= 0 {
			s.MaxBackoff = 5 * time.Minute
		}
		r.sinks[s.Name] = s
		r.names = append(r.names, s.Name)
	}
	slices.Sort(r.names)
	return r, nil
}

func validSinkName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || i > 0 && (c == '_' || c == '-')
		if !ok {
			return false
		}
	}
	return true
}

// Run delivers until ctx is done: a pass, then the next at once while
// passes find work, or after Interval when one found none. Pass errors are
// logged and retried; Run returns nil when ctx is done.
func (r *Relay) Run(ctx context.Context) error {
	if err := r.Ensure(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	lastPrune := time.Time{}
	for ctx.Err() == nil {
		n, err := r.Pass(ctx)
		if err != nil && ctx.Err() == nil {
			r.cfg.Logger.WarnContext(ctx, "event relay pass failed", "error", err.Error())
		}
		if time.Since(lastPrune) > time.Minute {
			lastPrune = time.Now()
			if _, err := r.Prune(ctx); err != nil && ctx.Err() == nil {
				r.cfg.Logger.WarnContext(ctx, "event prune failed", "error", err.Error())
			}
		}
		if n > 0 && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(r.cfg.Interval):
		}
	}
	return nil
}

// Ensure creates the progress rows of configured sinks that have none (a
// new sink starts at the beginning of the retained outbox).
func (r *Relay) Ensure(ctx context.Context) error {
	if len(r.names) == 0 || r.ensured.Load() {
		return nil
	}
	if err := r.q.EventSinkEnsure(ctx, r.pool, db.EventSinkEnsureParams{Names: r.names, Now: r.cfg.Now()}); err != nil {
		return fmt.Errorf("eventrelay: create sink progress: %w", err)
	}
	r.ensured.Store(true)
	return nil
}

// Pass claims the sinks no other relay holds, delivers one batch to each
// (queued replays first) and releases them. It returns how many events it
// moved past (delivered, filtered out or parked).
func (r *Relay) Pass(ctx context.Context) (int, error) {
	if len(r.names) == 0 {
		return 0, nil
	}
	if err := r.Ensure(ctx); err != nil {
		return 0, err
	}
	held, err := r.q.EventSinkClaim(ctx, r.pool, db.EventSinkClaimParams{Names: r.names, Lease: r.cfg.Lease, Now: r.cfg.Now()})
	if err != nil {
		return 0, fmt.Errorf("eventrelay: claim sinks: %w", err)
	}
	total := 0
	var errs []error
	for _, row := range held {
		n, err := r.serve(ctx, r.sinks[row.Name], row)
		total += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(held) > 0 && r.metrics != nil && time.Since(time.Unix(0, r.statusAt.Load())) >= statusEvery {
		if _, err := r.Status(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}

// holding is a sink this relay holds: the exact lease its SQL names.
type holding struct {
	sink SinkConfig
	row  db.UploadedFileEventSink
}

// serve delivers one batch to a held sink: replays, then the events after
// its cursor; then releases it (or leaves it backing off after a failure).
func (r *Relay) serve(ctx context.Context, sc SinkConfig, row db.UploadedFileEventSink) (int, error) {
	h := &holding{sink: sc, row: row}
	dctx, cancel := context.WithTimeout(ctx, r.cfg.Lease*2/3)
	defer cancel()
	failed, err := r.replays(dctx, h)
	if err != nil || failed {
		return 0, err
	}
	n, failed, err := r.batch(dctx, h)
	if err != nil || failed {
		return n, err
	}
	if err := r.q.EventSinkRelease(ctx, r.pool, db.EventSinkReleaseParams{Name: sc.Name, Held: *h.row.LeaseUntil, Now: r.cfg.Now()}); err != nil {
		return n, fmt.Errorf("eventrelay: release sink %s: %w", sc.Name, err)
	}
	return n, nil
}

// InFlightLimiter is implemented by a sink whose deliveries are
// acknowledged one request at a time (a webhook): the relay hands it at
// most MaxInFlight events at once and moves the cursor past each
// acknowledged group before it sends the next, so a relay killed mid-batch
// sends again only what was in flight. A sink without it (JetStream, which
// drops redeliveries by message id) gets the whole batch.
type InFlightLimiter interface {
	MaxInFlight() int
}

// batch delivers the events after the held sink's cursor, in groups of
// the sink's MaxInFlight, advancing the cursor after each. It reports
// failed when a delivery failed (the sink is then left backing off, or the
// event parked and the rest left to the next pass). A pass that runs out
// of its time (the lease) while a slow receiver still answers is not a
// failure: what was acknowledged stays acknowledged and the next pass goes
// on.
func (r *Relay) batch(ctx context.Context, h *holding) (n int, failed bool, err error) {
	rows, err := r.q.EventBatchAfter(ctx, r.pool, db.EventBatchAfterParams{
		AfterTx: h.row.AfterTx, AfterSeq: h.row.AfterSeq, Max: int32(r.cfg.Batch),
	})
	if err != nil {
		return 0, false, fmt.Errorf("eventrelay: read outbox: %w", err)
	}
	if len(rows) == 0 {
		return 0, false, nil
	}
	events := make([]Event, 0, len(rows))
	for _, row := range rows {
		if len(h.sink.Types) > 0 && !slices.Contains(h.sink.Types, row.Type) {
			continue // filtered out: passed with the delivered ones
		}
		e, err := NewEvent(r.cfg.Source, row)
		if err != nil {
			return 0, false, err
		}
		events = append(events, e)
	}
	group := len(events)
	if l, ok := h.sink.Sink.(InFlightLimiter); ok && l.MaxInFlight() > 0 {
		group = l.MaxInFlight()
	}
	delivered := 0
	var derr error
	for delivered < len(events) && ctx.Err() == nil {
		start, end := delivered, min(delivered+group, len(events))
		k, err := r.deliver(ctx, h, events[start:end])
		r.metrics.delivered(h.sink.Name, k)
		delivered += k
		if err := r.advance(ctx, h, rows, events, delivered); err != nil {
			return 0, false, err
		}
		if k < end-start {
			derr = err
			break
		}
	}
	if len(events) == 0 { // every row filtered out: passed all the same
		if err := r.advance(ctx, h, rows, events, 0); err != nil {
			return 0, false, err
		}
	}
	passed := len(rows)
	if delivered < len(events) {
		passed = slices.IndexFunc(rows, func(x db.UploadedFileEvent) bool { return x.Seq == events[delivered].Seq })
	}
	if delivered == len(events) {
		return passed, false, nil
	}
	if derr == nil {
		// The pass ran out of its time between two groups: not the
		// receiver's failure; the next pass goes on.
		return passed, false, nil
	}
	return passed + r.failed(ctx, h, events[delivered], derr), true, nil
}

// deliver hands one group to the sink. The group runs to its end even when
// the pass's time (ctx) runs out meanwhile -- cutting a request the
// receiver is answering would only send it again -- bounded by a third of
// the lease (renewed by the last advance), so the relay never delivers
// past its lease; a relay that is stopping starts no new group.
func (r *Relay) deliver(ctx context.Context, h *holding, events []Event) (int, error) {
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.Lease/3)
	defer cancel()
	return h.sink.Sink.Deliver(gctx, events)
}

// advance moves the held sink's cursor past the rows before the first
// undelivered event -- events[delivered], or past every row when all were
// delivered -- and renews its lease. Nothing to pass: nothing is written.
func (r *Relay) advance(ctx context.Context, h *holding, rows []db.UploadedFileEvent, events []Event, delivered int) error {
	last := len(rows) - 1
	if delivered < len(events) {
		last = slices.IndexFunc(rows, func(x db.UploadedFileEvent) bool { return x.Seq == events[delivered].Seq }) - 1
	}
	if last < 0 || (rows[last].Tx == h.row.AfterTx && rows[last].Seq == h.row.AfterSeq) {
		return nil
	}
	row, err := r.q.EventSinkAdvance(context.WithoutCancel(ctx), r.pool, db.EventSinkAdvanceParams{
		Name: h.sink.Name, Held: *h.row.LeaseUntil, AfterTx: rows[last].Tx, AfterSeq: rows[last].Seq, Lease: r.cfg.Lease, Now: r.cfg.Now(),
	})
	if err != nil {
		return fmt.Errorf("eventrelay: advance sink %s (lease lost?): %w", h.sink.Name, err)
	}
	h.row = row
	return nil
}

// failed records a failed delivery of the head event e: parked (and passed)
// at the sink's MaxAttempts, otherwise the sink backs off. It returns 1
// when the event was parked.
func (r *Relay) failed(ctx context.Context, h *holding, e Event, cause error) int {
	ctx = context.WithoutCancel(ctx)
	reason := Reason(cause)
	r.metrics.failure(h.sink.Name)
	attempts := int(h.row.Attempts) + 1
	if attempts >= h.sink.MaxAttempts {
		r.cfg.Logger.WarnContext(ctx, "event parked", "sink", h.sink.Name, "event_id", e.ID, "type", e.Type, "attempts", attempts, "error", reason)
		if _, err := r.q.EventPark(ctx, r.pool, db.EventParkParams{
			Name: h.sink.Name, Held: *h.row.LeaseUntil, EventTx: e.Tx, EventSeq: e.Seq, Attempts: int32(attempts), LastError: reason, Now: r.cfg.Now(),
		}); err != nil {
			r.cfg.Logger.WarnContext(ctx, "park event failed", "sink", h.sink.Name, "error", err.Error())
			return 0
		}
		r.metrics.parked(h.sink.Name)
		r.backoff(ctx, h, 0, 0, reason)
		return 1
	}
	r.cfg.Logger.WarnContext(ctx, "event delivery failed", "sink", h.sink.Name, "event_id", e.ID, "type", e.Type, "attempts", attempts, "error", reason)
	r.backoff(ctx, h, 1, h.sink.delay(attempts), reason)
	return 0
}

// backoff frees the held sink until now + d, counting add more attempts.
func (r *Relay) backoff(ctx context.Context, h *holding, add int32, d time.Duration, reason string) {
	if _, err := r.q.EventSinkFail(ctx, r.pool, db.EventSinkFailParams{
		Name: h.sink.Name, Held: *h.row.LeaseUntil, AddAttempts: add, Backoff: d, LastError: reason, Now: r.cfg.Now(),
	}); err != nil {
		r.cfg.Logger.WarnContext(ctx, "record delivery failure failed", "sink", h.sink.Name, "error", err.Error())
	}
}

// delay is the backoff before attempt n+1: Backoff doubled per attempt up
// to MaxBackoff, with full jitter (uniform in [d/2, d]).
func (s SinkConfig) delay(attempts int) time.Duration {
	d := s.Backoff
	for range attempts - 1 {
		if d >= s.MaxBackoff/2 {
			d = s.MaxBackoff
			break
		}
		d *= 2
	}
	d = min(d, s.MaxBackoff)
	return d/2 + rand.N(d/2+1)
}

// replays delivers the events queued for this sink by `events replay`,
// one at a time. failed: one failed and the sink now backs off.
func (r *Relay) replays(ctx context.Context, h *holding) (failed bool, err error) {
	rows, err := r.q.EventReplayBatch(ctx, r.pool, db.EventReplayBatchParams{Name: h.sink.Name, Max: int32(r.cfg.Batch)})
	if err != nil {
		return false, fmt.Errorf("eventrelay: read replays: %w", err)
	}
	for _, row := range rows {
		e, err := NewEvent(r.cfg.Source, row.UploadedFileEvent)
		if err != nil {
			return false, err
		}
		n, derr := h.sink.Sink.Deliver(ctx, []Event{e})
		if n == 1 {
			r.metrics.delivered(h.sink.Name, 1)
			if _, err := r.q.EventReplayDone(context.WithoutCancel(ctx), r.pool, db.EventReplayDoneParams{Name: h.sink.Name, EventSeq: e.Seq, Held: *h.row.LeaseUntil}); err != nil {
				return false, fmt.Errorf("eventrelay: settle replay: %w", err)
			}
			continue
		}
		if derr == nil {
			derr = context.DeadlineExceeded
		}
		reason := Reason(derr)
		r.metrics.failure(h.sink.Name)
		attempts, err := r.q.EventReplayFail(context.WithoutCancel(ctx), r.pool, db.EventReplayFailParams{
			Name: h.sink.Name, EventSeq: e.Seq, MaxAttempts: int32(h.sink.MaxAttempts), LastError: reason, Now: r.cfg.Now(),
		})
		if err != nil && !errors.Is(err, db.ErrNoRows) {
			return false, fmt.Errorf("eventrelay: record replay failure: %w", err)
		}
		r.backoff(context.WithoutCancel(ctx), h, 0, h.sink.delay(max(int(attempts), 1)), reason)
		return true, nil
	}
	return false, nil
}

// Prune deletes events older than Retention that every configured sink has
// passed (and none holds parked or queued for a replay), in batches, and
// returns how many it deleted.
func (r *Relay) Prune(ctx context.Context) (int64, error) {
	if r.cfg.Retention < 0 {
		return 0, nil
	}
	// A configured sink without a progress row has passed nothing yet.
	if err := r.Ensure(ctx); err != nil {
		return 0, err
	}
	now := time.Now()
	if t := r.cfg.Now(); t != nil {
		now = *t
	}
	var total int64
	for {
		n, err := r.q.EventPrune(ctx, r.pool, db.EventPruneParams{Cutoff: now.Add(-r.cfg.Retention), Names: r.names, Max: 1000})
		total += n
		if err != nil {
			return total, fmt.Errorf("eventrelay: prune: %w", err)
		}
		if n < 1000 {
			return total, nil
		}
	}
}

// Status reads the configured sinks' progress and sets the backlog
// gauges.
func (r *Relay) Status(ctx context.Context) ([]db.EventSinkStatusRow, error) {
	rows, err := r.q.EventSinkStatus(ctx, r.pool, db.EventSinkStatusParams{Names: r.names, Now: r.cfg.Now()})
	if err != nil {
		return nil, fmt.Errorf("eventrelay: sink status: %w", err)
	}
	now := time.Now()
	r.statusAt.Store(now.UnixNano())
	if t := r.cfg.Now(); t != nil {
		now = *t
	}
	for _, row := range rows {
		r.metrics.backlog(row.Name, row.Depth, row.Oldest, now)
	}
	return rows, nil
}
