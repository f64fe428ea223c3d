package db_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// TestRowCheckFunctionsMatchTheConstraints: migration 20261125000000
// replaced uploaded_file's seventeen CHECK constraints and
// uploaded_file_event's three by one constraint each that calls a
// function. The same rows, inserted before and after it, are accepted or
// refused alike, and a refusal names the same invariant (SQLSTATE 23514,
// constraint name and message): several thousand rows drawn from the edge
// values of every checked column, most of them valid, with a fixed seed.
func TestRowCheckFunctionsMatchTheConstraints(t *testing.T) {
	t.Parallel()
	url, m := emptyMigrator(t)
	require.NoError(t, m.Migrate(20261124100000))

	rng := rand.New(rand.NewPCG(20261125, 1))
	files := make([]fileCandidate, 4000)
	for i := range files {
		files[i] = newFileCandidate(rng, i)
	}
	events := make([]eventCandidate, 600)
	for i := range events {
		events[i] = newEventCandidate(rng)
	}

	// The invariants, as the per-invariant constraints name them.
	invariants := checkConstraints(t, url)
	require.Len(t, invariants, 20)
	before := checkOutcomes(t, url, files, events)
	require.NoError(t, m.Migrate(20261125000000))
	after := checkOutcomes(t, url, files, events)

	refused := map[string]int{}
	accepted := 0
	for i := range before {
		require.Equal(t, before[i], after[i], "candidate %d", i)
		if before[i] == (outcome{}) {
			accepted++
		} else {
			refused[before[i].constraint]++
		}
	}
	// The draw reaches every invariant and accepts enough rows to mean it.
	for _, name := range invariants {
		require.Positive(t, refused[name], "no candidate failed %s", name)
	}
	require.Greater(t, accepted, 300, "accepted candidates")
}

// checkConstraints names the CHECK constraints of uploaded_file and
// uploaded_file_event.
func checkConstraints(t *testing.T, url string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT conname::text FROM pg_constraint
WHERE contype = 'c' AND conrelid IN ('uploaded_file'::regclass, 'uploaded_file_event'::regclass) ORDER BY conname`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return names
}

// outcome is how an insert ended: the zero value when it was accepted,
// else the refusing constraint's name and the error's message.
type outcome struct{ constraint, message string }

// fileCandidate is one uploaded_file row's checked columns; nil is NULL.
type fileCandidate struct {
	tenant, user, key, status, visibility, disposition string
	department, cdn, pendingKey                        *string
	size                                               int64
	temporary                                          bool
	extra                                              string
	uploadPending, uploadExpires, lease, staging       *time.Time
}

// eventCandidate is one uploaded_file_event row's checked columns.
type eventCandidate struct {
	typ  string
	rule *string
	data string
}

// pick returns valid with probability 5/6, else one of the edge values.
func pick[T any](rng *rand.Rand, valid T, edges ...T) T {
	if rng.IntN(6) > 0 || len(edges) == 0 {
		return valid
	}
	return edges[rng.IntN(len(edges))]
}

func newFileCandidate(rng *rand.Rand, i int) fileCandidate {
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	key := fmt.Sprintf("core/t/%05d.bin", i)
	long := func(n int) string { return strings.Repeat("x", n) }
	wide := strings.Repeat("ü", 255) // 255 characters, 510 bytes
	c := fileCandidate{
		tenant:        pick(rng, "acme", "", long(255), long(256), wide),
		user:          pick(rng, "alice", "", long(256), wide),
		key:           pick(rng, key, "", long(1024), long(1025)),
		status:        pick(rng, "ready", "pending", "completing", "failed", "quarantined", "bogus"),
		visibility:    pick(rng, "private", "public", "secret"),
		disposition:   pick(rng, "attachment", "inline", "download"),
		department:    pick(rng, (*string)(nil), ptr(""), ptr("d"), ptr(long(256))),
		cdn:           pick(rng, (*string)(nil), ptr(""), ptr("c"), ptr(long(2048)), ptr(long(2049))),
		pendingKey:    pick(rng, (*string)(nil), ptr(""), ptr("staging/p"), ptr(long(1025))),
		size:          pick(rng, int64(10), 0, -1),
		temporary:     pick(rng, false, true),
		extra:         pick(rng, `{}`, `{"a":1}`, `[1]`, `"s"`, `null`),
		uploadPending: pick(rng, (*time.Time)(nil), ptr(t0), ptr(t0.Add(time.Hour))),
		uploadExpires: pick(rng, (*time.Time)(nil), ptr(t0.Add(30*time.Minute))),
		lease:         pick(rng, (*time.Time)(nil), ptr(t0)),
		staging:       pick(rng, (*time.Time)(nil), ptr(t0)),
	}
	if rng.IntN(20) == 0 {
		c.pendingKey = &c.key // the same key twice
	}
	if c.status == "completing" && rng.IntN(2) == 0 {
		c.lease = ptr(t0) // most completing rows hold their lease
	}
	return c
}

func newEventCandidate(rng *rand.Rand) eventCandidate {
	return eventCandidate{
		typ:  pick(rng, "file.ready", "file.deleted", "file.variant-ready", "upload.abandoned", "file.bogus", ""),
		rule: pick(rng, (*string)(nil), ptr("r1"), ptr(""), ptr(strings.Repeat("r", 128)), ptr(strings.Repeat("r", 129))),
		data: pick(rng, `{}`, `{"id":"x"}`, `[]`, `1`),
	}
}

// checkOutcomes inserts every candidate, each in a transaction rolled back
// after it, and returns each one's outcome (files, then events).
func checkOutcomes(t *testing.T, url string, files []fileCandidate, events []eventCandidate) []outcome {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	const fileID = "00000000-0000-4000-8000-000000000001"
	try := func(sql string, args ...any) outcome {
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, tx.Rollback(ctx)) }()
		_, err = tx.Exec(ctx, sql, args...)
		if err == nil {
			return outcome{}
		}
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%v", err)
		require.Equal(t, "23514", pgErr.Code, "%v", err)
		return outcome{constraint: pgErr.ConstraintName, message: pgErr.Message}
	}
	var out []outcome
	for _, c := range files {
		out = append(out, try(`
INSERT INTO uploaded_file (id, tenant_code, department_code, user_id, key, cdn, pending_key, original_name, size_bytes,
    content_type, status, visibility, disposition, is_temporary, extra_data, upload_pending_at, upload_expires_at,
    completion_lease_until, staging_cleanup_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, 'a.bin', $8, 'application/octet-stream', $9, $10, $11, $12, $13::jsonb, $14, $15, $16, $17)`,
			fileID, c.tenant, c.department, c.user, c.key, c.cdn, c.pendingKey, c.size, c.status, c.visibility, c.disposition,
			c.temporary, c.extra, c.uploadPending, c.uploadExpires, c.lease, c.staging))
	}
	for _, e := range events {
		out = append(out, try(`
INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, rule, data)
VALUES ($1, 'acme', $2, now(), $3, $4::jsonb)`, e.typ, fileID, e.rule, e.data))
	}
	return out
}
