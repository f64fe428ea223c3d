package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/uploadedfile/uploadedfile/internal/adapter/tracks"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
	"github.com/uploadedfile/uploadedfile/service"
)

// A simulated day of sweep work: the behaviour bounds a run of a
// track to ten batches, so what a day can take is fixed by how often the
// tracks run. The day: uploads S3 direct uploads complete, evenly spread,
// each keeping its staging copy until its target can no longer write
// (uploadUrlTtlSeconds plus the 15-minute skew margin), and as many
// deletions, of which one in a hundred fails its storage call inline and
// is left to the pending track's retries. Rows are dated across the day;
// every object the sweeps delete is real. The tracks run at their cron
// times on a pinned clock, each run exactly as serve runs it; at the end
// of the day the backlog (what a run would take if it ran now) is read
// from the same count the backlog gauge shows.

// daySchedule is a pair of cron expressions for the two tracks.
type daySchedule struct {
	label              string
	temporary, pending string
}

// dayWork sizes the day: rows of each kind and the batch size, scaled
// together (1:1 is the 100k uploads with cleanupBatchSize 100;
// the quick set runs 1:10, whose backlog has the same shape at a tenth of
// the rows: a run takes ten batches either way).
type dayWork struct {
	uploads, failedDeletions, batch int
}

const (
	dayStagingDelay = 10*time.Minute + 15*time.Minute // the default target lifetime plus the skew margin
	dayRetryDelay   = 5 * time.Minute                 // a failed inline deletion's claim lease
)

func benchSweepDay(ctx context.Context, rep *report, gw *s3test.Server, full bool) error {
	w := dayWork{uploads: 10_000, failedDeletions: 100, batch: 10}
	scale := "1:10 (10k uploads, cleanupBatchSize 10)"
	if full {
		w, scale = dayWork{uploads: 100_000, failedDeletions: 1_000, batch: 100}, "1:1 (100k uploads, cleanupBatchSize 100)"
	}
	schedules := []daySchedule{
		{label: "default schedules (temporary */15, pending daily 03:00)", temporary: service.DefaultTemporaryCleanupInterval, pending: service.DefaultPendingCleanupInterval},
		{label: "advised for 100k a day (temporary */5, pending hourly)", temporary: "*/5 * * * *", pending: "0 * * * *"},
	}
	for i, sch := range schedules {
		d, err := simulateDay(ctx, gw, w, sch, fmt.Sprintf("day-%d", i))
		if err != nil {
			return fmt.Errorf("%s: %w", sch.label, err)
		}
		target, ok := "", true
		if i > 0 {
			target, ok = "0 left", d.staging == 0 && d.retries == 0
		}
		rep.add(fmt.Sprintf("a simulated day of 100k S3 direct uploads and 100k deletions (1 %% failing inline), scaled %s, %s: eligible rows each track's last run of the day left", scale, sch.label),
			fmt.Sprintf("%d staging objects (temporary, %d runs), %d deletion retries (pending, %d runs); at midnight %d and %d waiting, of %d and %d due in the day",
				d.staging, d.runs[tracks.TrackTemporary], d.retries, d.runs[tracks.TrackPending], d.midnightStaging, d.midnightRetries, d.dueStaging, d.dueRetries), target, ok)
	}
	return nil
}

// dayResult is what a simulated day left: the eligible rows of each
// track's own kind after its last run and at midnight, the runs, and the
// work that came due within the day.
type dayResult struct {
	staging, retries                 int64
	midnightStaging, midnightRetries int64
	dueStaging, dueRetries           int64
	runs                             map[string]int
}

// simulateDay seeds a fresh database and bucket with w's day, runs the
// tracks at sch's times through it, and returns what each track's last
// run left; the objects left in the bucket must be exactly those rows
// still point at.
func simulateDay(ctx context.Context, gw *s3test.Server, w dayWork, sch daySchedule, bucket string) (dayResult, error) {
	d := dayResult{runs: map[string]int{}}
	if _, err := gw.Client().CreateBucket(ctx, &s3CreateBucket{Bucket: &bucket}); err != nil {
		return d, err
	}
	dsn, drop, err := createDatabase(ctx, pgtest.ServerURL())
	if err != nil {
		return d, err
	}
	defer drop()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return d, err
	}
	defer pool.Close()
	day := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour) // a day of its own, after any real row
	if err := seedDay(ctx, pool, gw, bucket, w, day); err != nil {
		return d, err
	}
	end := day.Add(24 * time.Hour)
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE staging_cleanup_at <= $1), count(*) FILTER (WHERE deletion_pending_at <= $1) FROM uploaded_file`, end).
		Scan(&d.dueStaging, &d.dueRetries); err != nil {
		return d, err
	}
	clock := &simClock{t: day}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := service.New(ctx, service.Config{
		Driver: service.DriverS3, Bucket: bucket, Endpoint: gw.Endpoint, Region: "us-east-1", ForcePathStyle: true,
		AccessID: gw.AccessKey, AccessKey: gw.SecretKey, CleanupBatchSize: w.batch,
	}, pool, service.WithClock(clock.now), service.WithLogger(quiet))
	if err != nil {
		return d, err
	}
	defer func() { _ = svc.Close() }()
	if err := runDay(ctx, svc, pool, clock, sch, day, &d); err != nil {
		return d, err
	}
	clock.set(end)
	left, err := svc.UnsafeSystemSweepBacklog(ctx)
	if err != nil {
		return d, err
	}
	d.midnightStaging, d.midnightRetries = left[service.BacklogStagingObjects], left[service.BacklogDeletionRetries]
	return d, objectsMatchRows(ctx, gw, bucket, pool)
}

// runDay runs the tracks at sch's times within day on the pinned clock,
// reading after each run the backlog of the track's own kind from the
// gauge the run itself sets (uploadedfile_sweep_backlog, what an operator
// watches).
func runDay(ctx context.Context, svc *service.Service, pool *pgxpool.Pool, clock *simClock, sch daySchedule, day time.Time, d *dayResult) error {
	reg := prometheus.NewRegistry()
	runner := tracks.New(svc, pool, tracks.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registerer: reg})
	runner.SetClock(clock.now)
	runs, err := dayRuns(sch, day)
	if err != nil {
		return err
	}
	for _, r := range runs {
		clock.set(r.at)
		if _, err := runner.Run(ctx, r.track); err != nil {
			return fmt.Errorf("%s at %s: %w", r.track, r.at.Format("15:04"), err)
		}
		d.runs[r.track]++
		left, err := backlogGauge(reg)
		if err != nil {
			return err
		}
		switch r.track {
		case tracks.TrackTemporary:
			d.staging = left[service.BacklogStagingObjects]
		case tracks.TrackPending:
			d.retries = left[service.BacklogDeletionRetries]
		}
	}
	return nil
}

// backlogGauge reads uploadedfile_sweep_backlog by kind from reg; a run
// that set none fails (the row would read 0).
func backlogGauge(reg *prometheus.Registry) (map[string]int64, error) {
	families, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	for _, f := range families {
		if f.GetName() != "uploadedfile_sweep_backlog" {
			continue
		}
		left := map[string]int64{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" {
					left[l.GetValue()] = int64(m.GetGauge().GetValue())
				}
			}
		}
		return left, nil
	}
	return nil, errors.New("the track's run set no uploadedfile_sweep_backlog gauge")
}

// objectsMatchRows: the bucket holds one object per staging copy and per
// unfinished deletion the rows still name -- the sweeps deleted the
// objects whose rows they settled, and nothing else.
func objectsMatchRows(ctx context.Context, gw *s3test.Server, bucket string, pool *pgxpool.Pool) error {
	held, err := bucketBytes(ctx, gw, bucket) // one byte an object
	if err != nil {
		return err
	}
	var named int64
	if err := pool.QueryRow(ctx, `SELECT count(pending_key) + count(*) FILTER (WHERE deletion_pending_at IS NOT NULL) FROM uploaded_file`).Scan(&named); err != nil {
		return err
	}
	if held != named {
		return fmt.Errorf("the bucket holds %d objects, the rows name %d", held, named)
	}
	return nil
}

// seedDay inserts w's rows dated within day: the completed direct uploads
// with their staging copies due, and the failed deletions with their
// claims elapsed at the time of the failure plus the lease; then the
// objects the rows name (one byte each).
func seedDay(ctx context.Context, pool *pgxpool.Pool, gw *s3test.Server, bucket string, w dayWork, day time.Time) error {
	step := 24 * time.Hour / time.Duration(w.uploads)
	_, err := pool.Exec(ctx, `
INSERT INTO uploaded_file (id, tenant_code, user_id, key, pending_key, cdn, original_name, size_bytes, content_type, status,
                           created_at, completed_at, upload_expires_at, staging_cleanup_at)
SELECT gen_random_uuid(), 'tenant-' || (i % 50), 'user-' || (i % 500), 'core/t/day/' || i || '.csv', 'core/t/staging/' || i || '.csv',
       'urn:bench:' || i, 'f.csv', 1, 'text/csv', 'ready',
       $2::timestamptz + (i * $3::interval), $2::timestamptz + (i * $3::interval), $2::timestamptz + (i * $3::interval) + interval '10 minutes',
       $2::timestamptz + (i * $3::interval) + $4::interval
FROM generate_series(0, $1::integer - 1) AS i`, w.uploads, day, step, dayStagingDelay)
	if err != nil {
		return fmt.Errorf("seed uploads: %w", err)
	}
	failStep := 24 * time.Hour / time.Duration(w.failedDeletions)
	_, err = pool.Exec(ctx, `
INSERT INTO uploaded_file (id, tenant_code, user_id, key, cdn, original_name, size_bytes, content_type, status,
                           created_at, completed_at, used_at, deletion_pending_at)
SELECT gen_random_uuid(), 'tenant-' || (i % 50), 'user-' || (i % 500), 'core/t/deleted/' || i || '.csv', 'urn:bench:d' || i, 'f.csv', 1, 'text/csv', 'ready',
       $2::timestamptz - interval '2 days', $2::timestamptz - interval '2 days', $2::timestamptz - interval '1 day',
       $2::timestamptz + (i * $3::interval) + $4::interval
FROM generate_series(0, $1::integer - 1) AS i`, w.failedDeletions, day, failStep, dayRetryDelay)
	if err != nil {
		return fmt.Errorf("seed failed deletions: %w", err)
	}
	rows, err := pool.Query(ctx, `SELECT pending_key FROM uploaded_file WHERE pending_key IS NOT NULL
		UNION ALL SELECT key FROM uploaded_file WHERE deletion_pending_at IS NOT NULL`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return err
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return putObjects(ctx, gw.Client(), bucket, "x", func(each func(string) error) error {
		for _, k := range keys {
			if err := each(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// dayRun is one run of a track at a time of the day.
type dayRun struct {
	at    time.Time
	track string
}

// dayRuns lists the runs sch makes within day, in time order (the pending
// track first when both are due at once, as either order would do).
func dayRuns(sch daySchedule, day time.Time) ([]dayRun, error) {
	parser := service.ScheduleParser()
	var runs []dayRun
	for _, t := range []struct{ track, spec string }{{tracks.TrackPending, sch.pending}, {tracks.TrackTemporary, sch.temporary}} {
		s, err := parser.Parse(t.spec)
		if err != nil {
			return nil, err
		}
		for at := s.Next(day.Add(-time.Second)); at.Before(day.Add(24 * time.Hour)); at = s.Next(at) {
			runs = append(runs, dayRun{at: at, track: t.track})
		}
	}
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].at.Before(runs[j].at) })
	return runs, nil
}

// simClock is the simulation's pinned time.
type simClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *simClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *simClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}
