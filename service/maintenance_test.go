package service_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/storagefault"
	"github.com/uploadedfile/uploadedfile/service"
)

func TestPurgeUnusedBefore(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	ctx := context.Background()
	old, used := b.upload(alice), b.upload(alice)
	require.NoError(t, b.svc.MarkUsed(alice, []string{used.ID.String()}, nil, nil))
	b.clock.Advance(31 * 24 * time.Hour)
	young := b.upload(as("globex", "bob"))

	n, err := b.svc.UnsafeSystemPurgeUnusedBefore(ctx, b.clock.Now().Add(-30*24*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.False(t, b.hasObject(old.Key), "unused and old: purged")
	require.True(t, b.hasObject(used.Key), "used files stay")
	require.True(t, b.hasObject(young.Key), "young files stay")
	b.checkInvariants()
}

// TestSweepFaults: a storage failure inside each sweep releases the row to a
// retry one minute ahead; the rest of the batch still advances, and the next
// run finishes it.
func TestSweepFaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, c := range map[string]struct {
		prepare func(b *bundle) int // returns how many rows the sweep should finish
		sweep   func(b *bundle) (int, error)
		retry   func(b *bundle) (int, error) // what finishes a released row; default sweep
	}{
		"temporary": {
			prepare: func(b *bundle) int {
				for range 3 {
					_, err := b.svc.UploadTemporary(alice, bytesReader(pdf), "r.pdf", nil)
					require.NoError(b.t, err)
				}
				b.clock.Advance(24 * time.Hour)
				return 3
			},
			sweep: func(b *bundle) (int, error) { return b.svc.CleanupExpiredTemporaryFiles(ctx, nil, 0) },
			// A claimed temporary file is no longer the temporary sweep's:
			// its released claim is the deletion-retry sweep's.
			retry: func(b *bundle) (int, error) { return b.svc.UnsafeSystemRetryPendingDeletions(ctx, 0) },
		},
		"staging": {
			prepare: func(b *bundle) int {
				body := realDOCX(b.t)
				for range 3 {
					init, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, body), nil)
					require.NoError(b.t, err)
					b.write(alice, init, body)
					_, err = b.svc.CompleteUpload(alice, init.ID.String())
					require.NoError(b.t, err)
				}
				b.clock.Advance(time.Hour) // the upload targets have expired
				return 3
			},
			sweep: func(b *bundle) (int, error) { return b.svc.UnsafeSystemCleanupCompletedStaging(ctx, 0) },
		},
		"pending": {
			prepare: func(b *bundle) int {
				body := realDOCX(b.t)
				for range 3 {
					init, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, body), nil)
					require.NoError(b.t, err)
					b.write(alice, init, body)
				}
				b.clock.Advance(2 * time.Hour)
				return 3
			},
			sweep: func(b *bundle) (int, error) { return b.svc.CleanupPendingUploads(ctx, 0) },
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, service.DriverS3)
			want := c.prepare(b)
			b.store.Inject(storagefault.Fault{Op: storagefault.OpDelete, Mode: storagefault.Before, Nth: 1})
			n, err := c.sweep(b)
			require.NoError(t, err)
			require.Equal(t, want-1, n, "the failing row does not stop the others")
			b.checkInvariants()
			retry := c.retry
			if retry == nil {
				retry = c.sweep
			}
			n, err = retry(b)
			require.NoError(t, err)
			require.Zero(t, n, "the failed row waits for its retry marker")
			b.clock.Advance(time.Minute)
			n, err = retry(b)
			require.NoError(t, err)
			require.Equal(t, 1, n, "and is finished after it")
			b.checkInvariants()
		})
	}
}

// TestFailedFinalizationReleasesTheClaim: rule 6 -- when settling a
// deletion fails after its bytes are gone, the claim is released to the
// one-minute retry marker like a storage failure, and the retry sweep
// finishes it.
func TestFailedFinalizationReleasesTheClaim(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	r := b.upload(alice)
	b.db.failNext.Store("FileSettleDeletion")
	require.NoError(t, b.svc.DeleteByID(alice, r.ID.String()), "the file is gone for every reader")
	row := b.row(r.ID)
	require.Nil(t, row.DeletedAt)
	require.Equal(t, b.clock.Now().Add(time.Minute), row.DeletionPendingAt.UTC(), "released to the retry marker, not left to the lease")
	b.clock.Advance(time.Minute)
	n, err := b.svc.UnsafeSystemRetryPendingDeletions(context.Background(), 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NotNil(t, b.row(r.ID).DeletedAt)
	b.checkInvariants()
}

// TestPurgeDoesNotStallBehindIneligibleRows: more than a batch of old,
// never-used files the purge must not take (quarantined) in front of
// eligible ones: the eligible ones are purged all the same (the candidates
// used to include rows the update refused, and a batch of those ended the
// run having done nothing).
func TestPurgeDoesNotStallBehindIneligibleRows(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	ctx := context.Background()
	var ids []string
	for i := range 160 {
		f, err := b.svc.Upload(alice, strings.NewReader(fmt.Sprintf("row %d\n", i)), "rows.csv", nil)
		require.NoError(t, err)
		ids = append(ids, f.ID.String())
	}
	// The first 150 are older than the rest and quarantined.
	b.exec(`UPDATE uploaded_file SET status = 'quarantined', created_at = created_at - interval '10 days' WHERE id = ANY($1::uuid[])`, ids[:150])
	b.exec(`UPDATE uploaded_file SET created_at = created_at - interval '5 days' WHERE id = ANY($1::uuid[])`, ids[150:])
	n, err := b.svc.UnsafeSystemPurgeUnusedBefore(ctx, b.clock.Now().Add(-24*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 10, n, "the ten eligible files, behind 150 that are not")
	var quarantined int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM uploaded_file WHERE status = 'quarantined' AND deletion_pending_at IS NULL AND deleted_at IS NULL").Scan(&quarantined))
	require.Equal(t, 150, quarantined, "the quarantined files stay")
}

// Buffer-upload tombstones are passed again forever (their writer may
// still write); a thousand of them must not fill every run of the pending
// track ahead of an upload abandoned since, whose reserved space only its
// first claim gives back, nor leave nothing for the steps after them.
func TestTombstonesDoNotStarveAbandonedUploads(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	ctx := context.Background()
	now := b.clock.Now()
	// 1,200 tombstones, older than anything else, their retry elapsed.
	b.exec(`INSERT INTO uploaded_file (id, tenant_code, department_code, user_id, key, original_name, size_bytes, content_type, status,
    upload_pending_at, deletion_pending_at, deleted_at, created_at, updated_at)
SELECT gen_random_uuid(), 'acme', 'sales', 'bob', 'core/acme/tomb-' || i || '.pdf', 'tomb.pdf', 10, 'application/pdf', 'pending',
    $1::timestamptz - interval '2 days', $1::timestamptz - interval '1 minute', $1::timestamptz - interval '1 day',
    $1::timestamptz - interval '2 days', $1::timestamptz - interval '1 day'
FROM generate_series(1, 1200) AS i`, now)
	// An upload whose writer died an hour ago: hidden, its lease past,
	// its space still reserved.
	abandoned := b.upload(alice)
	b.exec("UPDATE uploaded_file SET status = 'pending', completed_at = NULL, upload_pending_at = $2 WHERE id = $1", abandoned.ID, now.Add(-time.Hour))
	usage := func() (files int64) {
		require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT files FROM uploaded_file_usage WHERE tenant_code = 'acme' AND user_id = 'alice'").Scan(&files))
		return files
	}
	require.EqualValues(t, 1, usage())

	// One run of the pending track: ten batches of 100 rows.
	passed := 0
	for range 10 {
		n, err := b.svc.CleanupPendingUploads(ctx, 100)
		require.NoError(t, err)
		passed += n
		if n == 0 {
			break
		}
	}
	row := b.row(abandoned.ID)
	require.NotNil(t, row.DeletedAt, "the abandoned upload was claimed and settled in the first run (%d rows passed)", passed)
	require.EqualValues(t, 0, usage(), "its reserved space is given back")
	var passedAgain int
	require.NoError(t, b.db.Pool.QueryRow(ctx, "SELECT count(*) FROM uploaded_file WHERE user_id = 'bob' AND deletion_pending_at > $1", now).Scan(&passedAgain))
	require.LessOrEqual(t, passedAgain, 500, "tombstones passing again take at most half of each batch")
	require.Positive(t, passedAgain, "tombstones still pass again")
}
