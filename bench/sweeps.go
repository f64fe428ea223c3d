package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/service"
)

type s3CreateBucket = awss3.CreateBucketInput

const eligible = 10_000

// seedTable fills a fresh database with total rows, of which `eligible`
// are expired temporary files and `eligible` hold elapsed deletion claims;
// the rest are active files.
func seedTable(ctx context.Context, dsn string, total int) error {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	_, err = pool.Exec(ctx, `
INSERT INTO uploaded_file (id, tenant_code, user_id, key, cdn, original_name, size_bytes, content_type, is_temporary, status,
                           completed_at, expired_at, deletion_pending_at, used_at, created_at)
SELECT gen_random_uuid(), 'tenant-' || (i % 500), 'user-' || (i % 5000), 'core/t-x/' || i || '.csv', 'urn:bench:' || i, 'f.csv', 10, 'text/csv',
       i <= $2, 'ready', now() - interval '2 days',
       CASE WHEN i <= $2 THEN now() - interval '1 hour' END,
       CASE WHEN i > $2 AND i <= 2 * $2 THEN now() - interval '1 hour' END,
       now() - interval '1 day', now() - interval '2 days'
FROM generate_series(1, $1::integer) AS i`, total, eligible)
	if err != nil {
		return err
	}
	// Both table sizes start from the same state: visibility map and hint
	// bits set, statistics fresh, no checkpoint pending.
	for _, stmt := range []string{"VACUUM ANALYZE uploaded_file", "CHECKPOINT"} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

// sweepTarget is one seeded table with a service over it.
type sweepTarget struct {
	total int
	svc   *service.Service
}

// openSweepTarget creates and seeds a database of total rows and a service
// over it; closing it drops everything.
func openSweepTarget(ctx context.Context, total int) (*sweepTarget, func(), error) {
	dsn, drop, err := createDatabase(ctx, pgtest.ServerURL())
	if err != nil {
		return nil, nil, err
	}
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	closers = append(closers, drop)
	if err := seedTable(ctx, dsn, total); err != nil {
		closeAll()
		return nil, nil, err
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	closers = append(closers, pool.Close)
	root, err := os.MkdirTemp("", "uploadedfile-sweep-*")
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	closers = append(closers, func() { _ = os.RemoveAll(root) })
	svc, err := service.New(ctx, service.Config{LocalRoot: root}, pool, service.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	closers = append(closers, func() { _ = svc.Close() })
	return &sweepTarget{total: total, svc: svc}, closeAll, nil
}

// sweepCosts drains the eligible rows of one sweep on every target,
// alternating one batch per target so that drifts in disk latency (the
// cost is mostly commits) fall on all table sizes alike. It returns the
// time per row of each target.
func sweepCosts(ctx context.Context, targets []*sweepTarget, sweep func(context.Context, *service.Service) (int, error)) ([]time.Duration, error) {
	spent := make([]time.Duration, len(targets))
	done := make([]int, len(targets))
	finished := make([]bool, len(targets))
	for left := len(targets); left > 0; {
		for i, t := range targets {
			if finished[i] {
				continue
			}
			start := time.Now()
			n, err := sweep(ctx, t.svc)
			spent[i] += time.Since(start)
			if err != nil {
				return nil, err
			}
			done[i] += n
			if n == 0 {
				finished[i] = true
				left--
			}
		}
	}
	for i, t := range targets {
		if done[i] != eligible {
			return nil, fmt.Errorf("swept %d rows of %d, want %d", done[i], t.total, eligible)
		}
		spent[i] /= time.Duration(done[i])
	}
	return spent, nil
}

func benchSweeps(ctx context.Context, rep *report, _ bool) error {
	sweeps := []struct {
		name string
		run  func(context.Context, *service.Service) (int, error)
	}{
		{"cleanup-temporary", func(ctx context.Context, s *service.Service) (int, error) {
			return s.CleanupExpiredTemporaryFiles(ctx, nil, 0)
		}},
		{"retry-deletions", func(ctx context.Context, s *service.Service) (int, error) {
			return s.UnsafeSystemRetryPendingDeletions(ctx, 0)
		}},
	}
	var targets []*sweepTarget
	for _, total := range []int{100_000, 1_000_000} {
		t, closeTarget, err := openSweepTarget(ctx, total)
		if err != nil {
			return err
		}
		defer closeTarget()
		targets = append(targets, t)
	}
	for _, s := range sweeps {
		cost, err := sweepCosts(ctx, targets, s.run)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		small, large := cost[0], cost[1]
		ratio := float64(large) / float64(small)
		rep.add(fmt.Sprintf("sweep %s, 10k eligible: cost per row at 1M rows vs 100k", s.name),
			fmt.Sprintf("%.2f× (%s vs %s per row)", ratio, large.Round(time.Microsecond), small.Round(time.Microsecond)), "≤ 1.2×", ratio <= 1.2)
	}
	return nil
}

// writeReport writes the Markdown report into path between the bench
// markers (or as the whole file when it has none).
func writeReport(path, table string) error { return writeReportAt(path, "bench", table) }

// writeReportAt writes table into path between the markers
// <!-- name:begin --> and <!-- name:end --> (appended when path has none).
func writeReportAt(path, name, table string) error {
	begin, end := "<!-- "+name+":begin -->", "<!-- "+name+":end -->"
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(old)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return os.WriteFile(path, []byte(s+begin+"\n"+table+end+"\n"), 0o644)
	}
	return os.WriteFile(path, []byte(s[:i]+begin+"\n"+table+s[j:]), 0o644)
}
