package db_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// writeLockBound is the longest a write may wait for a lock while the
// migrations run (each writer's lock_timeout: a longer wait fails the
// write with 55P03).
const writeLockBound = time.Second

// TestMigrationsKeepWritesFlowing: the migrations run from the legacy shape
// to the latest against a table of a few hundred thousand rows while
// writers insert and update rows of it; no write waits on a lock longer
// than writeLockBound (index builds are CONCURRENTLY, constraints are added
// NOT VALID and validated apart, so no statement holds the table's writers
// off for the length of a scan), every write succeeds, and writes go on
// during the run.
func TestMigrationsKeepWritesFlowing(t *testing.T) {
	t.Parallel()
	url, m := emptyMigrator(t)
	require.NoError(t, m.Steps(1)) // the legacy shape
	ctx := context.Background()
	seed, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer seed.Close(ctx)
	const rows = 300_000
	_, err = seed.Exec(ctx, fmt.Sprintf(`
INSERT INTO uploaded_file (id, tenant_code, user_id, key, original_name, size_bytes, content_type, created_at)
SELECT gen_random_uuid(), 't' || (i %% 50), 'u' || (i %% 997), 'seed/' || i, 'file-' || md5(i::text) || '.pdf', i, 'application/pdf',
    now() - make_interval(secs => i)
FROM generate_series(1, %d) AS i`, rows))
	require.NoError(t, err)
	_, err = seed.Exec(ctx, "ANALYZE uploaded_file")
	require.NoError(t, err)

	var (
		done    = make(chan struct{})
		wg      sync.WaitGroup
		writes  atomic.Int64
		slowest atomic.Int64
		mu      sync.Mutex
		failed  []error
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				mu.Lock()
				failed = append(failed, err)
				mu.Unlock()
				return
			}
			defer conn.Close(ctx)
			_, err = conn.Exec(ctx, fmt.Sprintf("SET lock_timeout = '%dms'", writeLockBound.Milliseconds()))
			if err != nil {
				panic(err)
			}
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				start := time.Now()
				var err error
				if i%2 == 0 {
					_, err = conn.Exec(ctx, `
INSERT INTO uploaded_file (id, tenant_code, user_id, key, original_name, size_bytes, content_type)
VALUES (gen_random_uuid(), 'w', 'writer', 'write/' || gen_random_uuid(), 'w.pdf', 1, 'application/pdf')`)
				} else {
					_, err = conn.Exec(ctx, "UPDATE uploaded_file SET updated_at = now() WHERE key = $1", fmt.Sprintf("seed/%d", 1+(w*7919+i*104729)%rows))
				}
				if d := time.Since(start).Microseconds(); d > slowest.Load() {
					slowest.Store(d)
				}
				if err != nil {
					var pe *pgconn.PgError
					if errors.As(err, &pe) && pe.Code == "55P03" {
						err = fmt.Errorf("a write waited on a lock for more than %s: %w", writeLockBound, err)
					}
					mu.Lock()
					failed = append(failed, err)
					mu.Unlock()
					return
				}
				writes.Add(1)
			}
		}()
	}
	before := writes.Load()
	start := time.Now()
	migrateErr := m.Up()
	took := time.Since(start)
	during := writes.Load() - before
	close(done)
	wg.Wait()
	require.NoError(t, migrateErr)
	t.Logf("migrations took %s over %d rows; %d writes during them, the slowest %s", took, rows, during, time.Duration(slowest.Load())*time.Microsecond)
	require.Empty(t, failed, "every write succeeded within the lock bound")
	require.Positive(t, during, "writes went on while the migrations ran")

	var invalid int
	require.NoError(t, seed.QueryRow(ctx, `
SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
WHERE c.relname LIKE 'uploaded_file%' AND NOT (i.indisvalid AND i.indisready)`).Scan(&invalid))
	require.Zero(t, invalid, "every index built concurrently is valid")
	var notValidated int
	require.NoError(t, seed.QueryRow(ctx, `
SELECT count(*) FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid
WHERE t.relname LIKE 'uploaded_file%' AND NOT c.convalidated`).Scan(&notValidated))
	require.Zero(t, notValidated, "every constraint added NOT VALID was validated")
}
