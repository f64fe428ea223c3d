package service_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/interleave"
	"github.com/uploadedfile/uploadedfile/service"
)

// Two host callers swapping the same two files between records at once
// (one drops A and attaches B, the other drops B and attaches A) meet on
// both rows. Both sides of a change are locked by one statement in id
// order, so one waits for the other and then finds its file claimed: the
// loser is told not-found (a clean zero-row answer), never that the
// database is unavailable, and nothing deadlocks.
func TestChangeFilesSwapsNeverDeadlock(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	const rounds = 30
	for round := range rounds {
		a, c := b.upload(alice), b.upload(alice)
		start := make(chan struct{})
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, swap := range [][2]string{{a.Key, c.Key}, {c.Key, a.Key}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = b.svc.ChangeFiles(alice, []string{swap[0]}, []string{swap[1]}, "invoice", "42")
			}()
		}
		close(start)
		wg.Wait()
		wins := 0
		for _, err := range errs {
			switch {
			case err == nil:
				wins++
			case errors.Is(err, service.ErrNotFound):
			default:
				t.Fatalf("round %d: a swap answered %v (want success or not-found)", round, err)
			}
		}
		require.GreaterOrEqual(t, wins, 1, "round %d: one swap wins", round)
	}
	b.checkInvariants()
}

// recount-usage against an upload that commits while it runs: the upload
// has reserved its space and inserted its row but not committed when the
// recount starts. The recount waits for it and counts it; it never
// overwrites the usage with sums that miss it.
func TestRecountDoesNotLoseAConcurrentUpload(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	b.upload(alice)
	upload := interleave.Open(t, b.db.Pool, "upload")
	upload.Begin()
	// What FileInsertHidden does in one statement: reserve, then insert.
	_, err := upload.Exec(`UPDATE uploaded_file_usage SET bytes = bytes + 1000, files = files + 1
WHERE tenant_code = 'acme' AND user_id IN ('', 'alice')`)
	require.NoError(t, err)
	_, err = upload.Exec(`INSERT INTO uploaded_file (id, tenant_code, department_code, user_id, key, original_name, size_bytes, content_type, status, completed_at, created_at, updated_at)
VALUES (gen_random_uuid(), 'acme', 'sales', 'alice', 'core/acme/late.pdf', 'late.pdf', 1000, 'application/pdf', 'ready', now(), now(), now())`)
	require.NoError(t, err)

	recount := interleave.Caller(t, b.db.Pool, "recount", upload)
	out, err := recount.Step(func(ctx context.Context) error {
		_, err := b.svc.UnsafeSystemRecountUsage(ctx, "")
		return err
	})
	require.NoError(t, err)
	require.Equal(t, interleave.Blocked, out, "the recount waits for the upload's usage rows")
	require.NoError(t, upload.Commit())
	require.NoError(t, recount.Finish())
	var bytes, files int64
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT bytes, files FROM uploaded_file_usage WHERE tenant_code = 'acme' AND user_id = ''").Scan(&bytes, &files))
	require.EqualValues(t, 2, files, "the upload that committed during the recount is counted")
	require.EqualValues(t, len(pdf)+1000, bytes)
}
