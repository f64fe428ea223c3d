package db_test

import (
	"context"
	"errors"
	"testing"

	"github.com/golang-migrate/migrate/v4"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db/migrations"
	"github.com/uploadedfile/uploadedfile/internal/pgtest"
)

// emptyMigrator is a throw-away empty database and the migrations opened
// on it, closed when the test ends.
func emptyMigrator(t *testing.T) (url string, m *migrate.Migrate) {
	t.Helper()
	url = pgtest.NewEmptyDatabase(t)
	m, err := migrations.Open(url)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = m.Close() })
	return url, m
}

// schemaShape describes what the migrations built: columns, constraints and
// indexes of uploaded_file, and whether every column is commented.
func schemaShape(t *testing.T, url string) (columns, constraints, indexes []string, uncommented []string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	collect := func(sql string) []string {
		rows, err := conn.Query(ctx, sql)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}
	columns = collect(`SELECT column_name::text FROM information_schema.columns WHERE table_name = 'uploaded_file' ORDER BY column_name`)
	constraints = collect(`SELECT conname::text FROM pg_constraint WHERE conrelid = 'uploaded_file'::regclass ORDER BY conname`)
	indexes = collect(`SELECT indexname::text FROM pg_indexes WHERE tablename = 'uploaded_file' ORDER BY indexname`)
	uncommented = collect(`
SELECT a.attname::text FROM pg_attribute a
WHERE a.attrelid = 'uploaded_file'::regclass AND a.attnum > 0 AND NOT a.attisdropped
    AND col_description(a.attrelid, a.attnum) IS NULL`)
	return
}

// pgxQueryRow runs one query on its own connection to url.
func pgxQueryRow(t *testing.T, url, sql string, dest ...any) error {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, sql).Scan(dest...)
}

func tableExists(t *testing.T, url string) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var exists bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT to_regclass('uploaded_file') IS NOT NULL").Scan(&exists))
	return exists
}

// TestMigrationsUpDownUp: on an empty database the migrations go up, down
// step by step, and up again to the identical schema.
func TestMigrationsUpDownUp(t *testing.T) {
	t.Parallel()
	url, m := emptyMigrator(t)

	require.NoError(t, m.Up())
	cols, cons, idx, uncommented := schemaShape(t, url)
	require.Empty(t, uncommented, "every column has a COMMENT")
	require.Contains(t, cols, "status")
	require.Contains(t, cons, "uploaded_file_row_check")
	require.NotContains(t, cons, "uploaded_file_status_check")
	require.Contains(t, idx, "uploaded_file_direct_pending_idx")
	version, dirty, err := m.Version()
	require.NoError(t, err)
	require.False(t, dirty)
	require.EqualValues(t, 20261126000000, version)
	var idempotency bool
	require.NoError(t, pgxQueryRow(t, url, "SELECT to_regclass('uploaded_file_idempotency') IS NOT NULL", &idempotency))
	require.True(t, idempotency)

	// One step down: the idempotency keys go.
	require.NoError(t, m.Steps(-1))
	require.NoError(t, pgxQueryRow(t, url, "SELECT to_regclass('uploaded_file_idempotency') IS NOT NULL", &idempotency))
	require.False(t, idempotency)

	// One step down: one CHECK constraint per invariant again, the row
	// check functions gone.
	require.NoError(t, m.Steps(-1))
	_, perInvariant, _, _ := schemaShape(t, url)
	require.Contains(t, perInvariant, "uploaded_file_status_check")
	require.NotContains(t, perInvariant, "uploaded_file_row_check")
	var functions int
	require.NoError(t, pgxQueryRow(t, url, "SELECT count(*) FROM pg_proc WHERE proname IN ('uploaded_file_row_check', 'uploaded_file_event_row_check')", &functions))
	require.Zero(t, functions)
	var lang string
	require.NoError(t, pgxQueryRow(t, url, "SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.proname = 'uploaded_file_event_data'", &lang))
	require.Equal(t, "plpgsql", lang)

	// One step down: the event data function is LANGUAGE sql again.
	require.NoError(t, m.Steps(-1))
	require.NoError(t, pgxQueryRow(t, url, "SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.proname = 'uploaded_file_event_data'", &lang))
	require.Equal(t, "sql", lang)
	require.Contains(t, idx, "uploaded_file_rescan_idx")
	var variants bool
	require.NoError(t, pgxQueryRow(t, url, "SELECT to_regclass('uploaded_file_variant_lease_idx') IS NOT NULL", &variants))
	require.True(t, variants)

	// One step down: variants go.
	require.NoError(t, m.Steps(-1))
	require.NoError(t, pgxQueryRow(t, url, "SELECT to_regclass('uploaded_file_variant') IS NOT NULL", &variants))
	require.False(t, variants)
	_, _, downIdx, _ := schemaShape(t, url)
	require.Contains(t, downIdx, "uploaded_file_rescan_idx")

	// Another: quarantine goes.
	require.NoError(t, m.Steps(-1))
	_, downCons, downIdx, _ := schemaShape(t, url)
	require.NotContains(t, downIdx, "uploaded_file_rescan_idx")
	require.Contains(t, downCons, "uploaded_file_status_check")

	var usage bool
	require.NoError(t, pgxQueryRow(t, url, "SELECT to_regclass('uploaded_file_usage') IS NOT NULL", &usage))
	require.True(t, usage)

	// Another: quotas go, the files stay.
	require.NoError(t, m.Steps(-1))
	require.NoError(t, pgxQueryRow(t, url, "SELECT to_regclass('uploaded_file_usage') IS NOT NULL", &usage))
	require.False(t, usage)
	require.True(t, tableExists(t, url))
	require.Contains(t, idx, "uploaded_file_key_bytes_idx")
	require.Contains(t, idx, "uploaded_file_list_owner_created_idx")
	var events bool
	require.NoError(t, pgxQueryRow(t, url, "SELECT to_regclass('uploaded_file_event_order_idx') IS NOT NULL", &events))
	require.True(t, events)

	// Another: the listing indexes go.
	require.NoError(t, m.Steps(-1))
	_, _, listIdx, _ := schemaShape(t, url)
	require.NotContains(t, listIdx, "uploaded_file_list_owner_created_idx")

	// Another: the event outbox goes, the files stay.
	require.NoError(t, m.Steps(-1))
	require.NoError(t, pgxQueryRow(t, url, "SELECT to_regclass('uploaded_file_event') IS NOT NULL", &events))
	require.False(t, events)
	require.True(t, tableExists(t, url))

	// Another: the shared signing keys go.
	require.NoError(t, m.Steps(-1))
	var keys bool
	require.NoError(t, pgxQueryRow(t, url, "SELECT to_regclass('uploaded_file_signing_key') IS NOT NULL", &keys))
	require.False(t, keys)

	// Another: reconcile's indexes and claims go, the rows stay.
	require.NoError(t, m.Steps(-1))
	_, _, directIdx, _ := schemaShape(t, url)
	require.NotContains(t, directIdx, "uploaded_file_key_bytes_idx")
	require.Contains(t, directIdx, "uploaded_file_direct_pending_idx")
	require.True(t, tableExists(t, url))

	// Another: the legacy shape, with its own index back.
	require.NoError(t, m.Steps(-1))
	legacyCols, _, legacyIdx, uncommented := schemaShape(t, url)
	require.Empty(t, uncommented)
	require.NotContains(t, legacyCols, "status")
	require.NotContains(t, legacyCols, "pending_key")
	require.Contains(t, legacyIdx, "uploaded_file_owner_idx")

	require.NoError(t, m.Down())
	require.False(t, tableExists(t, url))
	_, _, err = m.Version()
	require.ErrorIs(t, err, migrate.ErrNilVersion)

	require.NoError(t, m.Up())
	cols2, cons2, idx2, _ := schemaShape(t, url)
	require.Equal(t, cols, cols2)
	require.Equal(t, cons, cons2)
	require.Equal(t, idx, idx2)

	err = m.Up()
	require.True(t, errors.Is(err, migrate.ErrNoChange), "up again is a no-op")
}

// TestDirectLifecycleMigrationIsAdditive: rows written by the legacy shape
// survive the additive migration; a hidden legacy row becomes pending, an
// active one ready.
func TestDirectLifecycleMigrationIsAdditive(t *testing.T) {
	t.Parallel()
	url, m := emptyMigrator(t)
	require.NoError(t, m.Steps(1))

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `
INSERT INTO uploaded_file (id, tenant_code, user_id, key, original_name, size_bytes, content_type, upload_pending_at)
VALUES ('00000000-0000-4000-8000-000000000001', 'acme', 'alice', 'k1', 'a.pdf', 1, 'application/pdf', NULL),
       ('00000000-0000-4000-8000-000000000002', 'acme', 'alice', 'k2', 'b.pdf', 1, 'application/pdf', now() + interval '15 minutes')`)
	require.NoError(t, err)

	require.NoError(t, m.Up())
	rows, err := conn.Query(ctx, "SELECT status || '/' || disposition FROM uploaded_file ORDER BY id")
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"ready/attachment", "pending/attachment"}, got)
}

// TestMigrationsTakeAPoolURL: the pgxpool parameters the server documents
// in DATABASE_URL (pool_max_conns, ...) are the pool's, not the server's;
// the migrator must not send them to PostgreSQL as settings (it failed with
// "unrecognized configuration parameter").
func TestMigrationsTakeAPoolURL(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabase(t)
	require.NoError(t, migrations.Up(pgtest.WithQuery(url, "pool_max_conns=8&pool_max_conn_idle_time=10s")))
	m, err := migrations.Open(url)
	require.NoError(t, err)
	defer m.Close()
	_, dirty, err := m.Version()
	require.NoError(t, err)
	require.False(t, dirty)
}
