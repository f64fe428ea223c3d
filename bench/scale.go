package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/service"
)

// The table make bench-scale builds: 1,000 tenants, half the rows in five
// of them (a million files each at 10 million) with a hundred owners each
// (about 9,000 files an owner at 10 million, and user-0 with a tenth of
// its tenant: 100,000), the other half spread over 995 tenants of twenty
// owners; records of a handful of files; a year of creation times; states
// as a deployment holds them.
const (
	scaleChunk = 1_000_000
	scaleSmall = 100_000
)

// scaleRows fills uploaded_file with the rows lo..hi of the scale table
// ($1 lo, $2 hi, $3 now, $4 the whole table's size: creation times spread
// over a year whatever the size; $5 the pending uploads alone, or all but
// them). Kinds by (i / 100) % 100: 70 % attached
// (ready, used, on a record of about seven files), 15 % ready and unused,
// 5 % temporary (a few expired), 3 % pending direct uploads, 4 % deleted,
// 2 % under a deletion claim, 1 % quarantined.
const scaleRows = `
INSERT INTO uploaded_file (
    id, tenant_code, user_id, key, cdn, original_name, size_bytes, content_type,
    visibility, is_temporary, status, upload_pending_at, deletion_pending_at, deleted_at, expired_at,
    completed_at, used_at, module, entity, entity_id, pending_key, upload_expires_at, created_at, updated_at)
SELECT
    s.id, s.tenant, s.owner,
    'core/t-' || s.tenant || '/' || s.id || '.pdf', 'urn:uploadedfile:' || s.id, 'file-' || i || '.pdf', 1000 + i % 100000, 'application/pdf',
    'private', kind = 'temporary',
    CASE kind WHEN 'pending' THEN 'pending' WHEN 'quarantined' THEN 'quarantined' ELSE 'ready' END,
    CASE WHEN kind = 'pending' THEN s.created + interval '10 minutes' END,
    CASE WHEN kind = 'claimed' THEN $3::timestamptz + ((i % 200) - 100) * interval '1 minute' END,
    CASE WHEN kind = 'deleted' THEN $3::timestamptz - interval '1 day' END,
    CASE WHEN kind = 'temporary' THEN $3::timestamptz + ((i % 48) - 4) * interval '1 hour' END,
    CASE WHEN kind <> 'pending' THEN $3::timestamptz - interval '30 days' END,
    CASE WHEN kind = 'used' THEN $3::timestamptz - interval '20 days' END,
    CASE WHEN kind = 'used' THEN 'crm' END,
    CASE WHEN kind = 'used' THEN 'invoice' END,
    CASE WHEN kind = 'used' THEN 'r-' || (i / 50) END,
    CASE WHEN kind = 'pending' THEN 'core/_staging/t-' || s.tenant || '/' || s.id || '.pdf' END,
    CASE WHEN kind = 'pending' THEN s.created + interval '10 minutes' END,
    s.created,
    $3::timestamptz
FROM (
    -- Ids as the service makes them (time-ordered: Unix milliseconds of
    -- the creation, then random bits) and keys of its shape.
    SELECT *, encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                PLACING substring(int8send((extract(epoch FROM k.created) * 1000)::bigint) FROM 3)
                FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid AS id
    FROM (
    -- A pending direct upload was created one upload window (ten
    -- minutes) before its window ends; every other file at its place in
    -- the year, the oldest first: the rows arrive in the order a
    -- deployment makes them, and time-ordered ids fill their indexes as
    -- they would there.
    SELECT *, CASE WHEN kind = 'pending'
        THEN $3::timestamptz + ((i % 200) - 110) * interval '1 minute'
        ELSE $3::timestamptz - (1 - i::float8 / $4::float8) * interval '365 days' END AS created
FROM (
    SELECT i,
        CASE WHEN i % 100 < 50 THEN 'tenant-' || (i % 5) ELSE 'tenant-' || (5 + i % 995) END AS tenant,
        CASE WHEN i % 100 >= 50 THEN 'user-' || (i % 20) WHEN i / 5 % 10 = 0 THEN 'user-0' ELSE 'user-' || (i / 5 % 100) END AS owner,
        CASE
            WHEN (i / 100) % 100 < 70 THEN 'used'
            WHEN (i / 100) % 100 < 85 THEN 'active'
            WHEN (i / 100) % 100 < 90 THEN 'temporary'
            WHEN (i / 100) % 100 < 93 THEN 'pending'
            WHEN (i / 100) % 100 < 97 THEN 'deleted'
            WHEN (i / 100) % 100 < 99 THEN 'claimed'
            ELSE 'quarantined' END AS kind
    FROM generate_series($1::bigint, $2::bigint) AS i
    ) AS j WHERE (kind = 'pending') = $5::boolean) AS k
) AS s`

// scaleTarget is one built table with a service over it.
type scaleTarget struct {
	total int
	dsn   string
	root  string // the local driver's root
	pool  *pgxpool.Pool
	svc   *service.Service
	build time.Duration
}

// openScaleTarget creates a database, builds the scale table of total rows
// in it and opens a service over it (the local driver; callers with the
// role "auditor" get the tenant decision); closing it drops everything.
func openScaleTarget(ctx context.Context, total int) (*scaleTarget, func(), error) {
	dsn, drop, err := createDatabase(ctx, pgtest.ServerURL())
	if err != nil {
		return nil, nil, err
	}
	closers := []func(){drop}
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	t := &scaleTarget{total: total, dsn: dsn}
	start := time.Now()
	if err := buildScaleTable(ctx, dsn, total); err != nil {
		closeAll()
		return nil, nil, err
	}
	t.build = time.Since(start)
	if t.pool, err = pgxpool.New(ctx, pgtest.WithQuery(dsn, "pool_max_conns=16")); err != nil {
		closeAll()
		return nil, nil, err
	}
	closers = append(closers, t.pool.Close)
	// The service runs on serve's two pools: the requests' (generic
	// plans) and the sweeps' (a plan per run), routed as serve routes them.
	requests, err := db.OpenPoolFor(ctx, dsn, nil, db.Limits{MaxConns: 16, GenericPlans: true})
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	closers = append(closers, requests.Close)
	sweeps, err := db.OpenPoolFor(ctx, dsn, nil, db.SweepLimits)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	closers = append(closers, sweeps.Close)
	root, err := os.MkdirTemp("", "uploadedfile-scale-*")
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	closers = append(closers, func() { _ = os.RemoveAll(root) })
	t.root = root
	cfg := service.Config{Driver: service.DriverLocal, LocalRoot: root, AuthorizationPolicy: auditorsSeeTheTenant}
	if t.svc, err = service.New(ctx, cfg, db.Route(requests, sweeps), service.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))); err != nil {
		closeAll()
		return nil, nil, err
	}
	closers = append(closers, func() { _ = t.svc.Close() })
	return t, closeAll, nil
}

// auditorsSeeTheTenant: a caller with the role "auditor" reads the whole
// tenant; everyone else their own files.
func auditorsSeeTheTenant(_ context.Context, req service.AuthorizationRequest) (service.AccessDecision, error) {
	for _, r := range req.Context.Roles {
		if r == "auditor" {
			return service.DecisionTenant, nil
		}
	}
	return service.DecisionOwner, nil
}

// buildScaleTable fills the migrated database at dsn with total rows of
// the scale table, fast: the indexes that back no constraint are dropped
// first and built again after the load (as the migrations define them,
// with the machine's parallel maintenance workers), the usage rows are
// recounted from the rows, and the table is vacuumed and analyzed.
func buildScaleTable(ctx context.Context, dsn string, total int) error {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	rows, err := pool.Query(ctx, `SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index AS x JOIN pg_class AS i ON i.oid = x.indexrelid
WHERE x.indrelid = 'uploaded_file'::regclass AND NOT EXISTS (SELECT 1 FROM pg_constraint AS c WHERE c.conindid = x.indexrelid)`)
	if err != nil {
		return err
	}
	var names, defs []string
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			return err
		}
		names, defs = append(names, name), append(defs, def)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, name := range names {
		if _, err := pool.Exec(ctx, "DROP INDEX "+name); err != nil {
			return err
		}
	}
	// The pending uploads, made in the last hours, come last, as they
	// would in a deployment (each file's row is written when it is made).
	now := time.Now().UTC()
	for _, pending := range []bool{false, true} {
		for lo := 1; lo <= total; lo += scaleChunk {
			if _, err := pool.Exec(ctx, scaleRows, lo, min(lo+scaleChunk-1, total), now, total, pending); err != nil {
				return fmt.Errorf("load rows %d..: %w", lo, err)
			}
		}
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	for _, stmt := range append([]string{"SET maintenance_work_mem = '512MB'", "SET max_parallel_maintenance_workers = 2"}, defs...) {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	if _, err := db.New().UsageRecount(ctx, pool, nil); err != nil {
		return fmt.Errorf("recount the usage: %w", err)
	}
	for _, stmt := range []string{"VACUUM ANALYZE uploaded_file", "VACUUM ANALYZE uploaded_file_usage", "CHECKPOINT"} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

// benchScale is make bench-scale: the scale table built at 100k rows and
// at large rows, the service's calls timed on both (scaleOps; medians of
// rounds, past the generic-plan switch), each printed as the cost at
// large rows over the cost at 100k (goal ≤ 1.2×), then the table's and
// each index's size per million files at large rows.
func benchScale(ctx context.Context, large int, write string) error {
	rep := &report{preamble: fmt.Sprintf("Each cost is the median of %d alternating rounds per size (about 150 ms of calls each), after 20 warm-up calls.", scaleRounds)}
	var fs []*scaleFixture
	for _, total := range []int{scaleSmall, large} {
		t, closeTarget, err := openScaleTarget(ctx, total)
		if err != nil {
			return fmt.Errorf("build %d rows: %w", total, err)
		}
		defer closeTarget()
		fmt.Printf("built %d rows in %s\n", total, t.build.Round(time.Second))
		f, err := prepareScale(ctx, t)
		if err != nil {
			return fmt.Errorf("%d rows: %w", total, err)
		}
		fs = append(fs, f)
	}
	fmt.Printf("%-70s %-60s %-10s %s\n", "measurement", "figure", "target", "status")
	rep.add(fmt.Sprintf("build the table of %s files (load, indexes, usage, vacuum)", count10(large)),
		fmt.Sprintf("%s (%.0f files/s)", fs[1].t.build.Round(time.Second), float64(large)/fs[1].t.build.Seconds()), "≤ 15 min", fs[1].t.build <= 15*time.Minute)
	for _, op := range scaleOps {
		cost, err := scaleCost(fs, op)
		if err != nil {
			return err
		}
		ratio := float64(cost[1]) / float64(cost[0])
		figure := fmt.Sprintf("%.2f× (%s vs %s)", ratio, cost[1].Round(time.Microsecond), cost[0].Round(time.Microsecond))
		if op.objects > 0 {
			perSecond := func(d time.Duration) float64 { return float64(op.objects) / d.Seconds() }
			figure = fmt.Sprintf("%.2f× (%.0f vs %.0f objects/s)", ratio, perSecond(cost[1]), perSecond(cost[0]))
		}
		rep.add(fmt.Sprintf("%s: cost at %s files vs 100k", op.name, count10(large)), figure, "≤ 1.2×", ratio <= 1.2)
	}
	var blocks []string
	for _, f := range fs {
		hit, read, err := ownerPageBlocks(ctx, f)
		if err != nil {
			return err
		}
		blocks = append(blocks, fmt.Sprintf("%.0f hit + %.0f read", hit, read))
	}
	rep.add(fmt.Sprintf("a page of the owner's: blocks it touches, shared buffers hit + read, at %s vs 100k", count10(large)),
		strings.Join(blocks[1:], "")+" vs "+blocks[0], "", true)
	var plans []string
	for _, f := range fs {
		p, err := ownerListGenericPlan(ctx, f)
		if err != nil {
			return err
		}
		plans = append(plans, p)
	}
	rep.add(fmt.Sprintf("the owner's list, its generic plan at %s vs 100k", count10(large)), plans[1]+" vs "+plans[0], "", true)
	if err := scaleSizes(ctx, fs[1].t, rep); err != nil {
		return err
	}
	if err := scaleSweepCosts(ctx, fs, large, rep); err != nil {
		return err
	}
	if write != "" {
		return writeReportAt(write, "bench-scale", rep.markdown("make bench-scale"))
	}
	return nil
}

// scaleSizes reports the table's size per million files, and each
// index's, largest first, in one row.
func scaleSizes(ctx context.Context, t *scaleTarget, rep *report) error {
	millions := float64(t.total) / 1e6
	var table int64
	if err := t.pool.QueryRow(ctx, "SELECT pg_table_size('uploaded_file')").Scan(&table); err != nil {
		return err
	}
	rows, err := t.pool.Query(ctx, `SELECT i.relname, pg_relation_size(i.oid) FROM pg_index AS x JOIN pg_class AS i ON i.oid = x.indexrelid
WHERE x.indrelid = 'uploaded_file'::regclass ORDER BY 2 DESC`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var all int64
	var each []string
	for rows.Next() {
		var name string
		var size int64
		if err := rows.Scan(&name, &size); err != nil {
			return err
		}
		all += size
		each = append(each, fmt.Sprintf("%s %.1f", strings.TrimPrefix(name, "uploaded_file_"), float64(size)/millions/(1<<20)))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	mib := func(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/millions/(1<<20)) }
	rep.add("uploaded_file per million files: rows (heap and TOAST), indexes", mib(table)+", "+mib(all), "", true)
	rep.add("each index per million files, MiB", strings.Join(each, ", "), "", true)
	return nil
}

// count10 writes n as "10M", "5M", "100k".
func count10(n int) string {
	if n >= 1_000_000 && n%1_000_000 == 0 {
		return fmt.Sprintf("%dM", n/1_000_000)
	}
	if n >= 1000 && n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}
