package service

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/uploadedfile/uploadedfile/db"
)

// The maintenance operations below bypass the tenant/owner scope and the
// authorization policy: they act across all tenants. They are for trusted
// background code only -- the cron tracks and the operator commands -- and
// are never served over HTTP. Each claims its rows by CAS before any storage
// I/O and returns how many rows it finished.

// batch returns limit bounded to (0, cleanupBatchSize]; 0 means the
// configured batch size.
func (s *Service) batch(limit int) int {
	if limit <= 0 || limit > s.cfg.CleanupBatchSize {
		return s.cfg.CleanupBatchSize
	}
	return limit
}

// finishAll finishes claimed rows and counts those settled or rescheduled.
func (s *Service) finishAll(ctx context.Context, rows []db.UploadedFile) int {
	n := 0
	for _, r := range rows {
		if s.finishDeletion(ctx, r) {
			n++
		}
	}
	recordSweep(ctx, len(rows), n)
	return n
}

// UnsafeSystemRetryPendingDeletions retries deletions: settled deletion
// claims whose lease or retry marker elapsed first, then, with the capacity
// left, expired upload tombstones. A row whose storage delete fails again
// is released one minute ahead, so the next batch moves on. Cross-tenant;
// trusted maintenance only.
func (s *Service) UnsafeSystemRetryPendingDeletions(ctx context.Context, limit int) (int, error) {
	done, _, err := s.retryDeletions(ctx, s.batch(limit))
	return done, err
}

// retryDeletions is UnsafeSystemRetryPendingDeletions over at most limit
// rows; it also reports how many rows it claimed.
func (s *Service) retryDeletions(ctx context.Context, limit int) (done, claimed int, err error) {
	rows, err := s.q.DeletionClaimElapsed(ctx, s.db, db.DeletionClaimElapsedParams{Max: int32(limit), DeletionLease: deletionLease, Now: s.now()})
	if err != nil {
		return 0, 0, s.internalError(ctx, ErrCleanupFailed, "claim elapsed deletions", err)
	}
	done, claimed = s.finishAll(ctx, rows), len(rows)
	if rest := limit - len(rows); rest > 0 {
		// Tombstones passing again take at most half of what is left, so
		// the steps after this one (staging, variants, orphans, the age
		// purge) are never starved by tombstones that pass forever.
		passes := max(1, rest/2)
		tombs, err := s.q.DeletionClaimExpiredTombstones(ctx, s.db, db.DeletionClaimExpiredTombstonesParams{Max: int32(rest), PassLimit: int32(passes), DeletionLease: deletionLease, Now: s.now()})
		if err != nil {
			return done, claimed, s.internalError(ctx, ErrCleanupFailed, "claim expired tombstones", err)
		}
		done += s.finishAll(ctx, changedRows(tombs))
		claimed += len(tombs)
	}
	return done, claimed, nil
}

// UnsafeSystemRetireUploadTombstone turns the expired upload tombstone id
// into an ordinary elapsed deletion retry, which the next retry sweep
// settles for good. It refuses (false) a live upload lease and a live
// deletion lease. Use it only after every producer is stopped and drained,
// when nothing can still write the object. Cross-tenant; operators only.
func (s *Service) UnsafeSystemRetireUploadTombstone(ctx context.Context, id uuid.UUID) (bool, error) {
	_, err := s.q.FileRetireTombstone(ctx, s.db, db.FileRetireTombstoneParams{ID: id, Now: s.now()})
	switch {
	case isNoRows(err):
		return false, nil
	case err != nil:
		return false, s.internalError(ctx, ErrCleanupFailed, "retire tombstone", err, "file_id", id)
	}
	return true, nil
}

// UnsafeSystemPurgeUnusedBefore deletes, durably, active permanent files
// never marked used and created before cutoff (the legacy age purge), up to
// ten batches. Cross-tenant; trusted maintenance only.
func (s *Service) UnsafeSystemPurgeUnusedBefore(ctx context.Context, cutoff time.Time) (int, error) {
	done := 0
	for range 10 {
		n, claimed, err := s.purgeUnused(ctx, cutoff, s.cfg.CleanupBatchSize)
		done += n
		if err != nil || claimed < s.cfg.CleanupBatchSize {
			return done, err
		}
	}
	return done, nil
}

// UnsafeSystemPurgeUnusedBatch is one batch of UnsafeSystemPurgeUnusedBefore,
// of at most limit rows (the pending track spends what is left of its
// run's budget on it). Cross-tenant; trusted maintenance only.
func (s *Service) UnsafeSystemPurgeUnusedBatch(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	done, _, err := s.purgeUnused(ctx, cutoff, s.batch(limit))
	return done, err
}

func (s *Service) purgeUnused(ctx context.Context, cutoff time.Time, max int) (done, claimed int, err error) {
	rows, err := s.q.FileClaimUnusedBefore(ctx, s.db, db.FileClaimUnusedBeforeParams{Cutoff: cutoff, Max: int32(max), DeletionLease: deletionLease, Now: s.now()})
	if err != nil {
		return 0, 0, s.internalError(ctx, ErrCleanupFailed, "claim unused files", err)
	}
	return s.finishAll(ctx, changedRows(rows)), len(rows), nil
}

// AbandonedUploadHold is the longest a direct upload whose client never
// completed nor aborted it holds its quota after its initiate, but for the
// interval of the track that releases it (the temporary track, every 15
// minutes by default): its target's lifetime (uploadUrlTtlSeconds), the
// completion lease, and the grace after which its cleanup lease elapses.
func (s *Service) AbandonedUploadHold() time.Duration {
	return s.cfg.uploadURLTTL + completionLease + directCleanupGrace
}

// ReleaseAbandonedUploads claims, for deletion, up to limit direct uploads
// whose cleanup lease elapsed without a complete or an abort -- their
// quota given back in the same statement, their objects then deleted --
// and returns how many it finished. The temporary track runs it, so a dead
// client's upload holds its space at most AbandonedUploadHold plus that
// track's interval, not until the daily pending track. Cross-tenant;
// trusted maintenance only.
func (s *Service) ReleaseAbandonedUploads(ctx context.Context, limit int) (int, error) {
	rows, err := s.q.FileClaimExpiredDirectUploads(ctx, s.db, db.FileClaimExpiredDirectUploadsParams{Max: int32(s.batch(limit)), DeletionLease: deletionLease, Now: s.now()})
	if err != nil {
		return 0, s.internalError(ctx, ErrCleanupFailed, "claim expired direct uploads", err)
	}
	return s.finishAll(ctx, changedRows(rows)), nil
}

// CleanupPendingUploads is the pending sweep of one batch of at most limit
// rows in all: direct uploads whose upload window and cleanup lease passed
// without completion are deleted (staging and final objects), then
// deletion retries run with the capacity left, then retained S3 staging
// objects are removed, then image variants whose generator or deleter died
// are deleted, then the chunks of resumable uploads that are over, then orphan repairs that died or failed
// (UnsafeSystemReconcile) are finished, each with what is still left.
// Cross-tenant; trusted maintenance only.
func (s *Service) CleanupPendingUploads(ctx context.Context, limit int) (int, error) {
	rest := s.batch(limit)
	rows, err := s.q.FileClaimExpiredDirectUploads(ctx, s.db, db.FileClaimExpiredDirectUploadsParams{Max: int32(rest), DeletionLease: deletionLease, Now: s.now()})
	if err != nil {
		return 0, s.internalError(ctx, ErrCleanupFailed, "claim expired direct uploads", err)
	}
	done := s.finishAll(ctx, changedRows(rows))
	rest -= len(rows)
	steps := []func(context.Context, int) (done, claimed int, err error){
		s.retryDeletions, s.cleanupStaging, s.sweepVariants, s.sweepChunks, s.retryOrphanClaims,
	}
	for _, step := range steps {
		if rest <= 0 {
			break
		}
		n, claimed, err := step(ctx, rest)
		done += n
		if err != nil {
			return done, err
		}
		rest -= claimed
	}
	return done, nil
}

// CleanupExpiredTemporaryFiles deletes ready temporary files expired
// exactly by their expired_at at now (nil: the database clock), one batch.
// Cross-tenant; trusted maintenance only.
func (s *Service) CleanupExpiredTemporaryFiles(ctx context.Context, now *time.Time, limit int) (int, error) {
	if now == nil {
		now = s.now()
	}
	rows, err := s.q.FileClaimExpiredTemporary(ctx, s.db, db.FileClaimExpiredTemporaryParams{Max: int32(s.batch(limit)), DeletionLease: deletionLease, Now: now})
	if err != nil {
		return 0, s.internalError(ctx, ErrCleanupFailed, "claim expired temporary files", err)
	}
	return s.finishAll(ctx, changedRows(rows)), nil
}

// UnsafeSystemCleanupCompletedStaging removes the staging objects S3 direct
// uploads keep after completion, one batch. Cross-tenant; trusted
// maintenance only.
func (s *Service) UnsafeSystemCleanupCompletedStaging(ctx context.Context, limit int) (int, error) {
	done, _, err := s.cleanupStaging(ctx, s.batch(limit))
	return done, err
}

// cleanupStaging is UnsafeSystemCleanupCompletedStaging over at most max
// rows; it also reports how many it claimed.
func (s *Service) cleanupStaging(ctx context.Context, max int) (done, claimed int, err error) {
	rows, err := s.q.StagingClaimCompleted(ctx, s.db, db.StagingClaimCompletedParams{Max: int32(max), StagingLease: deletionLease, Now: s.now()})
	if err != nil {
		return 0, 0, s.internalError(ctx, ErrCleanupFailed, "claim completed staging", err)
	}
	defer func() { recordSweep(ctx, len(rows), done) }()
	for _, r := range rows {
		claim := *r.StagingCleanupAt
		if err := s.store.Delete(ctx, *r.PendingKey); err != nil {
			s.log.WarnContext(ctx, "delete staging object failed; released for retry", "file_id", r.ID, "error", err.Error())
			_, _ = s.q.StagingRelease(ctx, s.db, db.StagingReleaseParams{ID: r.ID, Claim: claim, Backoff: DeletionRetryBackoff, Now: s.now()})
			continue
		}
		if _, err := s.q.StagingSettle(ctx, s.db, db.StagingSettleParams{ID: r.ID, Claim: claim, PendingKey: *r.PendingKey, Now: s.now()}); err == nil {
			done++
		}
	}
	return done, len(rows), nil
}

// BacklogCap bounds each count of UnsafeSystemSweepBacklog: a count at the
// cap means at least that many.
const BacklogCap = 100_000

// The kinds of sweep work UnsafeSystemSweepBacklog counts.
const (
	BacklogDeletionRetries  = "deletion-retries"  // settled deletion claims due again (pending track)
	BacklogExpiredUploads   = "expired-uploads"   // uploads never completed, past their window (both tracks)
	BacklogStagingObjects   = "staging-objects"   // S3 staging copies due for removal (both tracks)
	BacklogVariants         = "variants"          // variants whose generator or deleter died (pending track)
	BacklogOrphanClaims     = "orphan-claims"     // orphan repairs that died or failed (pending track)
	BacklogExpiredTemporary = "expired-temporary" // temporary files past their expiry (temporary track)
	BacklogIdempotencyKeys  = "idempotency-keys"  // idempotency keys past their 24 hours (temporary track)
)

// UnsafeSystemSweepBacklog counts, by kind, what the sweeps would take if
// they ran now, each count capped at BacklogCap. It locks nothing. Read
// after a run, it is what the run's ten batches left: a backlog that does
// not fall between runs means the track runs too rarely for the traffic
// (docs/operations.md, "Sizing the sweeps"). Cross-tenant; trusted
// maintenance only.
func (s *Service) UnsafeSystemSweepBacklog(ctx context.Context) (map[string]int64, error) {
	b, err := s.q.SweepBacklog(ctx, s.db, db.SweepBacklogParams{Cap: BacklogCap, Now: s.now()})
	if err != nil {
		return nil, s.internalError(ctx, ErrCleanupFailed, "count the sweep backlog", err)
	}
	return map[string]int64{
		BacklogDeletionRetries:  b.DeletionRetries,
		BacklogExpiredUploads:   b.ExpiredUploads,
		BacklogStagingObjects:   b.StagingObjects,
		BacklogVariants:         b.Variants,
		BacklogOrphanClaims:     b.OrphanClaims,
		BacklogExpiredTemporary: b.ExpiredTemporary,
		BacklogIdempotencyKeys:  b.IdempotencyKeys,
	}, nil
}
