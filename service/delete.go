package service

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/uploadedfile/uploadedfile/db"
)

// DeleteByID aborts a pending direct upload or deletes a ready file. The
// deletion claim is committed before any storage I/O; if the storage then
// fails, the claim is released to a retry marker and the deletion-retry
// sweep finishes it -- the file is gone for every reader either way, so the
// call succeeds. ErrDeleteFailed means the claim itself could not be
// recorded and nothing changed.
func (s *Service) DeleteByID(ctx context.Context, id string) error {
	uid, err := parseID(id)
	if err != nil {
		return err
	}
	a, err := s.authorize(ctx, OpDelete, []uuid.UUID{uid}, nil)
	if err != nil {
		return err
	}
	claimed, err := s.q.FileClaimDeletion(ctx, s.db, db.FileClaimDeletionParams{
		ID: uid, TenantCode: a.scope.TenantCode, DepartmentCode: a.scope.DepartmentCode, OwnerUserID: a.ownerUserID(),
		DeletionLease: deletionLease, Now: s.now(),
	})
	row := db.UploadedFile(claimed)
	if isNoRows(err) {
		var aborted db.FileClaimAbortRow
		aborted, err = s.q.FileClaimAbort(ctx, s.db, db.FileClaimAbortParams{
			ID: uid, TenantCode: a.scope.TenantCode, DepartmentCode: a.scope.DepartmentCode, OwnerUserID: a.ownerUserID(),
			DeletionLease: deletionLease, Now: s.now(),
		})
		row = db.UploadedFile(aborted)
	}
	switch {
	case isNoRows(err):
		return ErrNotFound
	case err != nil:
		return s.internalError(ctx, ErrDeleteFailed, "claim deletion", err, "file_id", uid)
	}
	cctx, cancel := detached(ctx)
	defer cancel()
	s.finishDeletion(cctx, row)
	return nil
}

// Delete deletes the files with the given exact references (key or cdn)
// durably. The batch is claimed whole or not at all: a reference that
// matches no visible file in scope refuses it with ErrNotFound.
func (s *Service) Delete(ctx context.Context, refs []string) error {
	refs, err := checkRefs(refs)
	if err != nil {
		return err
	}
	a, err := s.authorize(ctx, OpDelete, nil, refs)
	if err != nil {
		return err
	}
	var claimed []db.UploadedFile
	err = s.inTx(ctx, nil, func(tx db.Tx) error {
		var err error
		claimed, err = s.claimByRefs(ctx, tx, a, refs, false)
		return err
	})
	if err != nil {
		return err
	}
	s.finishDeletions(ctx, claimed)
	return nil
}

// claimByRefs locks the files refs name (all of them must exist in scope),
// then claims them for deletion, in tx.
// With detach (changeFiles) each file's file.deleted event follows a
// file.detached one.
func (s *Service) claimByRefs(ctx context.Context, tx db.Tx, a access, refs []string, detach bool) ([]db.UploadedFile, error) {
	if err := s.lockRefs(ctx, tx, a, refs); err != nil {
		return nil, err
	}
	return s.claimLockedRefs(ctx, tx, a, refs, detach)
}

// claimLockedRefs claims the files refs name for deletion, once tx holds
// their locks (lockRefs).
func (s *Service) claimLockedRefs(ctx context.Context, tx db.Tx, a access, refs []string, detach bool) ([]db.UploadedFile, error) {
	claimed, err := s.q.FileClaimDeletionByReferences(ctx, tx, db.FileClaimDeletionByReferencesParams{
		Refs: refs, TenantCode: a.scope.TenantCode, DepartmentCode: a.scope.DepartmentCode, OwnerUserID: a.ownerUserID(),
		DeletionLease: deletionLease, Detach: detach, Now: s.now(),
	})
	if err != nil {
		return nil, s.internalError(ctx, ErrDeleteFailed, "claim deletion by references", err)
	}
	return changedRows(claimed), nil
}

// lockRefs locks the visible files refs name and checks that every
// reference matched one.
func (s *Service) lockRefs(ctx context.Context, tx db.Tx, a access, refs []string) error {
	rows, err := s.q.FileLockVisibleByReferences(ctx, tx, db.FileLockVisibleByReferencesParams{
		Refs: refs, TenantCode: a.scope.TenantCode, DepartmentCode: a.scope.DepartmentCode, OwnerUserID: a.ownerUserID(),
	})
	if err != nil {
		return s.internalError(ctx, ErrDeleteFailed, "lock references", err)
	}
	known := make(map[string]bool, 2*len(rows))
	for _, r := range rows {
		known[r.Key] = true
		if r.CDN != nil {
			known[*r.CDN] = true
		}
	}
	for _, ref := range refs {
		if !known[ref] {
			return ErrNotFound
		}
	}
	return nil
}

// finishDeletions finishes each claimed row, after the claims committed.
func (s *Service) finishDeletions(ctx context.Context, rows []db.UploadedFile) {
	cctx, cancel := detached(ctx)
	defer cancel()
	for _, r := range rows {
		s.finishDeletion(cctx, r)
	}
}

// finishDeletion deletes the objects of a row this worker claimed (its
// claim is row.DeletionPendingAt) -- its image variants first, each
// through its own claim, and a resumable upload's chunks -- then settles
// the claim. A storage
// failure releases the claim to a retry marker one minute ahead and is
// reported false; the sweeps retry. A row whose writer may still write its
// object (an upload tombstone) is rescheduled instead of settled.
func (s *Service) finishDeletion(ctx context.Context, row db.UploadedFile) bool {
	claim := *row.DeletionPendingAt
	if !s.deleteVariants(ctx, row) {
		s.releaseDeletion(ctx, row.ID, claim)
		return false
	}
	if row.ResumableOffset != nil {
		if err := s.trimChunks(ctx, row.ID, 0); err != nil {
			s.releaseDeletion(ctx, row.ID, claim)
			return false
		}
	}
	for _, key := range objectKeys(row) {
		if err := s.store.Delete(ctx, key); err != nil {
			s.log.WarnContext(ctx, "delete object failed; released for retry", "file_id", row.ID, "error", err.Error())
			s.releaseDeletion(ctx, row.ID, claim)
			return false
		}
	}
	var err error
	if row.UploadPendingAt != nil && writerMayStillWrite(row) {
		var notBefore = row.UploadPendingAt
		if row.UploadExpiresAt == nil {
			notBefore = nil
		}
		_, err = s.q.FileRescheduleTombstone(ctx, s.db, db.FileRescheduleTombstoneParams{
			ID: row.ID, Claim: claim, UploadMarker: *row.UploadPendingAt, Backoff: DeletionRetryBackoff, NotBefore: notBefore, Now: s.now(),
		})
	} else {
		_, err = s.q.FileSettleDeletion(ctx, s.db, db.FileSettleDeletionParams{ID: row.ID, Claim: claim, UploadMarker: row.UploadPendingAt, Now: s.now()})
	}
	if err != nil && !isNoRows(err) {
		// The finalization failed: release the claim like a storage
		// failure (rule 6), so the row waits one minute, not the lease.
		s.log.ErrorContext(ctx, "settle deletion failed; released for retry", "file_id", row.ID, "error", err.Error())
		s.releaseDeletion(ctx, row.ID, claim)
		return false
	}
	// Zero rows: the claim was taken over; its new holder settles it.
	return err == nil
}

// releaseDeletion moves the claim this worker holds to the retry marker one
// minute ahead. Zero rows: the claim was taken over, nothing to release.
func (s *Service) releaseDeletion(ctx context.Context, id uuid.UUID, claim time.Time) {
	_, err := s.q.FileReleaseDeletion(ctx, s.db, db.FileReleaseDeletionParams{ID: id, Claim: claim, Backoff: DeletionRetryBackoff, Now: s.now()})
	if err != nil && !isNoRows(err) {
		s.log.ErrorContext(ctx, "release deletion claim", "file_id", id, "error", err.Error())
	}
}

// writerMayStillWrite: a buffer upload's writer never reports back once it
// is a tombstone, so it may always still write; a direct upload's target
// can be written until its cleanup lease (upload_pending_at) has passed.
// updated_at is the database time of the claim.
func writerMayStillWrite(row db.UploadedFile) bool {
	if row.UploadExpiresAt == nil {
		return true
	}
	return row.UploadPendingAt.After(row.UpdatedAt)
}

// objectKeys lists every object a row may have, in the order they are
// deleted: a direct upload's staging key first, then the final key. A
// completer that stalled past its lease can still promote staging to final
// while a sweep deletes the row; once the staging object is gone no
// promotion can create the final key again, so deleting it second leaves
// nothing behind.
func objectKeys(row db.UploadedFile) []string {
	if row.PendingKey != nil && *row.PendingKey != row.Key {
		return []string{*row.PendingKey, row.Key}
	}
	return []string{row.Key}
}

// conflictTries bounds how often inTx runs a transaction that a
// concurrent one aborted (a deadlock PostgreSQL broke, a serialization
// failure) before it answers ErrConflict.
const conflictTries = 3

// inTx runs fn in tx when given (the caller's: no transaction is opened,
// and a conflict is the caller's to retry), otherwise in a transaction of
// its own, committed when fn succeeds. fn must change nothing but the
// database: a transaction of its own that a concurrent one aborted
// (ErrConflict) rolled back whole, and is run again, up to conflictTries
// times in all; then the answer is ErrConflict.
func (s *Service) inTx(ctx context.Context, tx db.Tx, fn func(db.Tx) error) error {
	if tx != nil {
		return fn(db.ClassifyTx(tx))
	}
	var err error
	for try := 1; try <= conflictTries; try++ {
		if err = s.inOneTx(ctx, fn); !errors.Is(err, ErrConflict) {
			return err
		}
		s.log.InfoContext(ctx, "transaction aborted by a concurrent one; run again", "try", try)
	}
	return err
}

// inOneTx runs fn in exactly one transaction of its own, committed when fn
// succeeds, and never again (fn may have changed more than the database).
func (s *Service) inOneTx(ctx context.Context, fn func(db.Tx) error) error {
	own, err := s.db.Begin(ctx)
	if err != nil {
		return s.internalError(ctx, ErrUploadFailed, "begin transaction", err)
	}
	defer own.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit this is a no-op
	if err := fn(own); err != nil {
		return err
	}
	if err := own.Commit(ctx); err != nil {
		return s.internalError(ctx, ErrUploadFailed, "commit transaction", err)
	}
	return nil
}

// DeletedSince reports whether the file id, within the caller's scope and
// under the same authorization as DeleteByID, was deleted (or its upload
// abandoned) at or after since: what a delete retried under an
// Idempotency-Key asks when the try that held the key died after
// committing -- the retry is answered as a success, not as 404. A file out
// of scope, missing or deleted earlier is false.
func (s *Service) DeletedSince(ctx context.Context, id string, since time.Time) (bool, error) {
	uid, err := parseID(id)
	if err != nil {
		return false, nil
	}
	a, err := s.authorize(ctx, OpDelete, []uuid.UUID{uid}, nil)
	if err != nil {
		return false, nil
	}
	deleted, err := s.q.FileDeletedSince(ctx, s.db, db.FileDeletedSinceParams{
		ID: uid, TenantCode: a.scope.TenantCode, DepartmentCode: a.scope.DepartmentCode, OwnerUserID: a.ownerUserID(), Since: since,
	})
	if err != nil {
		return false, s.internalError(ctx, ErrDeleteFailed, "read deletion", err, "file_id", uid)
	}
	return deleted, nil
}
