package db_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"
)

// A pool configured by ConfigurePool reads UUIDs and jsonb documents into
// their Go types as pgx does through their sql.Scanner and encoding/json,
// in both wire formats: values and NULLs (NULL into a uuid.UUID leaves it
// as it was, no error, as uuid's sql.Scanner answers).
func TestConfigurePoolScansUUIDAndJSONB(t *testing.T) {
	pool := onePool(t)
	ctx := context.Background()
	id := uuid.New()
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		var (
			got        uuid.UUID
			gotPtr     *uuid.UUID
			nullPtr    *uuid.UUID
			nullable   uuid.NullUUID
			null       uuid.NullUUID
			doc        json.RawMessage
			literalNul json.RawMessage
			sqlNull    = json.RawMessage(`"stale"`)
		)
		err := pool.QueryRow(ctx, `SELECT $1::uuid, $1::uuid, NULL::uuid, $1::uuid, NULL::uuid, '{"a": [1, "b"]}'::jsonb, 'null'::jsonb, NULL::jsonb`, mode, id).
			Scan(&got, &gotPtr, &nullPtr, &nullable, &null, &doc, &literalNul, &sqlNull)
		require.NoError(t, err, "mode %v", mode)
		require.Equal(t, id, got)
		require.Equal(t, id, *gotPtr)
		require.Nil(t, nullPtr)
		require.Equal(t, uuid.NullUUID{UUID: id, Valid: true}, nullable)
		require.False(t, null.Valid)
		require.JSONEq(t, `{"a": [1, "b"]}`, string(doc))
		require.Equal(t, "null", string(literalNul))
		require.Nil(t, sqlNull)

		require.NoError(t, pool.QueryRow(ctx, `SELECT NULL::uuid`, mode).Scan(&got), "mode %v", mode)
		require.Equal(t, id, got)
	}
}

// The scans ConfigurePool plans read the wire bytes directly: a binary
// UUID into a uuid.UUID allocates nothing (through its sql.Scanner it was
// rendered as text and parsed back: three allocations), and a jsonb
// document into a json.RawMessage allocates only its copy (encoding/json
// validated it again first). A scanned RawMessage owns its bytes.
func TestConfigurePoolScanPlansDoNotAllocate(t *testing.T) {
	pool := onePool(t)
	conn, err := pool.Acquire(context.Background())
	require.NoError(t, err)
	defer conn.Release()
	m := conn.Conn().TypeMap()

	id := uuid.New()
	var u uuid.UUID
	plan := m.PlanScan(pgtype.UUIDOID, pgtype.BinaryFormatCode, &u)
	require.NoError(t, plan.Scan(id[:], &u))
	require.Equal(t, id, u)
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = plan.Scan(id[:], &u) }))

	wire := append([]byte{1}, `{"k":"v"}`...) // jsonb's binary format: a version byte, then the text
	var doc json.RawMessage
	plan = m.PlanScan(pgtype.JSONBOID, pgtype.BinaryFormatCode, &doc)
	require.NoError(t, plan.Scan(wire, &doc))
	require.Equal(t, `{"k":"v"}`, string(doc))
	wire[2] = 'X'
	require.Equal(t, `{"k":"v"}`, string(doc), "the RawMessage aliases the wire buffer")
	require.Equal(t, 1.0, testing.AllocsPerRun(100, func() { _ = plan.Scan(wire, &doc) }))
}
