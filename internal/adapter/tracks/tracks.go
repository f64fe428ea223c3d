// Package tracks schedules the service's sweep operations (the
// UnsafeSystem* and Cleanup* methods of service, which do the work): the
// spec's two cron tracks -- pending and temporary -- and reconcile, so that
// any number of replicas can run them side by side. It is an adapter: it
// calls service, nothing in service calls it. The `uploadedfile
// maintenance` commands and `serve` drive it.
//
// Each run of a track takes a PostgreSQL session advisory lock first
// (pg_try_advisory_lock on one connection held for the run): one replica
// runs a track at a time, and a replica that dies releases the lock with
// its session. Within a run the sweeps claim rows by CAS anyway, so even
// two runs at once would not process a row twice.
//
//   - pending (pendingCleanupInterval, default "0 3 * * *"): up to ten
//     batches of at most cleanupBatchSize rows of expired direct uploads,
//     deletion retries and retained staging objects, then the age purge of
//     unused legacy rows when cleanupAfterDays is positive.
//   - temporary (temporaryCleanupInterval, default "*/15 * * * *"): up to ten
//     batches of temporary files past their expiry, abandoned uploads and
//     due S3 staging copies; then expired idempotency keys.
//   - reconcile (reconcileInterval, off by default): the store's listing
//     merge-joined with the rows; findings are logged and counted, and with
//     reconcileRepair orphans older than reconcileGrace are deleted through
//     durable claims.
//
// A row whose storage call fails is released one minute ahead, out of the
// eligible window, so later rows advance in the same run.
package tracks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/robfig/cron/v3"
	"go.opentelemetry.io/otel/trace"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/service"
)

// Track names.
const (
	TrackPending   = "pending"
	TrackTemporary = "temporary"
	TrackReconcile = "reconcile"
)

// maxBatches bounds one run of a track.
const maxBatches = 10

// lockKeys are the advisory lock keys of the tracks ("uploadedfile" + track).
var lockKeys = map[string]int64{TrackPending: 0x75664d5f70656e64, TrackTemporary: 0x75664d5f74656d70, TrackReconcile: 0x75664d5f7265636f}

// Sweeper is what a track runs: the service's maintenance operations.
type Sweeper interface {
	CleanupPendingUploads(ctx context.Context, limit int) (int, error)
	CleanupExpiredTemporaryFiles(ctx context.Context, now *time.Time, limit int) (int, error)
	UnsafeSystemPurgeUnusedBatch(ctx context.Context, cutoff time.Time, limit int) (int, error)
	UnsafeSystemExpireIdempotencyKeys(ctx context.Context, max int) (int, error)
	ReleaseAbandonedUploads(ctx context.Context, limit int) (int, error)
	UnsafeSystemReconcile(ctx context.Context, opts service.ReconcileOptions, emit func(service.Finding) error) (service.ReconcileCounts, error)
	UnsafeSystemSweepBacklog(ctx context.Context) (map[string]int64, error)
	UnsafeSystemCleanupCompletedStaging(ctx context.Context, limit int) (int, error)
	EffectiveConfig() service.Config
}

// trackBacklog names the backlog kinds each track works off.
var trackBacklog = map[string][]string{
	TrackPending: {service.BacklogExpiredUploads, service.BacklogDeletionRetries, service.BacklogStagingObjects,
		service.BacklogVariants, service.BacklogOrphanClaims},
	TrackTemporary: {service.BacklogExpiredTemporary, service.BacklogExpiredUploads, service.BacklogStagingObjects, service.BacklogIdempotencyKeys},
}

// Runner runs the tracks.
type Runner struct {
	svc     Sweeper
	pool    *db.Pool
	log     *slog.Logger
	metrics *metrics
	now     func() time.Time
	tracer  trace.Tracer // nil: no spans
}

// Result is what one run of a track did.
type Result struct {
	Track    string
	Ran      bool // false: another replica holds the track's lock
	Examined int64
	Done     int64
	Failed   int64
	Duration time.Duration
}

// Options are what a runner reports through: Logger (nil:
// slog.Default()), Registerer for the sweep metrics (nil: none) and
// TracerProvider for a span per run of a track, "sweep <track>", with the
// run's SQL and storage spans under it (nil: none).
type Options struct {
	Logger         *slog.Logger
	Registerer     prometheus.Registerer
	TracerProvider trace.TracerProvider
}

// New returns a runner of svc's tracks on pool.
func New(svc Sweeper, pool *db.Pool, o Options) *Runner {
	r := &Runner{svc: svc, pool: pool, log: cmp.Or(o.Logger, slog.Default()), metrics: newMetrics(o.Registerer), now: time.Now}
	if o.TracerProvider != nil {
		r.tracer = o.TracerProvider.Tracer("github.com/uploadedfile/uploadedfile/internal/adapter/tracks")
	}
	return r
}

// SetClock replaces the wall clock the runner uses for durations and the
// purge cutoff (tests that pin time).
func (r *Runner) SetClock(now func() time.Time) { r.now = now }

// Run runs one track once, if no other replica is running it.
func (r *Runner) Run(ctx context.Context, track string) (Result, error) {
	// Every statement of the run goes to the sweeps' pool (where the
	// service runs on db.Route): a run never takes a request's connection.
	ctx = db.ForSweeps(ctx)
	if r.tracer != nil {
		var span trace.Span
		ctx, span = r.tracer.Start(ctx, "sweep "+track)
		defer span.End()
	}
	key, ok := lockKeys[track]
	if !ok {
		return Result{}, fmt.Errorf("maintenance: unknown track %q", track)
	}
	res := Result{Track: track}
	release, locked, err := db.HoldTrackLock(ctx, r.pool, key)
	if err != nil {
		return res, fmt.Errorf("maintenance: %w", err)
	}
	if !locked {
		r.metrics.run(track, "skipped")
		r.log.InfoContext(ctx, "sweep skipped: another replica holds the track", "track", track)
		return res, nil
	}
	defer release()

	res.Ran = true
	start := r.now()
	var st service.SweepStats
	sctx := service.WithSweepStats(ctx, &st)
	switch track {
	case TrackPending:
		err = r.pending(sctx, &st)
	case TrackTemporary:
		err = r.temporary(sctx, &st)
	case TrackReconcile:
		err = r.reconcile(sctx, &st)
	}
	res.Duration = r.now().Sub(start)
	res.Examined, res.Done, res.Failed = st.Examined.Load(), st.Done.Load(), st.Failed.Load()
	r.metrics.observe(res, err)
	attrs := []any{"track", track, "examined", res.Examined, "done", res.Done, "failed", res.Failed, "duration", res.Duration.String()}
	if err != nil {
		r.log.ErrorContext(ctx, "sweep failed", append(attrs, "error", err.Error())...)
		return res, err
	}
	r.log.InfoContext(ctx, "sweep finished", attrs...)
	r.backlog(ctx, track)
	return res, nil
}

// backlog counts what the sweeps have left after a run of track, sets the
// backlog gauges, and warns when track's own kinds still have eligible
// rows: its ten batches were not enough, and it falls behind unless it
// runs more often. A failed count is logged and changes nothing.
func (r *Runner) backlog(ctx context.Context, track string) {
	kinds, ok := trackBacklog[track]
	if !ok {
		return
	}
	left, ok := r.countBacklog(ctx, track)
	if !ok {
		return
	}
	var attrs []any
	for _, kind := range kinds {
		if n := left[kind]; n > 0 {
			attrs = append(attrs, kind, n)
		}
	}
	if len(attrs) > 0 {
		r.log.WarnContext(ctx, "sweep left eligible rows: run the track more often (docs/operations.md, Sizing the sweeps)",
			append([]any{"track", track}, attrs...)...)
	}
}

// drain runs batches of at most batchSize rows until a batch claims
// nothing or the run has examined maxBatches * batchSize rows: the bound is
// on the whole run, whatever the batches did. batch gets the size of the
// batch to run; st counts what the batches examined.
func drain(ctx context.Context, st *service.SweepStats, budget *int64, batchSize int, batch func(ctx context.Context, limit int) error) error {
	for *budget > 0 {
		before := st.Examined.Load()
		if err := batch(ctx, int(min(*budget, int64(batchSize)))); err != nil {
			return err
		}
		examined := st.Examined.Load() - before
		*budget -= examined
		if examined == 0 {
			return nil
		}
	}
	return nil
}

// pending runs the pending track: expired direct uploads, deletion retries
// and retained staging objects, then -- only with positive cleanupAfterDays
// and only with what is left of the run's ten batches -- the age purge.
func (r *Runner) pending(ctx context.Context, st *service.SweepStats) error {
	cfg := r.svc.EffectiveConfig()
	budget := int64(maxBatches * cfg.CleanupBatchSize)
	err := drain(ctx, st, &budget, cfg.CleanupBatchSize, func(ctx context.Context, limit int) error {
		_, err := r.svc.CleanupPendingUploads(ctx, limit)
		return err
	})
	if err != nil || cfg.CleanupAfterDays <= 0 {
		return err
	}
	cutoff := r.now().Add(-time.Duration(cfg.CleanupAfterDays) * 24 * time.Hour)
	return drain(ctx, st, &budget, cfg.CleanupBatchSize, func(ctx context.Context, limit int) error {
		_, err := r.svc.UnsafeSystemPurgeUnusedBatch(ctx, cutoff, limit)
		return err
	})
}

// temporary runs the temporary track: expired temporary files, abandoned
// direct uploads (their quota given back: a dead client's upload never
// waits for the daily pending track) and the S3 staging copies of
// completed uploads whose target can no longer write (so a ready file is
// held once, not twice until the daily pending track), within the run's
// ten batches; then idempotency keys past their 24 hours (up to
// maxBatches batches of their own: a key is a small row, and no file
// depends on it).
func (r *Runner) temporary(ctx context.Context, st *service.SweepStats) error {
	cfg := r.svc.EffectiveConfig()
	budget := int64(maxBatches * cfg.CleanupBatchSize)
	err := drain(ctx, st, &budget, cfg.CleanupBatchSize, func(ctx context.Context, limit int) error {
		_, err := r.svc.CleanupExpiredTemporaryFiles(ctx, nil, limit)
		return err
	})
	if err != nil {
		return err
	}
	err = drain(ctx, st, &budget, cfg.CleanupBatchSize, func(ctx context.Context, limit int) error {
		_, err := r.svc.ReleaseAbandonedUploads(ctx, limit)
		return err
	})
	if err != nil {
		return err
	}
	err = drain(ctx, st, &budget, cfg.CleanupBatchSize, func(ctx context.Context, limit int) error {
		_, err := r.svc.UnsafeSystemCleanupCompletedStaging(ctx, limit)
		return err
	})
	if err != nil {
		return err
	}
	for range maxBatches {
		n, err := r.svc.UnsafeSystemExpireIdempotencyKeys(ctx, cfg.CleanupBatchSize)
		st.Examined.Add(int64(n))
		st.Done.Add(int64(n))
		if err != nil || n < cfg.CleanupBatchSize {
			return err
		}
	}
	return nil
}

// reconcile runs the reconcile track: every finding is logged (an
// operator's report, so the storage key is in it) and counted by kind;
// examined counts the objects listed, done the objects repaired.
func (r *Runner) reconcile(ctx context.Context, st *service.SweepStats) error {
	cfg := r.svc.EffectiveConfig()
	counts, err := r.svc.UnsafeSystemReconcile(ctx, service.ReconcileOptions{Grace: cfg.ReconcileGrace, Repair: cfg.ReconcileRepair},
		func(f service.Finding) error {
			r.metrics.finding(f.Kind)
			r.log.WarnContext(ctx, "reconcile finding", "kind", string(f.Kind), "key", f.Key, "size", f.Size, "repaired", f.Repaired, "detail", f.Detail)
			return nil
		})
	st.Examined.Add(counts.Objects)
	st.Done.Add(counts.Repaired)
	st.Failed.Add(counts.RepairFailed)
	if err == nil && counts.Interrupted {
		err = ctx.Err() // stopped part way (a shutdown): not a run that ended
	}
	return err
}

// countBacklog counts what every kind of sweep work would take now and
// sets the backlog gauges; a failed count is logged (false).
func (r *Runner) countBacklog(ctx context.Context, track string) (map[string]int64, bool) {
	left, err := r.svc.UnsafeSystemSweepBacklog(ctx)
	if err != nil {
		r.log.WarnContext(ctx, "sweep backlog not counted", "track", track, "error", err.Error())
		return nil, false
	}
	for kind, n := range left {
		r.metrics.backlog.WithLabelValues(kind).Set(float64(n))
	}
	return left, true
}

// Schedule runs the tracks on their cron expressions until ctx ends. A run
// still in progress when its next time comes is not started twice.
func (r *Runner) Schedule(ctx context.Context) error {
	cfg := r.svc.EffectiveConfig()
	c := cron.New(cron.WithParser(service.ScheduleParser()), cron.WithChain(cron.SkipIfStillRunning(cron.DiscardLogger)))
	tracks := map[string]string{TrackPending: cfg.PendingCleanupInterval, TrackTemporary: cfg.TemporaryCleanupInterval}
	if cfg.ReconcileInterval != "" {
		tracks[TrackReconcile] = cfg.ReconcileInterval
	}
	for track, spec := range tracks {
		if _, err := c.AddFunc(spec, func() {
			if _, err := r.Run(ctx, track); err != nil && !errors.Is(err, context.Canceled) {
				r.log.ErrorContext(ctx, "track run failed", "track", track, "error", err.Error())
			}
		}); err != nil {
			return fmt.Errorf("maintenance: %s interval %q: %w", track, spec, err)
		}
	}
	// The backlog is counted once now, so its gauges say what waits from
	// the start -- the daily pending track may be hours away.
	r.countBacklog(db.ForSweeps(ctx), "")
	c.Start()
	<-ctx.Done()
	<-c.Stop().Done()
	return nil
}
