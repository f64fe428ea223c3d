package db_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/golang-migrate/migrate/v4"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db/migrations"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
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
// feature by feature, and up again to the identical schema.
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
	require.EqualValues(t, 20261129000006, version)
	require.Contains(t, cols, "width")
	for _, dropped := range []string{"uploaded_file_owner_status_idx", "uploaded_file_rescan_idx", "uploaded_file_attachment_idx"} {
		require.NotContains(t, idx, dropped, "the index diet")
	}

	// Down past the index diet: the three come back.
	require.NoError(t, m.Migrate(20261126100000))
	_, _, dietIdx, _ := schemaShape(t, url)
	for _, back := range []string{"uploaded_file_owner_status_idx", "uploaded_file_rescan_idx", "uploaded_file_attachment_idx"} {
		require.Contains(t, dietIdx, back)
	}

	// Down past image dimensions.
	require.NoError(t, m.Migrate(20261126000000))
	dimCols, _, _, _ := schemaShape(t, url)
	require.NotContains(t, dimCols, "width")
	var idempotency bool
	require.NoError(t, pgxQueryRow(t, url, "SELECT to_regclass('uploaded_file_idempotency') IS NOT NULL", &idempotency))
	require.True(t, idempotency)

	// Down past the idempotency keys.
	require.NoError(t, m.Migrate(20261125000001))
	require.NoError(t, pgxQueryRow(t, url, "SELECT to_regclass('uploaded_file_idempotency') IS NOT NULL", &idempotency))
	require.False(t, idempotency)

	// Down past the row checks: one CHECK constraint per invariant again,
	// the row check functions gone.
	require.NoError(t, m.Migrate(20261124100000))
	_, perInvariant, _, _ := schemaShape(t, url)
	require.Contains(t, perInvariant, "uploaded_file_status_check")
	require.NotContains(t, perInvariant, "uploaded_file_row_check")
	var functions int
	require.NoError(t, pgxQueryRow(t, url, "SELECT count(*) FROM pg_proc WHERE proname IN ('uploaded_file_row_check', 'uploaded_file_event_row_check')", &functions))
	require.Zero(t, functions)
	var lang string
	require.NoError(t, pgxQueryRow(t, url, "SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.proname = 'uploaded_file_event_data'", &lang))
	require.Equal(t, "plpgsql", lang)

	// Down past it: the event data function is LANGUAGE sql again.
	require.NoError(t, m.Migrate(20261124000001))
	require.NoError(t, pgxQueryRow(t, url, "SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.proname = 'uploaded_file_event_data'", &lang))
	require.Equal(t, "sql", lang)
	_, _, atVariants, _ := schemaShape(t, url)
	require.Contains(t, atVariants, "uploaded_file_rescan_idx")
	var variants bool
	require.NoError(t, pgxQueryRow(t, url, "SELECT to_regclass('uploaded_file_variant_lease_idx') IS NOT NULL", &variants))
	require.True(t, variants)

	// Down past variants.
	require.NoError(t, m.Migrate(20261123300002))
	require.NoError(t, pgxQueryRow(t, url, "SELECT to_regclass('uploaded_file_variant') IS NOT NULL", &variants))
	require.False(t, variants)
	_, _, downIdx, _ := schemaShape(t, url)
	require.Contains(t, downIdx, "uploaded_file_rescan_idx")

	// Down past quarantine.
	require.NoError(t, m.Migrate(20261123200000))
	_, downCons, downIdx, _ := schemaShape(t, url)
	require.NotContains(t, downIdx, "uploaded_file_rescan_idx")
	require.Contains(t, downCons, "uploaded_file_status_check")

	var usage bool
	require.NoError(t, pgxQueryRow(t, url, "SELECT to_regclass('uploaded_file_usage') IS NOT NULL", &usage))
	require.True(t, usage)

	// Down past quotas: the files stay.
	require.NoError(t, m.Migrate(20261123100005))
	require.NoError(t, pgxQueryRow(t, url, "SELECT to_regclass('uploaded_file_usage') IS NOT NULL", &usage))
	require.False(t, usage)
	require.True(t, tableExists(t, url))
	require.Contains(t, idx, "uploaded_file_key_bytes_idx")
	require.Contains(t, idx, "uploaded_file_list_owner_created_idx")
	var events bool
	require.NoError(t, pgxQueryRow(t, url, "SELECT to_regclass('uploaded_file_event_order_idx') IS NOT NULL", &events))
	require.True(t, events)

	// Down past the listing indexes.
	require.NoError(t, m.Migrate(20261123000000))
	_, _, listIdx, _ := schemaShape(t, url)
	require.NotContains(t, listIdx, "uploaded_file_list_owner_created_idx")

	// Down past the event outbox: the files stay.
	require.NoError(t, m.Migrate(20261122120000))
	require.NoError(t, pgxQueryRow(t, url, "SELECT to_regclass('uploaded_file_event') IS NOT NULL", &events))
	require.False(t, events)
	require.True(t, tableExists(t, url))

	// Down past the shared signing keys.
	require.NoError(t, m.Migrate(20261122100002))
	var keys bool
	require.NoError(t, pgxQueryRow(t, url, "SELECT to_regclass('uploaded_file_signing_key') IS NOT NULL", &keys))
	require.False(t, keys)

	// Down past reconcile's indexes and claims: the rows stay.
	require.NoError(t, m.Migrate(20261122000007))
	_, _, directIdx, _ := schemaShape(t, url)
	require.NotContains(t, directIdx, "uploaded_file_key_bytes_idx")
	require.Contains(t, directIdx, "uploaded_file_direct_pending_idx")
	require.True(t, tableExists(t, url))

	// Down to the legacy shape, with its own index back.
	require.NoError(t, m.Migrate(1))
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

// TestApplyRecoversADiedIndexBuild: a CONCURRENTLY index build that died
// leaves its version dirty and an INVALID index of its name; Apply drops
// that index, runs the migration again and finishes -- the index valid and
// as the migration defines it.
func TestApplyRecoversADiedIndexBuild(t *testing.T) {
	t.Parallel()
	url, m := emptyMigrator(t)
	require.NoError(t, m.Migrate(20261123100000))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `
INSERT INTO uploaded_file (id, tenant_code, user_id, key, original_name, size_bytes, content_type)
VALUES (gen_random_uuid(), 'acme', 'alice', 'k1', 'a.pdf', 1, 'application/pdf'),
       (gen_random_uuid(), 'acme', 'bob', 'k2', 'b.pdf', 1, 'application/pdf')`)
	require.NoError(t, err)
	// A build of 20261123100001's index that failed half way (here: a
	// unique build over duplicates) leaves it INVALID.
	_, err = conn.Exec(ctx, "CREATE UNIQUE INDEX CONCURRENTLY uploaded_file_list_tenant_created_idx ON uploaded_file (tenant_code)")
	require.Error(t, err)
	_, err = conn.Exec(ctx, "UPDATE schema_migrations SET version = 20261123100001, dirty = true")
	require.NoError(t, err)
	require.ErrorContains(t, migrations.Check(ctx, conn), "dirty at version 20261123100001 (its migration died half way: no migration holds the lock): run uploadedfile migrate up, which runs it again")

	var logs []string
	require.NoError(t, migrations.Apply(ctx, url, func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) }))
	require.NoError(t, migrations.Check(ctx, conn))
	require.Contains(t, strings.Join(logs, "\n"), "dropping the INVALID index uploaded_file_list_tenant_created_idx")
	var def string
	var valid bool
	require.NoError(t, conn.QueryRow(ctx, `
SELECT pg_get_indexdef(indexrelid), indisvalid FROM pg_index
WHERE indexrelid = 'uploaded_file_list_tenant_created_idx'::regclass`).Scan(&def, &valid))
	require.True(t, valid)
	require.Contains(t, def, "(tenant_code, created_at DESC, id DESC)")
}

// TestApplyRetriesALockTimeout: a migration that cannot take its table
// lock within its lock_timeout (a long transaction holds the table) is
// rolled back and tried again, and goes through once the transaction ends;
// writers never queue behind it for longer than the timeout.
func TestApplyRetriesALockTimeout(t *testing.T) {
	t.Parallel()
	url, m := emptyMigrator(t)
	require.NoError(t, m.Migrate(20261124100000)) // before the row checks' ALTER TABLE
	ctx := context.Background()
	holder, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SELECT count(*) FROM uploaded_file") // ACCESS SHARE until the end of tx
	require.NoError(t, err)

	timedOut := make(chan struct{}, 8)
	done := make(chan error, 1)
	go func() {
		done <- migrations.Apply(ctx, url, func(format string, args ...any) {
			if strings.Contains(fmt.Sprintf(format, args...), "timed out waiting for its table lock") {
				timedOut <- struct{}{}
			}
		})
	}()
	select {
	case <-timedOut:
	case err := <-done:
		t.Fatalf("Apply ended before timing out: %v", err)
	}
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-done)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	require.NoError(t, migrations.Check(ctx, conn))
}

// TestApplyRefusesADirtyMigrationItCannotRerun: a dirty version whose
// migration is not safe to run again is left to the operator, with the
// command that clears it once they have.
func TestApplyRefusesADirtyMigrationItCannotRerun(t *testing.T) {
	t.Parallel()
	url, m := emptyMigrator(t)
	require.NoError(t, m.Migrate(20261125000000))
	require.NoError(t, m.Force(20261125000000))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "UPDATE schema_migrations SET dirty = true")
	require.NoError(t, err)
	err = migrations.Apply(ctx, url, nil)
	var se *migrations.SchemaError
	require.ErrorAs(t, err, &se)
	require.ErrorContains(t, err, "uploadedfile migrate force 20261124100000 and uploadedfile migrate up")
	var version int64
	var dirty bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT version, dirty FROM schema_migrations").Scan(&version, &dirty))
	require.EqualValues(t, 20261125000000, version)
	require.True(t, dirty, "nothing was run or cleared")
}

// A down migration never weakens a guarantee: reverting quarantine while a
// file is quarantined would make it a ready, visible file again, and
// dropping variants while variant rows exist would leave their objects with
// no row. Both refuse, and leave the schema and the rows as they were.
func TestDownMigrationsRefuseToReleaseWhatTheyGuard(t *testing.T) {
	t.Parallel()
	url, m := emptyMigrator(t)
	require.NoError(t, m.Up())
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var fileID string
	require.NoError(t, conn.QueryRow(ctx, `
INSERT INTO uploaded_file (id, tenant_code, user_id, key, original_name, size_bytes, content_type, status, completed_at)
VALUES (gen_random_uuid(), 'acme', 'alice', 'core/acme/malware.exe', 'malware.exe', 68, 'application/octet-stream', 'quarantined', now())
RETURNING id`).Scan(&fileID))
	_, err = conn.Exec(ctx, `INSERT INTO uploaded_file_variant (id, file_id, preset, key, status, content_type, lease_until)
VALUES (gen_random_uuid(), $1, 'thumb', 'core/acme/variant.webp', 'generating', 'image/webp', now() + interval '1 minute')`, fileID)
	require.NoError(t, err)

	// Down to before variants: the variant down refuses first.
	err = m.Migrate(20261123300002)
	require.ErrorContains(t, err, "uploaded_file_variant holds variants")
	require.NoError(t, m.Force(20261124000000)) // the refused down left its version dirty
	var tables int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM uploaded_file_variant").Scan(&tables))
	require.Equal(t, 1, tables, "the variant rows stay")

	_, err = conn.Exec(ctx, "DELETE FROM uploaded_file_variant")
	require.NoError(t, err)
	err = m.Migrate(20261123200000)
	require.ErrorContains(t, err, "holds quarantined files")
	var status string
	require.NoError(t, conn.QueryRow(ctx, "SELECT status FROM uploaded_file WHERE id = $1", fileID).Scan(&status))
	require.Equal(t, "quarantined", status, "the quarantined file stays hidden")
}
