package migrations_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db/migrations"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
)

// The schema window: a binary serves on its own version, on a later one
// whose migrations declare it compatible, and while a migration runs; not
// on a later one that declares only newer binaries, nor on one left dirty
// by a migration that died.
func TestSchemaWindow(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	require.NoError(t, migrations.Check(ctx, pool), "its own version")

	const next = 20991231000000
	exec("UPDATE schema_migrations SET version = $1", next)
	var se *migrations.SchemaError
	err := migrations.Check(ctx, pool)
	require.ErrorAs(t, err, &se, "a later version that declares nothing")
	require.ErrorContains(t, err, "do not declare this binary compatible")

	exec("INSERT INTO uploaded_file_schema_compat (version, oldest_binary) VALUES ($1, $2)", next, migrations.Latest())
	require.NoError(t, migrations.Check(ctx, pool), "a later, expand-only version keeps this binary in its window")

	exec("UPDATE uploaded_file_schema_compat SET oldest_binary = $1 WHERE version = $1", next)
	err = migrations.Check(ctx, pool)
	require.ErrorAs(t, err, &se, "a contract: binaries from it on only")
	require.ErrorContains(t, err, fmt.Sprintf("runs only binaries from version %d on", next))

	// Dirty: a migration running (its lock held) is not a dead one.
	exec("UPDATE schema_migrations SET version = $1, dirty = true", next)
	holder, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer holder.Release()
	_, err = holder.Exec(ctx, "SELECT pg_advisory_lock($1)", migrations.ApplyLock)
	require.NoError(t, err)
	running, err := migrations.Running(ctx, pool)
	require.NoError(t, err)
	require.True(t, running)
	require.NoError(t, migrations.Check(ctx, pool), "a running migration leaves the replica serving")
	_, err = holder.Exec(ctx, "SELECT pg_advisory_unlock($1)", migrations.ApplyLock)
	require.NoError(t, err)
	err = migrations.Check(ctx, pool)
	require.ErrorAs(t, err, &se, "dirty with no migration running: it died")
	require.True(t, se.Dirty)
	require.ErrorContains(t, err, "no migration holds the lock")
}

// migrate up refuses a contract migration while a replica of an older
// binary heartbeats; a replica whose heartbeat is past ReplicaAlive is dead
// and no longer counts.
func TestContractWaitsForOlderReplicas(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	const contract, oldest = 20991231000000, 20991230000000
	require.NoError(t, migrations.OlderReplicas(ctx, pool, contract, oldest), "no replica registered")

	old, fresh := uuid.New(), uuid.New()
	_, err := pool.Exec(ctx, `INSERT INTO uploaded_file_replica (id, binary_version, started_at, heartbeat_at)
VALUES ($1, $3, now(), now()), ($2, $4, now(), now())`, old, fresh, int64(migrations.Latest()), int64(oldest))
	require.NoError(t, err)
	err = migrations.OlderReplicas(ctx, pool, contract, oldest)
	var ce *migrations.ContractError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, 1, ce.Replicas, "only the older binary counts")
	require.Equal(t, migrations.Latest(), ce.Running)
	require.ErrorContains(t, err, "roll every replica")

	_, err = pool.Exec(ctx, "UPDATE uploaded_file_replica SET heartbeat_at = now() - $2::interval WHERE id = $1", old, migrations.ReplicaAlive+time.Second)
	require.NoError(t, err)
	require.NoError(t, migrations.OlderReplicas(ctx, pool, contract, oldest), "a replica that stopped heartbeating died")
}
