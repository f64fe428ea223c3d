package service

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"

	"github.com/uploadedfile/uploadedfile/db"
)

// MarkUsed marks the files ids as used by a domain record, with optional
// provenance. With tx (the caller's transaction) it verifies and updates
// through it and opens none; without, it runs in exactly one transaction of
// its own. The batch is marked whole or not at all: an id that is missing,
// malformed or out of scope refuses it with ErrNotFound.
//
// Provenance is not an authorization decision: load and authorize the
// domain record in your own model before marking files used by it.
func (s *Service) MarkUsed(ctx context.Context, ids []string, meta *Meta, tx db.Tx) error {
	uids, err := parseIDs(ids)
	if err != nil {
		return err
	}
	if err := validMeta(meta); err != nil {
		return err
	}
	a, err := s.authorize(ctx, OpAttach, uids, nil)
	if err != nil {
		return err
	}
	m := meta
	if m == nil {
		m = &Meta{}
	}
	return s.inTx(ctx, tx, func(tx db.Tx) error {
		locked, err := s.q.FileLockVisibleByIDs(ctx, tx, db.FileLockVisibleByIDsParams{
			IDs: uids, TenantCode: a.scope.TenantCode, DepartmentCode: a.scope.DepartmentCode, OwnerUserID: a.ownerUserID(),
		})
		if err != nil {
			return s.internalError(ctx, ErrUploadFailed, "lock files to mark used", err)
		}
		if len(locked) != len(uids) {
			return ErrNotFound
		}
		_, err = s.q.FileMarkUsedByIDs(ctx, tx, db.FileMarkUsedByIDsParams{
			IDs: uids, TenantCode: a.scope.TenantCode, DepartmentCode: a.scope.DepartmentCode, OwnerUserID: a.ownerUserID(),
			Module: optional(m.Module), Entity: optional(m.Entity), EntityID: optional(m.EntityID), Type: optional(m.Type), Now: s.now(),
		})
		if err != nil {
			return s.internalError(ctx, ErrUploadFailed, "mark files used", err)
		}
		return nil
	})
}

// UseFiles marks the files with the given exact references as used by
// entity/entityID, in one transaction, whole or not at all.
func (s *Service) UseFiles(ctx context.Context, refs []string, entity, entityID string) error {
	refs, err := checkRefs(refs)
	if err != nil {
		return err
	}
	if err := validMeta(&Meta{Entity: entity, EntityID: entityID}); err != nil {
		return err
	}
	a, err := s.authorize(ctx, OpAttach, nil, refs)
	if err != nil {
		return err
	}
	return s.inTx(ctx, nil, func(tx db.Tx) error {
		if err := s.lockRefs(ctx, tx, a, refs); err != nil {
			return err
		}
		return s.markRefs(ctx, tx, a, refs, entity, entityID)
	})
}

func (s *Service) markRefs(ctx context.Context, tx db.Tx, a access, refs []string, entity, entityID string) error {
	_, err := s.q.FileMarkUsedByReferences(ctx, tx, db.FileMarkUsedByReferencesParams{
		Refs: refs, TenantCode: a.scope.TenantCode, DepartmentCode: a.scope.DepartmentCode, OwnerUserID: a.ownerUserID(),
		Entity: optional(entity), EntityID: optional(entityID), Now: s.now(),
	})
	if err != nil {
		return s.internalError(ctx, ErrUploadFailed, "mark files used by reference", err)
	}
	return nil
}

// ChangeFiles replaces a record's files: the files in olds (and not in
// news) are deleted durably, the files in news are marked used by
// entity/entityID. Both sides are checked and claimed in one transaction;
// the old bytes are deleted after it commits.
func (s *Service) ChangeFiles(ctx context.Context, olds, news []string, entity, entityID string) error {
	if len(olds)+len(news) == 0 || len(olds) > BatchLimit || len(news) > BatchLimit {
		return ErrInvalidMeta
	}
	if err := validMeta(&Meta{Entity: entity, EntityID: entityID}); err != nil {
		return err
	}
	keep := make(map[string]bool, len(news))
	for _, n := range news {
		keep[n] = true
	}
	var drop []string
	for _, o := range olds {
		if !keep[o] {
			drop = append(drop, o)
		}
	}
	all := append(append([]string{}, drop...), news...)
	if _, err := checkRefs(all); err != nil {
		return err
	}
	a, err := s.authorize(ctx, OpChangeFiles, nil, all)
	if err != nil {
		return err
	}
	var claimed []db.UploadedFile
	err = s.inTx(ctx, nil, func(tx db.Tx) error {
		// Both sides are locked by one statement, in id order, before
		// either changes: two callers swapping the same files queue on
		// the first id instead of each holding what the other waits for.
		allRefs, _ := checkRefs(all)
		if err := s.lockRefs(ctx, tx, a, allRefs); err != nil {
			return err
		}
		if len(news) > 0 {
			newRefs, _ := checkRefs(news)
			if err := s.markRefs(ctx, tx, a, newRefs, entity, entityID); err != nil {
				return err
			}
		}
		if len(drop) > 0 {
			dropRefs, _ := checkRefs(drop)
			var err error
			if claimed, err = s.claimLockedRefs(ctx, tx, a, dropRefs, true); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.finishDeletions(ctx, claimed)
	return nil
}

// SetExtraData merges patch (a partial of T, marshalled to a JSON object)
// into a visible file's extra data: keys of patch replace stored keys, in
// one statement, so concurrent partial updates never lose each other.
func SetExtraData[T any](ctx context.Context, s *Service, id string, patch T) error {
	uid, err := parseID(id)
	if err != nil {
		return err
	}
	b, err := extraDataJSON(patch)
	if err != nil {
		return err
	}
	a, err := s.authorize(ctx, OpUpdate, []uuid.UUID{uid}, nil)
	if err != nil {
		return err
	}
	_, err = s.q.FileMergeExtraData(ctx, s.db, db.FileMergeExtraDataParams{
		ID: uid, Patch: json.RawMessage(b), MaxBytes: MaxExtraDataBytes, TenantCode: a.scope.TenantCode, DepartmentCode: a.scope.DepartmentCode,
		OwnerUserID: a.ownerUserID(), Now: s.now(),
	})
	switch {
	case db.ExtraDataTooLarge(err):
		return ErrExtraDataTooLarge
	case err != nil:
		return s.lookupError(ctx, err)
	}
	return nil
}
