package db

// The filtered tenant and owner lists (FileList*Filtered in
// queries/file_list.sql) walk at most a scan budget of the scope's visible
// rows and say of each row returned whether it passed the list's filters
// (Matched) and how far into the walk it came (Walked): the row on which
// the budget ran out comes back whether or not it matched, so the caller
// knows where to resume. The rescan's batches (FileRescan*Batch in
// queries/file_quarantine.sql) walk the same way. These row types have
// the same columns; each converts to FileListOwnerByCreatedFilteredRow.

// WalkRow is a row of a walk: a filtered list's or a rescan batch's.
type WalkRow interface {
	FileListOwnerByCreatedFilteredRow | FileListOwnerByNameFilteredRow | FileListOwnerBySizeFilteredRow |
		FileListTenantByCreatedFilteredRow | FileListTenantByNameFilteredRow | FileListTenantBySizeFilteredRow |
		FileListDepartmentByCreatedFilteredRow | FileListDepartmentByNameFilteredRow | FileListDepartmentBySizeFilteredRow |
		FileRescanBatchRow | FileRescanTenantBatchRow
}

// Walk splits the rows of a walk of at most budget rows: the files that
// matched, in order, and the file the walk ended on when it read the
// whole budget (nil when it reached the end of its scope first).
func Walk[R WalkRow](rows []R, budget int64) (matched []UploadedFile, last *UploadedFile) {
	matched = make([]UploadedFile, 0, len(rows))
	for _, r := range rows {
		w := FileListOwnerByCreatedFilteredRow(r)
		f := w.File()
		if w.Matched {
			matched = append(matched, f)
		}
		if w.Walked == budget {
			last = &f
		}
	}
	return matched, last
}

// File is the row's file, without the walk's columns.
func (r FileListOwnerByCreatedFilteredRow) File() UploadedFile {
	return UploadedFile{
		ID:                     r.ID,
		TenantCode:             r.TenantCode,
		DepartmentCode:         r.DepartmentCode,
		UserID:                 r.UserID,
		Key:                    r.Key,
		CDN:                    r.CDN,
		OriginalName:           r.OriginalName,
		SizeBytes:              r.SizeBytes,
		ContentType:            r.ContentType,
		Visibility:             r.Visibility,
		IsTemporary:            r.IsTemporary,
		UploadPendingAt:        r.UploadPendingAt,
		DeletionPendingAt:      r.DeletionPendingAt,
		ExpiredAt:              r.ExpiredAt,
		ExtraData:              r.ExtraData,
		Module:                 r.Module,
		Entity:                 r.Entity,
		EntityID:               r.EntityID,
		Type:                   r.Type,
		UsedAt:                 r.UsedAt,
		CreatedAt:              r.CreatedAt,
		UpdatedAt:              r.UpdatedAt,
		DeletedAt:              r.DeletedAt,
		Status:                 r.Status,
		PendingKey:             r.PendingKey,
		Checksum:               r.Checksum,
		ETag:                   r.ETag,
		Disposition:            r.Disposition,
		CompletedAt:            r.CompletedAt,
		UploadExpiresAt:        r.UploadExpiresAt,
		CompletionLeaseUntil:   r.CompletionLeaseUntil,
		StagingCleanupAt:       r.StagingCleanupAt,
		Width:                  r.Width,
		Height:                 r.Height,
		IdempotencyKey:         r.IdempotencyKey,
		IdempotencyFingerprint: r.IdempotencyFingerprint,
		ResumableOffset:        r.ResumableOffset,
		ResumableLeaseUntil:    r.ResumableLeaseUntil,
	}
}
