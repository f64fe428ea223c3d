package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uploadedfile/uploadedfile/internal/pgtest"
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

// sweepCost times draining the eligible rows of one sweep: time per row.
func sweepCost(ctx context.Context, svc *service.Service, sweep func(context.Context, *service.Service) (int, error)) (time.Duration, error) {
	start := time.Now()
	done := 0
	for {
		n, err := sweep(ctx, svc)
		if err != nil {
			return 0, err
		}
		if n == 0 {
			break
		}
		done += n
	}
	if done != eligible {
		return 0, fmt.Errorf("swept %d rows, want %d", done, eligible)
	}
	return time.Since(start) / time.Duration(done), nil
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
	cost := map[int]map[string]time.Duration{}
	for _, total := range []int{100_000, 1_000_000} {
		dsn, drop, err := createDatabase(ctx, pgtest.ServerURL())
		if err != nil {
			return err
		}
		err = func() error {
			defer drop()
			if err := seedTable(ctx, dsn, total); err != nil {
				return err
			}
			pool, err := pgxpool.New(ctx, dsn)
			if err != nil {
				return err
			}
			defer pool.Close()
			root, err := os.MkdirTemp("", "uploadedfile-sweep-*")
			if err != nil {
				return err
			}
			defer os.RemoveAll(root)
			svc, err := service.New(ctx, service.Config{LocalRoot: root}, pool, service.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			if err != nil {
				return err
			}
			defer svc.Close()
			cost[total] = map[string]time.Duration{}
			for _, s := range sweeps {
				if cost[total][s.name], err = sweepCost(ctx, svc, s.run); err != nil {
					return fmt.Errorf("%s on %d rows: %w", s.name, total, err)
				}
			}
			return nil
		}()
		if err != nil {
			return err
		}
	}
	for _, s := range sweeps {
		small, large := cost[100_000][s.name], cost[1_000_000][s.name]
		ratio := float64(large) / float64(small)
		rep.add(fmt.Sprintf("sweep %s, 10k eligible: cost per row at 1M rows vs 100k", s.name),
			fmt.Sprintf("%.2f× (%s vs %s per row)", ratio, large.Round(time.Microsecond), small.Round(time.Microsecond)), "≤ 1.2×", ratio <= 1.2)
	}
	return nil
}

// writeReport writes the Markdown report into path between the markers
// (or as the whole file when it has none).
func writeReport(path, table string) error {
	const begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(old)
	i, j := indexOf(s, begin), indexOf(s, end)
	if i < 0 || j < i {
		return os.WriteFile(path, []byte(begin+"\n"+table+end+"\n"), 0o644)
	}
	return os.WriteFile(path, []byte(s[:i]+begin+"\n"+table+s[j:]), 0o644)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
