package db_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/outage"
	"github.com/uploadedfile/uploadedfile/internal/testkit/interleave"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
)

// changeFiles locks both sides of a change with one statement, in id
// order: the second caller of a swap queues behind the first, and once the
// first commits it finds the file the first dropped no longer visible (a
// clean zero-row loser), whichever order the callers name the files in.
func TestChangeFilesLockOrderInterleaving(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fa, fb := b.ready(t, fileOpts{}), b.ready(t, fileOpts{})
	lock := func(s *interleave.Session, refs ...string) (interleave.Outcome, []db.UploadedFile, error) {
		var rows []db.UploadedFile
		out, err := s.Step(func(ctx context.Context) error {
			var err error
			rows, err = b.q.FileLockVisibleByReferences(ctx, s.Tx(), db.FileLockVisibleByReferencesParams{Refs: refs, TenantCode: "acme"})
			return err
		})
		return out, rows, err
	}
	for _, first := range []bool{true, false} {
		one, two := interleave.Open(t, b.pool, "A"), interleave.Open(t, b.pool, "B")
		if !first {
			one, two = two, one
		}
		one.Begin()
		two.Begin()
		out, rows, err := lock(one, fa.Key, fb.Key) // drops A, attaches B
		require.NoError(t, err)
		require.Equal(t, interleave.Done, out)
		require.Len(t, rows, 2)
		out, _, err = lock(two, fb.Key, fa.Key) // drops B, attaches A
		require.NoError(t, err)
		require.Equal(t, interleave.Blocked, out, "%s: the second caller queues on the first id", interleave.Order(one, two))
		// The first caller drops A and commits.
		_, err = one.Exec("UPDATE uploaded_file SET deletion_pending_at = $2 WHERE id = $1", fa.ID, t0)
		require.NoError(t, err)
		require.NoError(t, one.Commit())
		require.NoError(t, two.Finish(), "no deadlock")
		two.Rollback()
		// The second caller sees only B: A is no longer visible, so the
		// service refuses its change whole.
		rows, err = b.q.FileLockVisibleByReferences(b.ctx, b.pool, db.FileLockVisibleByReferencesParams{Refs: []string{fb.Key, fa.Key}, TenantCode: "acme"})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		require.Equal(t, fb.ID, rows[0].ID)
		b.exec(t, "UPDATE uploaded_file SET deletion_pending_at = NULL WHERE id = $1", fa.ID)
	}
}

// A deadlock PostgreSQL breaks is classified as a conflict (retryable,
// nothing applied), not as the database being unavailable.
func TestDeadlockIsAConflict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fa, fb := b.ready(t, fileOpts{}), b.ready(t, fileOpts{})
	one, two := interleave.Open(t, b.pool, "A"), interleave.Open(t, b.pool, "B")
	one.Begin()
	two.Begin()
	lockRow := func(s *interleave.Session, id any) (interleave.Outcome, error) {
		tx := db.ClassifyTx(s.Tx())
		return s.Step(func(ctx context.Context) error {
			_, err := tx.Exec(ctx, "SELECT 1 FROM uploaded_file WHERE id = $1 FOR UPDATE", id)
			return err
		})
	}
	_, err := lockRow(one, fa.ID)
	require.NoError(t, err)
	_, err = lockRow(two, fb.ID)
	require.NoError(t, err)
	out, err := lockRow(one, fb.ID)
	require.NoError(t, err)
	require.Equal(t, interleave.Blocked, out)
	// B now waits for A while A waits for B: PostgreSQL aborts one of them.
	out, errB := lockRow(two, fa.ID)
	if out == interleave.Blocked {
		errB = two.Finish()
	}
	errA := one.Finish()
	require.True(t, (errA == nil) != (errB == nil), "exactly one is aborted: %v / %v", errA, errB)
	err = errors.Join(errA, errB)
	require.Equal(t, "40P01", interleave.SQLState(err))
	require.ErrorIs(t, err, db.ErrConflict)
	require.False(t, errors.Is(err, outage.ErrUnavailable), "a deadlock is not an outage")
}

// The one lock order of usage rows is byte order, whatever the database's
// collation. On an ICU en-US database "a" sorts before "B", bytes put "B"
// first: a group-committed batch of inserts (sorted by bytes in Go) for
// tenants "B" and "a" against a release over both (the purge, a sweep)
// must queue, not deadlock.
func TestUsageLockOrderIgnoresCollation(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewICU(t, "en-US")
	ctx := context.Background()
	var aFirst bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT 'a' < 'B'").Scan(&aFirst))
	require.True(t, aFirst, "the database sorts text by its ICU collation")
	_, err := pool.Exec(ctx, `INSERT INTO uploaded_file_usage (tenant_code, user_id, bytes, files)
VALUES ('B', '', 100, 1), ('B', 'u', 100, 1), ('a', '', 100, 1), ('a', 'u', 100, 1)`)
	require.NoError(t, err)

	batch, release := interleave.Open(t, pool, "insert batch"), interleave.Open(t, pool, "release")
	batch.Begin()
	release.Begin()
	reserve := func(tenant string) (interleave.Outcome, error) {
		return batch.Exec("UPDATE uploaded_file_usage SET bytes = bytes + 1 WHERE tenant_code = $1 AND user_id IN ('', 'u')", tenant)
	}
	out, err := reserve("B") // the batch's first insert: "B" < "a" in bytes
	require.NoError(t, err)
	require.Equal(t, interleave.Done, out)
	out, err = release.Exec("SELECT uploaded_file_usage_release(ARRAY['a', 'B'], ARRAY['u', 'u'], ARRAY[1, 1]::bigint[], 1)")
	require.NoError(t, err)
	require.Equal(t, interleave.Blocked, out, "the release waits on B before it holds a")
	out, err = reserve("a") // the batch's second insert
	require.NoError(t, err, "no deadlock")
	require.Equal(t, interleave.Done, out, "a is free: the release locks in byte order")
	require.NoError(t, batch.Commit())
	require.NoError(t, release.Finish())
	require.NoError(t, release.Commit())
}

// A buffer upload's key (on its file's row) and another route's key (a row
// of uploaded_file_idempotency) meet on the idempotency table's primary
// key, whichever runs first: the second waits for the first to commit, then
// finds the key taken -- the claim gets zero rows, the upload fails with
// UFK01 and writes and reserves nothing. The same key never runs on two
// routes.
func TestBufferUploadKeyMeetsOtherRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, bufferFirst := range []bool{true, false} {
		key := "key-" + uuid.NewString()
		p := b.hiddenParams(t)
		p.IdempotencyKey, p.IdempotencyFingerprint = &key, []byte("fingerprint")
		upload, other := interleave.Open(t, b.pool, "buffer upload"), interleave.Open(t, b.pool, "initiate")
		upload.Begin()
		other.Begin()
		insert := func() (interleave.Outcome, error) {
			return upload.Step(func(ctx context.Context) error {
				_, err := insertHidden(ctx, upload.Tx(), p)
				return err
			})
		}
		claim := func() (interleave.Outcome, error) {
			return other.Step(func(ctx context.Context) error {
				_, err := b.q.IdempotencyClaim(ctx, other.Tx(), db.IdempotencyClaimParams{
					TenantCode: p.TenantCode, Caller: p.UserID, Key: key, Route: "POST /uploaded-file/initiate",
					FileID: ptr(uuid.New()), Lease: 30 * time.Second, Retention: 24 * time.Hour, Now: at(0),
				})
				return err
			})
		}
		if bufferFirst {
			out, err := insert()
			require.NoError(t, err)
			require.Equal(t, interleave.Done, out)
			out, err = claim()
			require.NoError(t, err)
			require.Equal(t, interleave.Blocked, out, "the claim waits for the upload's key")
			require.NoError(t, upload.Commit())
			require.ErrorIs(t, other.Finish(), pgx.ErrNoRows, "the key is taken: zero rows")
			other.Rollback()
			continue
		}
		out, err := claim()
		require.NoError(t, err)
		require.Equal(t, interleave.Done, out)
		out, err = insert()
		require.NoError(t, err)
		require.Equal(t, interleave.Blocked, out, "the upload waits for the claim")
		require.NoError(t, other.Commit())
		err = upload.Finish()
		require.Equal(t, "UFK01", interleave.SQLState(err), "the upload is refused: %v", err)
		upload.Rollback()
		var files int
		require.NoError(t, b.pool.QueryRow(b.ctx, "SELECT count(*) FROM uploaded_file WHERE idempotency_key = $1", key).Scan(&files))
		require.Zero(t, files, "nothing written")
	}
}

// TestResumableClaimsMeet: two requests claim a resumable upload's write
// lease at the same offset at once; the second queues on the row, then
// finds the lease held and gets zero rows (it waits the lease out or
// answers 423) -- never two writers of one upload. An abort that meets a
// writer's claim queues too, then claims the deletion: the writer's
// advance then matches nothing (its chunk is given up with the upload).
func TestResumableClaimsMeet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.pending(t, fileOpts{})
	_, err := b.pool.Exec(b.ctx, "UPDATE uploaded_file SET resumable_offset = 0, checksum = NULL WHERE id = $1", p.ID)
	require.NoError(t, err)
	claim := func(s *interleave.Session) (interleave.Outcome, error) {
		return s.Step(func(ctx context.Context) error {
			_, err := b.q.FileClaimResumableWrite(ctx, s.Tx(), db.FileClaimResumableWriteParams{
				ID: p.ID, TenantCode: p.TenantCode, AtOffset: 0, Lease: 3 * time.Second, Now: at(0),
			})
			return err
		})
	}
	one, two := interleave.Open(t, b.pool, "first writer"), interleave.Open(t, b.pool, "second writer")
	one.Begin()
	two.Begin()
	out, err := claim(one)
	require.NoError(t, err)
	require.Equal(t, interleave.Done, out)
	out, err = claim(two)
	require.NoError(t, err)
	require.Equal(t, interleave.Blocked, out, "the second writer queues on the row")
	require.NoError(t, one.Commit())
	require.ErrorIs(t, two.Finish(), pgx.ErrNoRows, "the lease is held: zero rows")
	two.Rollback()
	lease := *b.get(t, p.ID).ResumableLeaseUntil

	writer, abort := interleave.Open(t, b.pool, "writer"), interleave.Open(t, b.pool, "abort")
	writer.Begin()
	abort.Begin()
	out, err = writer.Step(func(ctx context.Context) error {
		_, err := b.q.FileExtendResumableWrite(ctx, writer.Tx(), db.FileExtendResumableWriteParams{ID: p.ID, Claim: lease, Lease: 3 * time.Second, Now: at(0)})
		return err
	})
	require.NoError(t, err)
	require.Equal(t, interleave.Done, out)
	out, err = abort.Step(func(ctx context.Context) error {
		_, err := b.q.FileClaimAbort(ctx, abort.Tx(), db.FileClaimAbortParams{ID: p.ID, TenantCode: p.TenantCode, DeletionLease: time.Minute, Now: at(0)})
		return err
	})
	require.NoError(t, err)
	require.Equal(t, interleave.Blocked, out, "the abort queues on the writer's row")
	require.NoError(t, writer.Commit())
	require.NoError(t, abort.Finish(), "then claims the deletion")
	require.NoError(t, abort.Commit())
	_, err = b.q.FileAdvanceResumable(b.ctx, b.pool, db.FileAdvanceResumableParams{
		ID: p.ID, AtOffset: 0, NewOffset: 10, Size: 10, Claim: *b.get(t, p.ID).ResumableLeaseUntil, Now: at(0),
	})
	require.ErrorIs(t, err, pgx.ErrNoRows, "the writer's advance matches nothing: the upload is being deleted")
}
