package db_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/testkit/interleave"
)

// A move is one state-changing statement as the pairs test runs it on a
// fixture row: it returns how many rows the statement changed (0: its
// guard matched nothing).
type move struct {
	name string // the statement's name in db/queries
	// skips: the statement claims with FOR UPDATE SKIP LOCKED, so meeting
	// a row another transaction holds it leaves the row to its next run.
	skips bool
	run   func(ctx context.Context, q *db.Queries, conn db.DBTX, f db.UploadedFile) (int, error)
}

// A pairGroup is a state a file row can be in and the statements that act
// on a row in that state: each pair of them can meet on the same row (or
// on the usage row of its owner).
type pairGroup struct {
	state   string
	fixture func(t *testing.T, b *bundle) db.UploadedFile
	moves   []move
}

// world is what a run left: the file rows, usage rows, variants, chunks
// and the events, each without what names one row (ids, keys), so two runs on
// fixtures of their own compare.
type world struct {
	rows, usage, variants, chunks, events []string
	changed                               [2]int
}

func (w world) String() string {
	return fmt.Sprintf("changed %v\nrows %v\nusage %v\nvariants %v\nchunks %v\nevents %v", w.changed, w.rows, w.usage, w.variants, w.chunks, w.events)
}

func (w world) same(o world) bool {
	return w.changed == o.changed && slices.Equal(w.rows, o.rows) && slices.Equal(w.usage, o.usage) &&
		slices.Equal(w.variants, o.variants) && slices.Equal(w.chunks, o.chunks) && slices.Equal(w.events, o.events)
}

// TestStatementPairsInterleave runs every pair of statements that can meet
// on one row -- each group of docs/schema.md's pairs table: the statements
// that act on a row in one state -- in both orders through the
// interleaving harness: the first holds its transaction open while the
// second runs (it queues on the row, or skips it), then the first commits
// and the second finishes. What the pair leaves must be what the same two
// statements leave run one after the other: one winner and a clean
// zero-row loser where both want the row, no deadlock, no lost update; a
// sweep that skipped the held row claims it on its next run. Usage always
// equals the rows. It fails when a statement that writes a file row or a
// usage row is in no group (a new statement needs its pairs).
func TestStatementPairsInterleave(t *testing.T) {
	t.Parallel()
	b := setup(t)
	groups := pairGroups()
	requireEveryWriterPaired(t, groups)
	pairs, runs := 0, 0
	for _, g := range groups {
		for _, m := range g.moves {
			alone := b.runPair(t, g, m, noop, false)
			require.Positive(t, alone.changed[0], "%s: %s changes a row in this state (the fixture is one it acts on)", g.state, m.name)
		}
		for i, a := range g.moves {
			for _, c := range g.moves[i:] {
				pairs++
				for _, order := range [][2]move{{a, c}, {c, a}} {
					runs++
					// A subtest each: its sessions' connections go back
					// to the pool when it ends.
					t.Run(order[0].name+" then "+order[1].name, func(t *testing.T) { b.checkPair(t, g, order[0], order[1]) })
					if a.name == c.name {
						break
					}
				}
			}
		}
	}
	t.Logf("statement pairs: %d pairs in %d groups, %d interleaved runs", pairs, len(groups), runs)
}

// noop is the second move of a run of one statement alone.
var noop = move{name: "nothing", run: func(context.Context, *db.Queries, db.DBTX, db.UploadedFile) (int, error) { return 0, nil }}

// checkPair runs first then second serially and interleaved on fixtures of
// their own and compares what they left.
func (b *bundle) checkPair(t *testing.T, g pairGroup, first, second move) {
	t.Helper()
	serial := b.runPair(t, g, first, second, false)
	inter := b.runPair(t, g, first, second, true)
	label := fmt.Sprintf("%s: %s, then %s while the first is open", g.state, first.name, second.name)
	if !inter.same(serial) && second.skips && inter.changed[1] < serial.changed[1] {
		// The sweep skipped the row the first holds, or did not see the
		// row it inserts: its next run claims it.
		n, err := second.run(b.ctx, b.q, b.pool, b.only(t))
		require.NoError(t, err, label)
		changed := [2]int{inter.changed[0], inter.changed[1] + n}
		inter = b.snapshot(t)
		inter.changed = changed
	}
	require.True(t, inter.same(serial), "%s:\ninterleaved:\n%s\none after the other:\n%s", label, inter, serial)
	b.requireUsageMatchesRows(t, label)
}

// runPair resets the tables, builds g's fixture and runs first and second
// on it: one after the other, or interleaved (first's transaction open
// while second runs).
func (b *bundle) runPair(t *testing.T, g pairGroup, first, second move, interleaved bool) world {
	t.Helper()
	for _, table := range []string{"uploaded_file_event_replay", "uploaded_file_event_parked", "uploaded_file_event", "uploaded_file_usage", "uploaded_file_variant", "uploaded_file_chunk", "uploaded_file_idempotency", "uploaded_file"} {
		b.exec(t, "DELETE FROM "+table) // a few rows: quicker than TRUNCATE
	}
	f := g.fixture(t, b)
	var n [2]int
	if !interleaved {
		for i, m := range []move{first, second} {
			var err error
			n[i], err = m.run(b.ctx, b.q, b.pool, f)
			require.NoError(t, err, "%s: %s one after the other", g.state, m.name)
		}
		w := b.snapshot(t)
		w.changed = n
		return w
	}
	one, two := interleave.Open(t, b.pool, first.name), interleave.Open(t, b.pool, second.name)
	one.Begin()
	two.Begin()
	step := func(s *interleave.Session, m move, i int) (interleave.Outcome, error) {
		return s.Step(func(ctx context.Context) error {
			var err error
			n[i], err = m.run(ctx, b.q, s.Tx(), f)
			return err
		})
	}
	out, err := step(one, first, 0)
	require.NoError(t, err)
	require.Equal(t, interleave.Done, out, "%s: the first statement waits on nothing", first.name)
	_, err = step(two, second, 1)
	require.NoError(t, err, "%s then %s", first.name, second.name)
	require.NoError(t, one.Commit())
	err = two.Finish()
	require.NoError(t, err, "%s then %s: the second finishes once the first commits (SQLSTATE %s)", first.name, second.name, interleave.SQLState(err))
	require.NoError(t, two.Commit())
	w := b.snapshot(t)
	w.changed = n
	return w
}

// only is the one fixture row a run left (the row a later statement acts
// on).
func (b *bundle) only(t *testing.T) db.UploadedFile {
	t.Helper()
	rows, err := b.pool.Query(b.ctx, "SELECT * FROM uploaded_file ORDER BY created_at, id LIMIT 1")
	require.NoError(t, err)
	f, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[db.UploadedFile])
	require.NoError(t, err)
	return f
}

// snapshot reads what the tables hold, without what names a row.
func (b *bundle) snapshot(t *testing.T) world {
	t.Helper()
	read := func(sql string) []string {
		rows, err := b.pool.Query(b.ctx, sql)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}
	return world{
		rows: read(`SELECT (to_jsonb(f) - 'id' - 'key' - 'cdn' - 'pending_key' - 'idempotency_key' - 'idempotency_fingerprint')::text
FROM uploaded_file f ORDER BY 1`),
		usage:    read(`SELECT tenant_code || '/' || user_id || ': ' || bytes || ' bytes, ' || files || ' files' FROM uploaded_file_usage ORDER BY 1`),
		variants: read(`SELECT (to_jsonb(v) - 'id' - 'file_id' - 'key')::text FROM uploaded_file_variant v ORDER BY 1`),
		chunks:   read(`SELECT (to_jsonb(c) - 'key' - 'file_id')::text FROM uploaded_file_chunk c ORDER BY 1`),
		events:   read(`SELECT type || coalesce(' ' || rule, '') FROM uploaded_file_event ORDER BY 1`),
	}
}

// requireUsageMatchesRows: the usage the statements kept equals the sums
// over the rows that hold space (files and ready variants).
func (b *bundle) requireUsageMatchesRows(t *testing.T, label string) {
	t.Helper()
	var off []string
	rows, err := b.pool.Query(b.ctx, `
WITH holding AS (
    SELECT tenant_code, user_id, size_bytes, 1 AS files FROM uploaded_file
    WHERE deletion_pending_at IS NULL AND deleted_at IS NULL
    UNION ALL
    SELECT f.tenant_code, f.user_id, v.size_bytes, 0
    FROM uploaded_file_variant v JOIN uploaded_file f ON f.id = v.file_id WHERE v.size_bytes IS NOT NULL
), counted AS (
    SELECT tenant_code, coalesce(user_id, '') AS user_id, sum(size_bytes)::bigint AS bytes, sum(files)::bigint AS files
    FROM holding GROUP BY GROUPING SETS ((tenant_code, user_id), (tenant_code))
)
SELECT format('%s/%s: kept %s bytes in %s files, the rows hold %s in %s',
    coalesce(u.tenant_code, c.tenant_code), coalesce(u.user_id, c.user_id),
    coalesce(u.bytes, 0), coalesce(u.files, 0), coalesce(c.bytes, 0), coalesce(c.files, 0))
FROM uploaded_file_usage u FULL JOIN counted c ON c.tenant_code = u.tenant_code AND c.user_id = u.user_id
WHERE coalesce(u.bytes, 0) <> coalesce(c.bytes, 0) OR coalesce(u.files, 0) <> coalesce(c.files, 0)`)
	require.NoError(t, err)
	off, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Empty(t, off, "%s: usage equals the rows", label)
}

// writesRows matches a statement that inserts, updates or deletes file
// rows or usage rows (directly or through uploaded_file_usage_release).
var writesRows = regexp.MustCompile(`(?i)(UPDATE|INSERT\s+INTO|DELETE\s+FROM)\s+uploaded_file(_usage)?\b|uploaded_file_usage_release\(`)

// apart are the statements that write file or usage rows but meet no
// other statement on a row, and why (none today: every writer has a group).
var apart = map[string]string{}

// requireEveryWriterPaired fails for a statement of db/queries that writes
// file or usage rows and is in no group and not in apart.
func requireEveryWriterPaired(t *testing.T, groups []pairGroup) {
	t.Helper()
	paired := map[string]bool{}
	for _, g := range groups {
		for _, m := range g.moves {
			paired[m.name] = true
		}
	}
	var missing []string
	for _, q := range queryTexts(t) {
		if writesRows.MatchString(withoutComments(q.sql)) && !paired[q.name] && apart[q.name] == "" {
			missing = append(missing, q.name)
		}
	}
	require.Empty(t, missing, "statements that write file or usage rows with no pairs in TestStatementPairsInterleave (add them to a group, or to apart with why)")
	for name := range apart {
		require.False(t, paired[name], "%s is both paired and apart", name)
	}
}

// withoutComments is sql without its -- comments.
func withoutComments(sql string) string {
	var b strings.Builder
	for _, line := range strings.Split(sql, "\n") {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// one maps a :one statement's error to rows changed.
func one(err error) (int, error) {
	switch {
	case err == nil:
		return 1, nil
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil
	}
	return 0, err
}

// many maps a :many statement's answer to rows changed.
func many[R any](rows []R, err error) (int, error) { return len(rows), err }
