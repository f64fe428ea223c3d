package db_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
)

// race runs fn once per goroutine, each on its own connection, all released
// at the same moment, and returns how many returned a row (nil error).
// Anything but success or pgx.ErrNoRows fails the test.
func (b *bundle) race(t *testing.T, fns ...func(conn *pgxpool.Conn) error) (wins []int) {
	t.Helper()
	var (
		start = make(chan struct{})
		mu    sync.Mutex
		wg    sync.WaitGroup
		errs  []error
	)
	for i, fn := range fns {
		conn, err := b.pool.Acquire(b.ctx)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Release()
			<-start
			err := fn(conn)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins = append(wins, i)
			case !errors.Is(err, pgx.ErrNoRows):
				errs = append(errs, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Empty(t, errs)
	return wins
}

func repeat[T any](n int, fn T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = fn
	}
	return out
}

const rounds = 20

func TestConcurrentCompletionClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range rounds {
		p := b.pending(t, fileOpts{})
		wins := b.race(t, repeat(4, func(c *pgxpool.Conn) error {
			_, err := b.q.FileClaimCompletion(b.ctx, c, db.FileClaimCompletionParams{ID: p.ID, TenantCode: "acme", ETag: ptr("e"), CompletionLease: completionLease, Now: at(0)})
			return err
		})...)
		require.Len(t, wins, 1, "exactly one instance may promote")
	}
}

func TestConcurrentCompletionTakeOver(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range rounds {
		c := b.completing(t, fileOpts{})
		wins := b.race(t, repeat(4, func(conn *pgxpool.Conn) error {
			_, err := b.q.FileTakeOverCompletion(b.ctx, conn, db.FileTakeOverCompletionParams{
				ID: c.ID, TenantCode: "acme", ETag: ptr("e"), ExpiredLease: *c.CompletionLeaseUntil, CompletionLease: completionLease, Now: at(completionLease),
			})
			return err
		})...)
		require.Len(t, wins, 1, "exactly one instance recovers an expired lease")
	}
}

func TestConcurrentCompleteAndAbort(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range rounds {
		p := b.pending(t, fileOpts{})
		wins := b.race(t,
			func(c *pgxpool.Conn) error {
				_, err := b.q.FileClaimCompletion(b.ctx, c, db.FileClaimCompletionParams{ID: p.ID, TenantCode: "acme", ETag: ptr("e"), CompletionLease: completionLease, Now: at(0)})
				return err
			},
			func(c *pgxpool.Conn) error {
				_, err := b.q.FileClaimAbort(b.ctx, c, db.FileClaimAbortParams{ID: p.ID, TenantCode: "acme", DeletionLease: deletionLease, Now: at(0)})
				return err
			})
		require.Len(t, wins, 1, "either the completion or the abort, never both")
		got := b.get(t, p.ID)
		if wins[0] == 0 {
			require.Equal(t, "completing", got.Status)
			require.Nil(t, got.DeletionPendingAt)
		} else {
			require.Equal(t, "pending", got.Status)
			require.NotNil(t, got.DeletionPendingAt)
		}
	}
}

func TestConcurrentDeletionClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range rounds {
		f := b.ready(t, fileOpts{})
		wins := b.race(t,
			func(c *pgxpool.Conn) error {
				_, err := b.q.FileClaimDeletion(b.ctx, c, db.FileClaimDeletionParams{ID: f.ID, TenantCode: "acme", DeletionLease: deletionLease, Now: at(0)})
				return err
			},
			func(c *pgxpool.Conn) error {
				_, err := b.q.FileClaimDeletion(b.ctx, c, db.FileClaimDeletionParams{ID: f.ID, TenantCode: "acme", OwnerUserID: ptr("alice"), DeletionLease: deletionLease, Now: at(0)})
				return err
			},
			func(c *pgxpool.Conn) error {
				rows, err := b.q.FileClaimDeletionByReferences(b.ctx, c, db.FileClaimDeletionByReferencesParams{Refs: []string{f.Key}, TenantCode: "acme", DeletionLease: deletionLease, Now: at(0)})
				if err == nil && len(rows) == 0 {
					return pgx.ErrNoRows
				}
				return err
			})
		require.Len(t, wins, 1, "exactly one deleter owns the claim")
	}
}

func TestConcurrentActivationAndSettledCleanup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	outcomes := map[int]int{}
	for range rounds * 2 {
		h := b.hidden(t, fileOpts{})
		wins := b.race(t,
			func(c *pgxpool.Conn) error {
				_, err := activateUpload(b.ctx, c, db.FileActivateUploadParams{ID: h.ID, UploadMarker: *h.UploadPendingAt, Now: at(time.Second)})
				return err
			},
			func(c *pgxpool.Conn) error {
				_, err := b.q.FileSettleFailedUpload(b.ctx, c, db.FileSettleFailedUploadParams{ID: h.ID, UploadMarker: *h.UploadPendingAt, DeletionLease: deletionLease, Now: at(time.Second)})
				return err
			},
			func(c *pgxpool.Conn) error { // maintenance, once the lease has expired
				rows, err := b.q.DeletionClaimExpiredTombstones(b.ctx, c, db.DeletionClaimExpiredTombstonesParams{Max: 100, PassLimit: 100, DeletionLease: deletionLease, Now: at(activationLease)})
				if err == nil && len(rows) == 0 {
					return pgx.ErrNoRows
				}
				return err
			})
		require.Len(t, wins, 1, "activation, settled cleanup and maintenance exclude each other")
		outcomes[wins[0]]++
		got := b.get(t, h.ID)
		switch wins[0] {
		case 0:
			require.Equal(t, "ready", got.Status)
			require.Nil(t, got.DeletionPendingAt)
		default:
			require.Equal(t, "pending", got.Status)
			require.NotNil(t, got.DeletionPendingAt, "claimed for deletion before any storage I/O")
		}
	}
	t.Logf("winners over %d rounds (activation, cleanup, maintenance): %v", rounds*2, outcomes)
}

// TestConcurrentSweepClaims: replicas sweeping at once claim disjoint rows,
// and together every eligible row exactly once.
func TestConcurrentSweepClaims(t *testing.T) {
	t.Parallel()
	const eligible, workers, max = 60, 4, 7

	type sweep struct {
		name    string
		fixture func(b *bundle, t *testing.T) uuid.UUID
		claim   func(b *bundle, c *pgxpool.Conn) ([]db.UploadedFile, error)
	}
	sweeps := []sweep{
		{"DeletionClaimElapsed", func(b *bundle, t *testing.T) uuid.UUID {
			f := b.ready(t, fileOpts{})
			_, err := b.q.FileClaimDeletion(b.ctx, b.pool, db.FileClaimDeletionParams{ID: f.ID, TenantCode: "acme", DeletionLease: deletionLease, Now: at(-time.Hour)})
			require.NoError(t, err)
			return f.ID
		}, func(b *bundle, c *pgxpool.Conn) ([]db.UploadedFile, error) {
			return b.q.DeletionClaimElapsed(b.ctx, c, db.DeletionClaimElapsedParams{Max: max, DeletionLease: deletionLease, Now: at(0)})
		}},
		{"DeletionClaimExpiredTombstones", func(b *bundle, t *testing.T) uuid.UUID {
			return b.hidden(t, fileOpts{Now: t0.Add(-time.Hour)}).ID
		}, func(b *bundle, c *pgxpool.Conn) ([]db.UploadedFile, error) {
			return asFiles(b.q.DeletionClaimExpiredTombstones(b.ctx, c, db.DeletionClaimExpiredTombstonesParams{Max: max, PassLimit: max, DeletionLease: deletionLease, Now: at(0)}))
		}},
		{"FileClaimExpiredDirectUploads", func(b *bundle, t *testing.T) uuid.UUID {
			return b.pending(t, fileOpts{Now: t0.Add(-cleanupLease)}).ID
		}, func(b *bundle, c *pgxpool.Conn) ([]db.UploadedFile, error) {
			return asFiles(b.q.FileClaimExpiredDirectUploads(b.ctx, c, db.FileClaimExpiredDirectUploadsParams{Max: max, DeletionLease: deletionLease, Now: at(0)}))
		}},
		{"FileClaimExpiredTemporary", func(b *bundle, t *testing.T) uuid.UUID {
			return b.ready(t, fileOpts{Temporary: true, Now: t0.Add(-25 * time.Hour)}).ID
		}, func(b *bundle, c *pgxpool.Conn) ([]db.UploadedFile, error) {
			return asFiles(b.q.FileClaimExpiredTemporary(b.ctx, c, db.FileClaimExpiredTemporaryParams{Max: max, DeletionLease: deletionLease, Now: at(0)}))
		}},
		{"FileClaimUnusedBefore", func(b *bundle, t *testing.T) uuid.UUID {
			return b.ready(t, fileOpts{Now: t0.Add(-48 * time.Hour)}).ID
		}, func(b *bundle, c *pgxpool.Conn) ([]db.UploadedFile, error) {
			return asFiles(b.q.FileClaimUnusedBefore(b.ctx, c, db.FileClaimUnusedBeforeParams{Cutoff: t0.Add(-24 * time.Hour), Max: max, DeletionLease: deletionLease, Now: at(0)}))
		}},
		{"StagingClaimCompleted", func(b *bundle, t *testing.T) uuid.UUID {
			c := b.completing(t, fileOpts{})
			_, err := b.q.FileFinalizeCompletion(b.ctx, b.pool, db.FileFinalizeCompletionParams{ID: c.ID, Lease: *c.CompletionLeaseUntil, RetainStaging: true, ClockSkew: clockSkew, Now: at(0)})
			require.NoError(t, err)
			return c.ID
		}, func(b *bundle, c *pgxpool.Conn) ([]db.UploadedFile, error) {
			return b.q.StagingClaimCompleted(b.ctx, c, db.StagingClaimCompletedParams{Max: max, StagingLease: deletionLease, Now: at(uploadTTL + clockSkew + time.Second)})
		}},
	}
	for _, s := range sweeps {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			want := make([]uuid.UUID, eligible)
			for i := range want {
				want[i] = s.fixture(b, t)
			}
			var (
				mu  sync.Mutex
				got []uuid.UUID
			)
			// Each worker sweeps until a batch comes back empty.
			b.race(t, repeat(workers, func(c *pgxpool.Conn) error {
				for {
					rows, err := s.claim(b, c)
					if err != nil {
						return err
					}
					if len(rows) == 0 {
						return nil
					}
					mu.Lock()
					got = append(got, ids(rows)...)
					mu.Unlock()
				}
			})...)
			require.ElementsMatch(t, want, got, "every eligible row claimed exactly once")
		})
	}
}

// TestConcurrentExtraDataMerge: partial updates of different keys never lose
// each other (a JSONB merge in one statement, not read-modify-write).
func TestConcurrentExtraDataMerge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.ready(t, fileOpts{})
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"}
	fns := make([]func(*pgxpool.Conn) error, len(keys))
	for i, k := range keys {
		fns[i] = func(c *pgxpool.Conn) error {
			_, err := b.q.FileMergeExtraData(b.ctx, c, db.FileMergeExtraDataParams{MaxBytes: maxExtraData, ID: f.ID, TenantCode: "acme", Patch: []byte(`{"` + k + `":true}`)})
			return err
		}
	}
	require.Len(t, b.race(t, fns...), len(keys))
	require.JSONEq(t, `{"a":1,"k0":true,"k1":true,"k2":true,"k3":true,"k4":true,"k5":true,"k6":true,"k7":true}`, string(b.get(t, f.ID).ExtraData))
}
